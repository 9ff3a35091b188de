package main

import "github.com/stratakv/strata/eviction"

const (
	// headroom is the share of capacity the cutoff leaves free.
	headroom = 0.02
	// turnoverAlpha is the weight of the last epoch in a node's smoothed
	// turnover (an EWMA over about ten epochs).
	turnoverAlpha = 0.1
)

// coordinate is one round of the coordinator. Every node smooths its
// turnover and summarises its tier; the coordinator merges the summaries
// into Cutoffs that every node then uses for its puts (place).
func (c *cluster) coordinate() {
	n := len(c.nodes)
	if len(c.sums) == 0 {
		c.sums = make([]eviction.Summary, n)
		c.caps = make([]int64, n)
		c.lastEvicted = make([]int64, n)
	}
	for i := range c.nodes {
		nd := &c.nodes[i]
		ev := nd.q.Evicted()
		t := float64(ev-c.lastEvicted[i]) / float64(nd.capacity)
		c.lastEvicted[i] = ev
		c.sums[i].Turnover += turnoverAlpha * (t - c.sums[i].Turnover)
		nd.q.Summarize(&c.sums[i])
		c.caps[i] = int64(float64(nd.capacity) * (1 - headroom))
	}
	cut, err := eviction.ComputeCutoffs(c.sums, c.caps)
	if err != nil {
		panic(err) // sums and caps are built above with equal lengths
	}
	c.cutoffs = cut
	if c.cfg.variant.floor {
		for i := range c.nodes {
			c.nodes[i].q.SetCutoff(cut.Floor())
		}
	}
}

// place picks the node for a put under the coordinator's Cutoffs:
//   - the owner is full and under much more pressure than the second
//     candidate (Cutoffs.Spill): the second candidate, if it admits the page;
//   - the owner admits it (room, or worth more than its victim): the owner;
//   - the owner refuses it: the second candidate, if it admits it;
//   - otherwise nowhere.
//
// It returns the page as the chosen node must insert it: a spilled page
// carries the owner's history count, as the second candidate never saw its
// lookups.
func (c *cluster) place(p eviction.Page, cand []int) (int, eviction.Page, bool) {
	owner := &c.nodes[cand[0]]
	spill := p
	spill.Freq = max(p.Freq, owner.q.Estimate(p.Key))
	if len(cand) > 1 && owner.used+p.Bytes > owner.capacity && c.cutoffs.Spill(cand[0], cand[1]) {
		if c.nodes[cand[1]].q.Admit(spill) {
			c.res.spilled++
			return cand[1], spill, true
		}
	}
	if owner.q.Admit(p) {
		return cand[0], p, true
	}
	if len(cand) > 1 && c.nodes[cand[1]].q.Admit(spill) {
		c.res.spilled++
		return cand[1], spill, true
	}
	return 0, p, false
}
