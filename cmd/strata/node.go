package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newNodeCmd(g *globals) *cobra.Command {
	return newGroupCmd("node", "Inspect the nodes of the cluster", newNodeLsCmd(g))
}

// nodeReport is a member of the view and what it said about itself, with
// why it said nothing told as a sentence.
type nodeReport struct {
	admin.NodeReport
	err error // why an asked member gave no info
}

// explainNodes is rs with their errors explained.
func (g *globals) explainNodes(rs []admin.NodeReport) []nodeReport {
	out := make([]nodeReport, len(rs))
	for i, r := range rs {
		out[i].NodeReport = r
		if r.Err != nil {
			out[i].err = g.explain(r.Err)
		}
	}
	return out
}

// tierKinds is every tier any node has, fastest first: the tier columns.
func tierKinds(rs []nodeReport) []pb.Tier {
	var kinds []pb.Tier
	for _, r := range rs {
		for _, ts := range [][]*pb.TierStats{r.Info.GetTiers(), r.GetTiers()} {
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
		for _, t := range r.Info.GetTiers() {
			if t.GetTier() == k {
				cells[i] = usage(t.GetUsedBytes(), t.GetCapacityBytes())
				if f := t.GetFault(); f != "" && f != "ok" {
					cells[i] = usage(t.GetUsedBytes(), t.GetCapacityBytes()) + " " + strings.ToUpper(f)
				}
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
