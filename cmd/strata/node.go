package main

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newNodeCmd(g *globals) *cobra.Command {
	return newGroupCmd("node", "Inspect the nodes of the cluster", newNodeLsCmd(g))
}

// nodeReport is a member of the view and what it said about itself.
type nodeReport struct {
	*member
	info *pb.NodeInfoResponse // nil when not asked (dead, left) or when it failed
	err  error                // why an asked member gave no info
}

// gatherNodes asks every askable member for NodeInfo in parallel and
// returns a report for every member of the view, in view order.
func gatherNodes(ctx context.Context, f *fleet) []nodeReport {
	rs := gather(ctx, f.asked(), func(ctx context.Context, c *conn) (*pb.NodeInfoResponse, error) {
		return invoke(ctx, c, c.admin.NodeInfo, &pb.NodeInfoRequest{})
	})
	out := make([]nodeReport, 0, len(f.members))
	for _, m := range f.members {
		r := nodeReport{member: m}
		if i := slices.IndexFunc(rs, func(r reply[*pb.NodeInfoResponse]) bool { return r.member == m }); i >= 0 {
			r.info, r.err = rs[i].val, rs[i].err
		}
		out = append(out, r)
	}
	return out
}

// tierKinds is every tier any node has, fastest first: the tier columns.
func tierKinds(rs []nodeReport) []pb.Tier {
	var kinds []pb.Tier
	for _, r := range rs {
		for _, ts := range [][]*pb.TierStats{r.info.GetTiers(), r.GetTiers()} {
			for _, t := range ts {
				if !slices.Contains(kinds, t.GetTier()) {
					kinds = append(kinds, t.GetTier())
				}
			}
		}
	}
	slices.Sort(kinds)
	return kinds
}

// tierCells is a node's usage of each of kinds, "12MiB/1GiB", or none for
// a tier it lacks or a node that gave no info.
func tierCells(r nodeReport, kinds []pb.Tier) []any {
	cells := make([]any, len(kinds))
	for i, k := range kinds {
		cells[i] = none
		for _, t := range r.info.GetTiers() {
			if t.GetTier() == k {
				cells[i] = usage(t.GetUsedBytes(), t.GetCapacityBytes())
			}
		}
	}
	return cells
}

// tierHeads is the column heads of kinds: "HOST".
func tierHeads(kinds []pb.Tier) []any {
	heads := make([]any, len(kinds))
	for i, k := range kinds {
		heads[i] = strings.ToUpper(tierName(k))
	}
	return heads
}

// errorCell is why a member gave no info, or none.
func (r nodeReport) errorCell() string {
	if r.err == nil {
		return none
	}
	return brief(r.err)
}
