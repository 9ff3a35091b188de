package main

import (
	"github.com/stratakv/strata/eviction/coord"
	"github.com/stratakv/strata/membership"
)

// coordinate is one round of the coordinator, as eviction/coord runs it on
// the elected node: every store's summaries travel as the node's gossip
// metadata would carry them (coord.EncodeSummaries), coord.Compute merges
// them into the cluster's cutoff (with coord.DefaultHeadroom, as nodes run
// it), and every store takes it as its admission floor (SetCutoffs), as a
// node does by default. A full store then refuses puts worth less than
// eviction.DefaultAdmitShare of it, and the client puts them on their
// second placement candidate (storeCluster.put).
func (c *storeCluster) coordinate(epoch uint64) error {
	members := make([]membership.Member, len(c.nodes))
	for i, n := range c.nodes {
		st := n.tier.Stats()
		m := membership.Meta{NodeID: c.view.Node(i).ID, GRPCAddress: "127.0.0.1:7000",
			Tiers: []membership.TierMeta{{Kind: st.Kind.String(), Capacity: st.Capacity, Used: st.Used}}}
		var err error
		if m.Summary, _, err = coord.EncodeSummaries(n.st.Evictor().Summaries(), membership.SummaryBudget(m)); err != nil {
			return err
		}
		members[i] = membership.Member{NodeID: m.NodeID, Meta: m}
	}
	cuts, err := coord.Compute(members, coord.DefaultHeadroom)
	if err != nil {
		return err
	}
	worth := make([]float64, 1)
	for _, tc := range cuts {
		if tc.Kind == members[0].Meta.Tiers[0].Kind {
			worth[0] = tc.Worth
		}
	}
	for _, n := range c.nodes {
		n.st.Evictor().SetCutoffs(worth, epoch+1, true)
	}
	return nil
}
