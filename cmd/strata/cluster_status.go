package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// noCoordinator is printed when no node is elected to compute cutoffs.
const noCoordinator = "none: nodes use local cutoffs"

func newClusterStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Summarise the cluster: members, capacity, etcd, coordinator",
		Long: `Summarise the cluster as the node asked (the first of --endpoints that
answers) sees it: its members by state, the coordinator (the node elected
to compute eviction cutoffs), etcd's health as that node sees it, each
tier's capacity and usage summed over the cluster and per node, and what
start-up recovery found on nodes with durable tiers.

Every alive (or suspect) member is asked for its figures in parallel, each
under --timeout; the sums cover the members that answered, and one that
did not is listed with the reason under ERROR. The command exits 0 once
the node asked has answered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := g.dialFleet(cmd.Context())
			if err != nil {
				return err
			}
			defer f.Close()
			doc := clusterStatus(f.view, gatherNodes(cmd.Context(), f))
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			return writeClusterStatus(cmd.OutOrStdout(), doc)
		},
	}
}

// clusterStatus sums the reports of the members of view.
func clusterStatus(view *pb.MembersResponse, rs []nodeReport) clusterJSON {
	doc := clusterJSON{NodeID: view.GetNodeId(), Coordinator: view.GetCoordinator(), Cutoffs: cutoffsView(view.GetCutoffs()),
		Tiers: []clusterTierJSON{}, Nodes: []nodeJSON{}, Recovery: []nodeRecoveryJSON{}}
	for _, r := range rs {
		doc.Members.Total++
		switch r.GetState() {
		case pb.MemberState_MEMBER_STATE_ALIVE:
			doc.Members.Alive++
		case pb.MemberState_MEMBER_STATE_SUSPECT:
			doc.Members.Suspect++
		case pb.MemberState_MEMBER_STATE_DEAD:
			doc.Members.Dead++
		case pb.MemberState_MEMBER_STATE_LEFT:
			doc.Members.Left++
		}
		doc.Nodes = append(doc.Nodes, nodeView(r))
		if r.info == nil {
			continue
		}
		doc.Members.Answered++
		doc.Tiers = addClusterTiers(doc.Tiers, r.info.GetTiers())
		if r.GetNodeId() == view.GetNodeId() {
			doc.Etcd = &etcdJSON{Endpoints: append([]string{}, r.info.GetEtcdEndpoints()...),
				Healthy: r.info.GetEtcdHealthy(), Error: r.info.GetEtcdError()}
		}
		for _, rec := range recoveryView(r.info.GetRecovery()) {
			doc.Recovery = append(doc.Recovery, nodeRecoveryJSON{NodeID: r.GetNodeId(), recoveryJSON: rec})
		}
	}
	return doc
}

// addClusterTiers adds one node's tiers to sum, fastest tier first.
func addClusterTiers(sum []clusterTierJSON, ts []*pb.TierStats) []clusterTierJSON {
	for _, t := range ts {
		i := slices.IndexFunc(sum, func(c clusterTierJSON) bool { return c.kind == t.GetTier() })
		if i < 0 {
			sum = append(sum, clusterTierJSON{kind: t.GetTier(), tierJSON: tierJSON{Tier: tierName(t.GetTier())}})
			i = len(sum) - 1
		}
		sum[i].Nodes++
		sum[i].CapacityBytes += t.GetCapacityBytes()
		sum[i].UsedBytes += t.GetUsedBytes()
		sum[i].Pages += t.GetPages()
	}
	slices.SortStableFunc(sum, func(a, b clusterTierJSON) int { return cmp.Compare(a.kind, b.kind) })
	return sum
}

// writeClusterStatus prints the summary, then the tier, node and recovery
// tables.
func writeClusterStatus(w io.Writer, doc clusterJSON) error {
	tw := newTable(w)
	row(tw, "node asked:", orNone(doc.NodeID))
	row(tw, "members:", memberCounts(doc.Members))
	row(tw, "coordinator:", coordinatorCell(doc))
	if c := doc.Cutoffs; c != nil {
		row(tw, "cutoffs:", cutoffsCell(c))
	}
	switch e := doc.Etcd; {
	case e == nil:
		row(tw, "etcd:", "unknown (the node asked gave no info)")
	case e.Healthy:
		row(tw, "etcd:", "healthy")
	default:
		row(tw, "etcd:", "UNHEALTHY: "+orNone(e.Error))
	}
	if doc.Etcd != nil {
		row(tw, "etcd endpoints:", orNone(strings.Join(doc.Etcd.Endpoints, ",")))
	}

	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "tiers, summed over the %d nodes that answered:\n", doc.Members.Answered)
	row(tw, "TIER", "NODES", "USED", "CAPACITY", "USE%", "PAGES")
	for _, t := range doc.Tiers {
		row(tw, t.Tier, t.Nodes, humanBytes(t.UsedBytes), humanBytes(t.CapacityBytes),
			percent(t.UsedBytes, t.CapacityBytes), t.Pages)
	}

	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "nodes:")
	kinds := make([]pb.Tier, len(doc.Tiers))
	for i, t := range doc.Tiers {
		kinds[i] = t.kind
	}
	row(tw, append(append([]any{"NODE", "STATE"}, tierHeads(kinds)...), "PAGES", "ERROR")...)
	for _, n := range doc.Nodes {
		cells := []any{orNone(n.NodeID), n.State}
		for _, k := range kinds {
			cells = append(cells, nodeTierCell(n, tierName(k)))
		}
		pages := none
		if n.Info != nil {
			pages = fmt.Sprint(n.Info.Pages)
		}
		row(tw, append(cells, pages, orNone(n.Error))...)
	}

	if len(doc.Recovery) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "recovery at start-up:")
		row(tw, "NODE", "TIER", "RECOVERED", "DROPPED", "TORN", "BYTES")
		for _, r := range doc.Recovery {
			row(tw, r.NodeID, r.Tier, r.Recovered, r.Dropped, r.Torn, humanBytes(r.Bytes))
		}
	}
	return tw.Flush()
}

// memberCounts is "3: 2 alive, 1 left", naming only states that occur.
func memberCounts(c memberCountsJSON) string {
	var parts []string
	for _, s := range []struct {
		n    int
		name string
	}{{c.Alive, "alive"}, {c.Suspect, "suspect"}, {c.Dead, "dead"}, {c.Left, "left"}} {
		if s.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", s.n, s.name))
		}
	}
	return fmt.Sprintf("%d: %s", c.Total, strings.Join(parts, ", "))
}

// nodeTierCell is a node's usage of one tier, or none.
func nodeTierCell(n nodeJSON, tier string) string {
	if n.Info != nil {
		for _, t := range n.Info.Tiers {
			if t.Tier == tier {
				return usage(t.UsedBytes, t.CapacityBytes)
			}
		}
	}
	return none
}

// coordinatorCell is the coordinator and the epoch of the cutoffs the node
// asked applies, or noCoordinator.
func coordinatorCell(doc clusterJSON) string {
	if doc.Coordinator == "" || doc.Cutoffs == nil || !doc.Cutoffs.Coordinated {
		return noCoordinator
	}
	return fmt.Sprintf("%s (cutoff epoch %d, round %d)", doc.Coordinator, doc.Cutoffs.Epoch, doc.Cutoffs.Round)
}

// cutoffsCell is "host 4.1e+07, ssd none (coordinated)": each tier's floor
// in worth units.
func cutoffsCell(c *cutoffsJSON) string {
	var parts []string
	for _, t := range c.Tiers {
		w := "none"
		if t.Worth > 0 {
			w = fmt.Sprintf("%.3g", t.Worth)
		}
		parts = append(parts, t.Tier+" "+w)
	}
	how := "coordinated"
	if !c.Coordinated {
		how = "local"
	}
	return fmt.Sprintf("%s (%s)", cmp.Or(strings.Join(parts, ", "), "no tiers"), how)
}
