package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newKeysStatCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stat <ns-id-or-prefix> <key-or-prefix>...",
		Short: "Show everything the cluster knows about some page keys",
		Long: `Show one block per key with its page metadata. A key is its 64 hex
digits, or a prefix that only one key of the namespace has, such as the
16 digits keys ls prints; a prefix that no key has, or several, is an
error that lists them.

Every alive member is asked; in a cluster of more than one member each
block names the node that holds the key, and a key held by several nodes
has one block per node.

A key no node holds prints "status: absent"; the command then exits with
status 1 after printing every block (0 only when all are found). A member
that fails is reported on stderr, and a key only it holds shows as absent.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysStat(cmd, g, args[0], args[1:])
		},
	}
}

// statEntry is one requested key in -o json. An absent key has only key,
// found and empty nodes and copies; a present one also has the fields of
// its first copy (in node order).
type statEntry struct {
	Key    string    `json:"key"`
	Found  bool      `json:"found"`
	Nodes  []string  `json:"nodes"`  // the nodes that hold it
	Copies []keyJSON `json:"copies"` // each node's copy
	*keyJSON
}

func runKeysStat(cmd *cobra.Command, g *globals, nsArg string, keyArgs []string) error {
	c, ns, keys, err := g.openNamespace(cmd, nsArg, keyArgs...)
	if err != nil {
		return err
	}
	defer c.Close()
	stats, failed, err := c.StatKeys(cmd.Context(), ns, keys)
	if err := g.settle(cmd.ErrOrStderr(), failed, err); err != nil {
		return err
	}
	entries := make([]statEntry, len(stats))
	absent := 0
	for i, st := range stats {
		e := statEntry{Key: hexOf(st.Key), Nodes: []string{}, Copies: []keyJSON{}}
		for _, r := range st.Copies {
			e.Nodes = append(e.Nodes, r.Node)
			e.Copies = append(e.Copies, keyView(r))
		}
		if e.Found = len(e.Copies) > 0; e.Found {
			e.keyJSON = &e.Copies[0]
		} else {
			absent++
		}
		entries[i] = e
	}
	doc := struct {
		NodeID      string      `json:"node_id"` // the node asked
		NamespaceID string      `json:"namespace_id"`
		Keys        []statEntry `json:"keys"`
	}{c.NodeID(), hexOf(ns.ID), entries}
	if err := g.report(cmd, doc, func(w io.Writer) error { return writeKeyBlocks(w, entries, c.Multi(), time.Now()) }, nil); err != nil {
		return err
	}
	if absent > 0 {
		return fmt.Errorf("%d of %d keys absent", absent, len(keys))
	}
	return nil
}

// writeKeyBlocks prints one "name: value" block per copy of each key (one
// for an absent key), blank-line apart; nodes adds the node line.
func writeKeyBlocks(w io.Writer, entries []statEntry, nodes bool, now time.Time) error {
	tw := newTable(w)
	first := true
	block := func(key string) {
		if !first {
			fmt.Fprintln(tw)
		}
		first = false
		row(tw, "key:", key)
	}
	for _, e := range entries {
		if !e.Found {
			block(e.Key)
			row(tw, "status:", "absent")
			continue
		}
		for _, k := range e.Copies {
			block(e.Key)
			if nodes {
				row(tw, "node:", k.Node)
			}
			row(tw, "status:", "present")
			row(tw, "parent:", orNone(k.ParentKey))
			row(tw, "depth:", k.Depth)
			row(tw, "size:", fmt.Sprintf("%d (%s)", k.Size, humanBytes(k.Size)))
			row(tw, "checksum:", orNone(k.Checksum))
			row(tw, "tier:", k.Tier)
			row(tw, "created:", formatTime(k.CreatedUnixMs, now))
			row(tw, "last access:", formatTime(k.LastAccessUnixMs, now))
			row(tw, "leases:", k.Leases)
			row(tw, "hits:", k.Hits)
			row(tw, "resident children:", k.ResidentChildren)
			row(tw, "orphan:", k.Orphan)
		}
	}
	return tw.Flush()
}
