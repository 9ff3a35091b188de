package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newKeysRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm <ns-id-or-prefix> <key-or-prefix>...",
		Short: "Delete pages of a namespace from every node that holds them",
		Long: `Delete the pages of some keys of one namespace, each named by its 64 hex
digits or a prefix only it has (as for keys stat): every alive member
that holds the namespace deletes its copies. Leased pages
vanish from lookups at once; their memory returns when the leases end. A
key that no node holds is not an error: the page is gone either way.

Deleting a page cuts the prefix of every sequence through it: lookups stop
at the first missing page, so the pages after it are no longer hits.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysRm(cmd, g, args[0], args[1:])
		},
	}
}

// keysRmJSON is `keys rm`.
type keysRmJSON struct {
	NodeID      string           `json:"node_id"` // the node asked
	NamespaceID string           `json:"namespace_id"`
	Keys        int              `json:"keys"`    // keys asked
	Deleted     uint64           `json:"deleted"` // copies deleted, over every node
	Nodes       []nodeDeleteJSON `json:"nodes"`   // every node that holds the namespace and answered
}

// nodeDeleteJSON is one node's DeleteResponse.
type nodeDeleteJSON struct {
	NodeID  string `json:"node_id"`
	Deleted uint32 `json:"deleted"`
}

func runKeysRm(cmd *cobra.Command, g *globals, nsArg string, keyArgs []string) error {
	c, ns, keys, err := g.openNamespace(cmd, nsArg, keyArgs...)
	if err != nil {
		return err
	}
	defer c.Close()
	rs, err := c.DeleteKeys(cmd.Context(), ns, keys)
	doc := keysRmJSON{NodeID: c.NodeID(), NamespaceID: hexOf(ns.ID), Keys: len(keys), Nodes: []nodeDeleteJSON{}}
	for _, r := range rs {
		if r.Err == nil {
			doc.Deleted += uint64(r.Val.GetDeleted())
			doc.Nodes = append(doc.Nodes, nodeDeleteJSON{NodeID: r.Member.GetNodeId(), Deleted: r.Val.GetDeleted()})
		}
	}
	return g.report(cmd, doc, func(w io.Writer) error { return writeKeysRm(w, doc, c.Multi()) },
		g.settleAll(cmd.ErrOrStderr(), err, "the keys were not deleted"))
}

// writeKeysRm prints, with nodes, what each node deleted, then a summary.
func writeKeysRm(w io.Writer, doc keysRmJSON, nodes bool) error {
	if nodes {
		tw := newTable(w)
		row(tw, "NODE", "DELETED")
		for _, n := range doc.Nodes {
			row(tw, n.NodeID, n.Deleted)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "deleted %d page(s) of the %d key(s) given, on %d node(s)\n",
		doc.Deleted, doc.Keys, len(doc.Nodes))
	return err
}
