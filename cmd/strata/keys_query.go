package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newKeysQueryCmd(g *globals) *cobra.Command {
	var tokens string
	cmd := &cobra.Command{
		Use:   "query <ns-id-or-prefix> [<key>...]",
		Short: "Show how much of a prompt the cluster holds, per tier",
		Long: `Show how many of a prompt's pages, from the first, the cluster holds in
any tier and in each tier: the prefix query a cache-aware router asks
(Admin.QueryPrefix with cluster set; docs/design.md §15). The prompt is
its page keys in order (64 hex digits each), or --tokens, its token ids,
which the namespace's key format turns into keys (full pages only).

The node asked asks every other alive member and merges their answers key
by key; the table lists each member's own part (the pages from the first
it holds, and how many of the prompt's pages it holds anywhere). A member
that did not answer is listed with its error, and its pages count as not
held. The query is not a use of the pages: no hit, no lease.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysQuery(cmd, g, args[0], args[1:], tokens)
		},
	}
	cmd.Flags().StringVar(&tokens, "tokens", "", "the prompt's token ids, comma-separated, instead of keys")
	return cmd
}

func runKeysQuery(cmd *cobra.Command, g *globals, nsArg string, keyArgs []string, tokenArg string) error {
	var p admin.Prompt
	for _, a := range keyArgs {
		k, err := parseKey(a)
		if err != nil {
			return err
		}
		p.Keys = append(p.Keys, k)
	}
	if tokenArg != "" {
		for _, f := range strings.Split(tokenArg, ",") {
			t, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
			if err != nil {
				return fmt.Errorf("--tokens: %q is not a token id", f)
			}
			p.Tokens = append(p.Tokens, uint32(t))
		}
	}
	if (len(p.Keys) == 0) == (len(p.Tokens) == 0) {
		return fmt.Errorf("give the prompt's keys or --tokens, one of them")
	}
	c, ns, _, err := g.openNamespace(cmd, nsArg)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.QueryPrefix(cmd.Context(), ns, p, false)
	if err != nil {
		return g.explain(err)
	}
	type nodeJSON struct {
		NodeID  string            `json:"node_id"`
		Longest uint32            `json:"longest"`
		Held    uint32            `json:"held"`
		Tiers   map[string]uint32 `json:"tiers"`
		Error   string            `json:"error,omitempty"`
	}
	doc := struct {
		NamespaceID string            `json:"namespace_id"`
		Pages       uint32            `json:"pages"`
		PageTokens  uint32            `json:"page_tokens"`
		Longest     uint32            `json:"longest"`
		Tiers       map[string]uint32 `json:"tiers"`
		Nodes       []nodeJSON        `json:"nodes"`
	}{NamespaceID: hexOf(ns.ID), Pages: resp.GetPages(), PageTokens: resp.GetPageTokens(), Longest: resp.GetLongest(),
		Tiers: tierPages(resp.GetTiers())}
	for _, np := range resp.GetNodes() {
		doc.Nodes = append(doc.Nodes, nodeJSON{NodeID: np.GetNodeId(), Longest: np.GetLongest(), Held: np.GetHeld(),
			Tiers: tierPages(np.GetTiers()), Error: np.GetError()})
	}
	return g.report(cmd, doc, func(w io.Writer) error {
		fmt.Fprintf(w, "prompt: %d pages (%d tokens each)\ncluster holds: %d from the first", doc.Pages, doc.PageTokens, doc.Longest)
		for _, t := range resp.GetTiers() {
			fmt.Fprintf(w, ", %s %d", tierName(t.GetTier()), t.GetPages())
		}
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "NODE\tFROM FIRST\tHELD\tERROR")
		for _, n := range doc.Nodes {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", n.NodeID, n.Longest, n.Held, n.Error)
		}
		return tw.Flush()
	}, nil)
}

// tierPages is a prefix's pages per tier, by the tier's name.
func tierPages(ts []*pb.TierPrefix) map[string]uint32 {
	out := map[string]uint32{}
	for _, t := range ts {
		out[tierName(t.GetTier())] = t.GetPages()
	}
	return out
}
