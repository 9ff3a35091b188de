package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

type nsRmOptions struct {
	yes              bool
	keepRegistration bool
}

func newNSRmCmd(g *globals) *cobra.Command {
	var o nsRmOptions
	cmd := &cobra.Command{
		Use:   "rm <id-or-prefix> --yes",
		Short: "Remove a namespace and all its pages from the cluster",
		Long: `Remove one namespace from the cluster: delete its registration (etcd),
then drop its pages on every alive member and forget it there. Without
--yes it only says what it would remove.

The registration goes first: a client request that reaches a node after
the node dropped the namespace then fails (NAMESPACE_NOT_FOUND) instead of
bringing it back from etcd. Engines that still use the namespace open it
again and start it afresh; stop them first to remove it for good. Leased
pages vanish from lookups at once; their memory returns when the leases
end.

When a node does not answer, the others still drop the namespace; the
command then fails, and running it again when that node answers finishes
the job. --keep-registration drops the pages but keeps the registration.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runNSRm(cmd, g, args[0], o)
		},
	}
	cmd.Flags().BoolVar(&o.yes, "yes", false, "really remove it")
	cmd.Flags().BoolVar(&o.keepRegistration, "keep-registration", false,
		"drop the pages but keep the registration in etcd")
	return cmd
}

// nsRmJSON is `ns rm`.
type nsRmJSON struct {
	NodeID       string         `json:"node_id"` // the node asked
	NamespaceID  string         `json:"namespace_id"`
	PagesDropped uint64         `json:"pages_dropped"`
	Unregistered bool           `json:"unregistered"` // no registration remains
	Registration string         `json:"registration"` // what happened to it, in words
	Nodes        []nodeDropJSON `json:"nodes"`        // every member that answered
}

// nodeDropJSON is one member's DropNamespaceResponse.
type nodeDropJSON struct {
	NodeID       string `json:"node_id"`
	Known        bool   `json:"known"` // it held the namespace
	PagesDropped uint64 `json:"pages_dropped"`
}

func runNSRm(cmd *cobra.Command, g *globals, arg string, o nsRmOptions) error {
	stderr := cmd.ErrOrStderr()
	c, ns, _, err := g.openNamespace(cmd, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	if !o.yes {
		return fmt.Errorf("refusing to remove namespace %s without --yes: %s\n"+
			"every node would drop these pages, and engines recompute what they held", hexOf(ns.ID), nsSummary(ns.Total))
	}
	d, err := c.Drop(cmd.Context(), ns, !o.keepRegistration)
	if ue, ok := errors.AsType[*admin.UnregisterError](err); ok {
		return fmt.Errorf("nothing removed: deleting the registration through node %s failed: %s\n"+
			"(try again when etcd answers, or pass --keep-registration to drop the pages and keep it)",
			ue.Label(), brief(g.explain(ue.NodeError)))
	}
	doc := nsRmJSON{NodeID: c.NodeID(), NamespaceID: hexOf(ns.ID), Nodes: []nodeDropJSON{},
		Registration: "kept (--keep-registration)"}
	switch ne := d.CannotUnregister; {
	case d.Unregistered:
		doc.Unregistered, doc.Registration = true, "deleted"
	case ne != nil:
		doc.Registration = "kept: node " + ne.NodeID + " cannot delete registrations"
		fmt.Fprintf(stderr, "node %s could not delete the namespace's registration (%s): it stays in etcd, "+
			"and a node learns the namespace again when a client uses it\n", ne.Label(), serverMessage(ne))
	}
	for _, r := range d.Nodes {
		if r.Err == nil {
			doc.PagesDropped += r.Val.GetPagesDropped()
			doc.Nodes = append(doc.Nodes, nodeDropJSON{NodeID: r.Member.GetNodeId(), Known: r.Val.GetKnown(),
				PagesDropped: r.Val.GetPagesDropped()})
		}
	}
	return g.report(cmd, doc, func(w io.Writer) error { return writeNSRm(w, doc, c.Multi()) },
		g.settleAll(stderr, err, "the namespace was not dropped"))
}

// nsSummary is "tenant acme, model llama-3-8b r1: 3 pages, 48KiB on 1 node".
func nsSummary(t *admin.Namespace) string {
	d := t.Info.GetDescriptor_()
	return fmt.Sprintf("tenant %s, model %s %s: %d pages, %s on %d node(s)", orNone(d.GetTenant()),
		orNone(d.GetModel()), orNone(d.GetModelRevision()), t.Info.GetPages(), humanBytes(t.Info.GetBytes()),
		len(t.Holders()))
}

// writeNSRm prints, with nodes, what each node dropped, then a summary.
func writeNSRm(w io.Writer, doc nsRmJSON, nodes bool) error {
	if nodes {
		tw := newTable(w)
		row(tw, "NODE", "HELD", "PAGES_DROPPED")
		for _, n := range doc.Nodes {
			held := "no"
			if n.Known {
				held = "yes"
			}
			row(tw, n.NodeID, held, n.PagesDropped)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	held := 0
	for _, n := range doc.Nodes {
		if n.Known {
			held++
		}
	}
	_, err := fmt.Fprintf(w, "removed namespace %s: %d pages dropped on %d node(s); registration %s\n",
		doc.NamespaceID, doc.PagesDropped, held, doc.Registration)
	return err
}
