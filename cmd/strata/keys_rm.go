package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newKeysRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm <ns-id-or-prefix> <key-hex>...",
		Short: "Delete pages of a namespace from every node that holds them",
		Long: `Delete the pages of some keys (full 64-digit hex) of one namespace: every
alive member that holds the namespace deletes its copies. Leased pages
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
	ref, err := parseNSRef(nsArg)
	if err != nil {
		return err
	}
	keys := make([][]byte, len(keyArgs))
	for i, a := range keyArgs {
		if keys[i], err = parseKey(a); err != nil {
			return err
		}
	}
	ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
	f, ns, err := g.openNamespace(cmd, ref)
	if err != nil {
		return err
	}
	defer f.Close()
	rs := gather(ctx, ns.members(), func(ctx context.Context, c *conn) (*pb.DeleteResponse, error) {
		return invoke(ctx, c, c.data.Delete, &pb.DeleteRequest{NamespaceId: ns.id, Keys: keys})
	})
	doc := keysRmJSON{NodeID: f.view.GetNodeId(), NamespaceID: hexOf(ns.id), Keys: len(keys), Nodes: []nodeDeleteJSON{}}
	for _, r := range answered(rs) {
		doc.Deleted += uint64(r.val.GetDeleted())
		doc.Nodes = append(doc.Nodes, nodeDeleteJSON{NodeID: r.GetNodeId(), Deleted: r.val.GetDeleted()})
	}
	return g.report(cmd, doc, func(w io.Writer) error { return writeKeysRm(w, doc, f.multi()) },
		settleAll(stderr, rs, "the keys were not deleted"))
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
