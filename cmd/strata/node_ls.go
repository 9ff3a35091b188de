package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

func newNodeLsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the members of the cluster with their tiers and counters",
		Long: `List every member of the cluster as the node asked (the first of
--endpoints that answers) sees it, then ask each alive (or suspect) member
for its own figures, in parallel, each under --timeout.

A tier column (GPU, HOST, SSD) shows used/capacity on that node, and the
tier's fault when it has one (DISK-FULL, READ-ONLY, IO-ERROR: the SSD
tier's capacity is then what its files hold). Dead and
left members are listed with their state only. A member that does not
answer is listed with the reason under ERROR; that is not a failure of
the command, which exits 0 once the node asked has answered.`,
		Args: cobra.NoArgs,
		RunE: g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
			rs := g.explainNodes(c.Nodes(cmd.Context()))
			doc := struct {
				NodeID      string     `json:"node_id"` // the node asked
				Coordinator string     `json:"coordinator"`
				Nodes       []nodeJSON `json:"nodes"`
			}{NodeID: c.NodeID(), Coordinator: c.View().GetCoordinator(), Nodes: []nodeJSON{}}
			for _, r := range rs {
				doc.Nodes = append(doc.Nodes, nodeView(r))
			}
			return g.report(cmd, doc, func(w io.Writer) error { return writeNodeLs(w, rs) }, nil)
		}),
	}
}

// writeNodeLs prints one row per member.
func writeNodeLs(w io.Writer, rs []nodeReport) error {
	kinds := tierKinds(rs)
	tw := newTable(w)
	head := append([]any{"NODE", "STATE", "GRPC", "GOSSIP"}, tierHeads(kinds)...)
	row(tw, append(head, "PAGES", "LEASES", "EVICTIONS", "DEMOTIONS", "ERROR")...)
	for _, r := range rs {
		cells := append([]any{orNone(r.GetNodeId()), stateName(r.GetState()), orNone(r.GetGrpcAddress()),
			orNone(r.GetGossipAddress())}, tierCells(r, kinds)...)
		if i := r.Info; i != nil {
			cells = append(cells, i.GetPages(), i.GetLeasesActive(), i.GetEvictions(), i.GetDemotions())
		} else {
			cells = append(cells, none, none, none, none)
		}
		row(tw, append(cells, r.errorCell())...)
	}
	return tw.Flush()
}
