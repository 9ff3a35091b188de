package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newNSTTLCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ttl <id-or-prefix> <duration>",
		Short: "Remove a namespace's pages that go unused for a while",
		Long: `Set a namespace's idle TTL: every node that holds the namespace removes
its pages that no lookup has used for longer than the duration (Go syntax:
90s, 30m, 12h). 0 clears it: pages then stay until evicted for room.
Leased pages stay until their leases end.

The TTL lives in each node's memory: a node that restarts, or that learns
the namespace later, has none until you set it again. ns show reports it
and the pages it removed (ttl, expired_pages).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ttl, err := parseTTL(args[1])
			if err != nil {
				return err
			}
			return runNSTTL(cmd, g, args[0], ttl)
		},
	}
}

// parseTTL reads a TTL: a Go duration, 0 or at least a millisecond.
func parseTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a duration: want e.g. 90s, 30m or 12h, or 0 to clear the TTL", s)
	case d < 0:
		return 0, fmt.Errorf("the TTL must not be negative, got %s", s)
	case d > 0 && d < time.Millisecond:
		return 0, fmt.Errorf("the TTL must be at least 1ms (or 0 to clear it), got %s", s)
	}
	return d, nil
}

// nsTTLJSON is `ns ttl`.
type nsTTLJSON struct {
	NodeID      string        `json:"node_id"` // the node asked
	NamespaceID string        `json:"namespace_id"`
	TTLMs       uint64        `json:"ttl_ms"`
	Nodes       []nodeTTLJSON `json:"nodes"` // every node that holds the namespace and answered
}

// nodeTTLJSON is one node's SetNamespaceTTLResponse.
type nodeTTLJSON struct {
	NodeID        string `json:"node_id"`
	TTLMs         uint64 `json:"ttl_ms"`
	PreviousTTLMs uint64 `json:"previous_ttl_ms"`
	Pages         uint64 `json:"pages"`
	ExpiredPages  uint64 `json:"expired_pages"`
}

func runNSTTL(cmd *cobra.Command, g *globals, arg string, ttl time.Duration) error {
	c, ns, _, err := g.openNamespace(cmd, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	rs, err := c.SetTTL(cmd.Context(), ns, ttl)
	doc := nsTTLJSON{NodeID: c.NodeID(), NamespaceID: hexOf(ns.ID), TTLMs: uint64(ttl.Milliseconds()), Nodes: []nodeTTLJSON{}}
	for _, r := range rs {
		if r.Err == nil {
			n := r.Val.GetNamespace()
			doc.Nodes = append(doc.Nodes, nodeTTLJSON{NodeID: r.Member.GetNodeId(), TTLMs: n.GetTtlMs(),
				PreviousTTLMs: r.Val.GetPreviousTtlMs(), Pages: n.GetPages(), ExpiredPages: n.GetExpiredPages()})
		}
	}
	return g.report(cmd, doc, func(w io.Writer) error { return writeNSTTL(w, doc, c.Multi()) },
		g.settleAll(cmd.ErrOrStderr(), err, "the TTL was not set"))
}

// writeNSTTL prints, with nodes, each node's TTL before and now, then a
// summary.
func writeNSTTL(w io.Writer, doc nsTTLJSON, nodes bool) error {
	if nodes {
		tw := newTable(w)
		row(tw, "NODE", "TTL", "PREVIOUS", "PAGES", "EXPIRED")
		for _, n := range doc.Nodes {
			row(tw, n.NodeID, formatTTL(n.TTLMs), formatTTL(n.PreviousTTLMs), n.Pages, n.ExpiredPages)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var err error
	if doc.TTLMs == 0 {
		_, err = fmt.Fprintf(w, "namespace %s: idle TTL cleared on %d node(s)\n", doc.NamespaceID, len(doc.Nodes))
	} else {
		_, err = fmt.Fprintf(w, "namespace %s: pages unused for more than %s are removed, on %d node(s)\n",
			doc.NamespaceID, formatTTL(doc.TTLMs), len(doc.Nodes))
	}
	return err
}
