package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
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
tier's capacity and usage summed over the cluster and per node, what
start-up recovery found on nodes with durable tiers, and the health of
each node's KV event streams (events and batches sent, replay requests
served, queue overruns, subscribers, the last event's age): every tenant's
for an admin token, the caller's own for a tenant's.

Every alive (or suspect) member is asked for its figures in parallel, each
under --timeout; the sums cover the members that answered, and one that
did not is listed with the reason under ERROR. The command exits 0 once
the node asked has answered.`,
		Args: cobra.NoArgs,
		RunE: g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
			doc := g.clusterStatus(c.Status(cmd.Context()))
			return g.report(cmd, doc, func(w io.Writer) error { return writeClusterStatus(w, doc) }, nil)
		}),
	}
}

// clusterStatus is the document of s.
func (g *globals) clusterStatus(s admin.Status) clusterJSON {
	m := s.Members
	doc := clusterJSON{NodeID: s.View.GetNodeId(), Coordinator: s.View.GetCoordinator(), Cutoffs: cutoffsView(s.View.GetCutoffs()),
		Members: memberCountsJSON{Total: m.Total, Alive: m.Alive, Suspect: m.Suspect, Dead: m.Dead, Left: m.Left,
			Answered: m.Answered},
		Tiers: []clusterTierJSON{}, Nodes: []nodeJSON{}, Recovery: []nodeRecoveryJSON{}, Events: []nodeEventStreamJSON{},
		now: time.Now()}
	if i := s.Asked; i != nil {
		doc.Etcd = &etcdJSON{Endpoints: append([]string{}, i.GetEtcdEndpoints()...), Healthy: i.GetEtcdHealthy(),
			Error: i.GetEtcdError()}
	}
	for _, t := range s.Tiers {
		doc.Tiers = append(doc.Tiers, clusterTierJSON{kind: t.GetTier(), tierJSON: tierView(t), Nodes: s.TierNodes[t.GetTier()]})
	}
	for _, r := range g.explainNodes(s.Nodes) {
		doc.Nodes = append(doc.Nodes, nodeView(r))
		for _, rec := range recoveryView(r.Info.GetRecovery()) {
			doc.Recovery = append(doc.Recovery, nodeRecoveryJSON{NodeID: r.GetNodeId(), recoveryJSON: rec})
		}
		for _, e := range eventStreamsView(r.Info.GetEventStreams()) {
			doc.Events = append(doc.Events, nodeEventStreamJSON{NodeID: r.GetNodeId(), eventStreamJSON: e})
		}
	}
	return doc
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

	if len(doc.Events) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "KV event streams:")
		row(tw, "NODE", "TENANT", "SUBS", "EVENTS", "BATCHES", "REPLAYS", "OVERRUNS", "DROPS", "LAST EVENT")
		for _, e := range doc.Events {
			row(tw, e.NodeID, e.Tenant, e.Subscribers, e.Events, e.Batches, e.ReplayRequests, e.Overruns,
				e.SubscriberDrops, eventAge(e.LastEventUnixMs, doc.now))
		}
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

// eventAge is how long ago a stream sent its last batch ("3.2s ago"), or
// none before its first.
func eventAge(unixMs int64, now time.Time) string {
	if unixMs == 0 {
		return none
	}
	return now.Sub(time.UnixMilli(unixMs)).Round(100*time.Millisecond).String() + " ago"
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
