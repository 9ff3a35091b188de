package coord

import (
	"cmp"
	"slices"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/registry"
)

// kindRank orders tier kinds fastest first; unknown kinds go last, by name.
func kindRank(kind string) int {
	switch kind {
	case "gpu":
		return 0
	case "host":
		return 1
	case "ssd":
		return 2
	}
	return 3
}

// tierSet is the summaries of one tier kind across members.
type tierSet struct {
	kind  string
	nodes []string
	sums  []eviction.Summary
	caps  []int64
}

// Compute merges the members' summaries (Meta.Summary: their reports,
// reports.go, or what a node of an older release gossips) into one cutoff
// per tier kind, fastest first, keeping headroom (a fraction in [0, 1)) of every
// capacity free: the cluster holds at most (1-headroom) of its capacity at
// or above the cutoff. Without headroom there would never be a cutoff, as
// no node holds more than its capacity; with it, once the cluster fills
// past 1-headroom, the cutoff rises to the worth of its least valuable
// bytes, and full nodes refuse (and clients spill) pages worth less. A
// member whose metadata carries no (or an undecodable) summary for a tier
// takes no part in that tier's cutoff: neither its bytes nor its capacity
// count.
//
// A round is O(N · summary size): each member's summary framing is at
// most membership.MaxReportSize bytes (one eviction.SummarySize summary per tier, a
// fixed size whatever the tier's history), decoded once, and the merge
// (eviction.ComputeCutoffs) is O(members · buckets) per tier kind; so
// O(members · tiers · buckets) in all, and its allocation is as linear.
// strata-cluster-sim measures it: about 10 ms and 5 MiB at a thousand
// members with two tiers each (docs/design.md §6.7).
func Compute(members []membership.Member, headroom float64) ([]registry.TierCutoff, error) {
	var sets []*tierSet
	for _, m := range members {
		sums, err := DecodeSummaries(m.Meta.Summary)
		if err != nil {
			continue
		}
		for idx, s := range sums {
			if idx >= len(m.Meta.Tiers) {
				continue
			}
			t := m.Meta.Tiers[idx]
			i := slices.IndexFunc(sets, func(ts *tierSet) bool { return ts.kind == t.Kind })
			if i < 0 {
				sets = append(sets, &tierSet{kind: t.Kind})
				i = len(sets) - 1
			}
			ts := sets[i]
			ts.nodes = append(ts.nodes, m.NodeID)
			ts.sums = append(ts.sums, s)
			ts.caps = append(ts.caps, int64(float64(max(t.Capacity, 0))*(1-headroom)))
		}
	}
	slices.SortFunc(sets, func(a, b *tierSet) int {
		return cmp.Or(cmp.Compare(kindRank(a.kind), kindRank(b.kind)), cmp.Compare(a.kind, b.kind))
	})
	out := make([]registry.TierCutoff, 0, len(sets))
	for _, ts := range sets {
		cut, err := eviction.ComputeCutoffs(ts.sums, ts.caps)
		if err != nil {
			return nil, err
		}
		tc := registry.TierCutoff{Kind: ts.kind, Worth: cut.Floor(), Nodes: len(ts.nodes)}
		for i, p := range cut.Pressure {
			if p != 0 {
				if tc.Pressure == nil {
					tc.Pressure = make(map[string]float64, len(ts.nodes))
				}
				tc.Pressure[ts.nodes[i]] = p
			}
		}
		out = append(out, tc)
	}
	return out, nil
}
