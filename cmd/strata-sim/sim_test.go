package main

import (
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
)

var seedFlag = flag.Uint64("sim.seed", 0, "seed for the randomized simulator tests (0: from the clock)")

// randomTrace is a workload of prefix trees: requests extend a random
// earlier request's prefix (multi-turn chats, shared system prompts) or
// start afresh.
func randomTrace(r *rand.Rand, requests int) *trace {
	t := &trace{}
	var prefixes [][]int32
	for range requests {
		var blocks []int32
		if len(prefixes) > 0 && r.IntN(3) > 0 {
			p := prefixes[r.IntN(len(prefixes))]
			blocks = slices.Clone(p[:1+r.IntN(len(p))])
		}
		for range 1 + r.IntN(12) {
			parent := int32(-1)
			if len(blocks) > 0 {
				parent = blocks[len(blocks)-1]
			}
			b := int32(len(t.blocks))
			t.blocks = append(t.blocks, block{parent: parent, depth: uint32(len(blocks)), tokens: 512, key: chainKey(t, parent, int64(b))})
			if parent >= 0 {
				t.blocks[parent].children = append(t.blocks[parent].children, b)
			}
			blocks = append(blocks, b)
		}
		for _, b := range blocks {
			t.blocks[b].uses = append(t.blocks[b].uses, int32(len(t.reqs)))
		}
		t.reqs = append(t.reqs, request{tokens: 512 * len(blocks), blocks: blocks})
		prefixes = append(prefixes, blocks)
	}
	return t
}

// TestRandomWorkloads replays random workloads through every policy and
// checks, for the store-driven ones, at each page that leaves a node (as
// its tier reports), that it is not in the hit prefix the request in
// flight leased and that it has no resident child on the same node
// (invariant 5); and at the end, that every store holds exactly the pages
// the replay counts as resident there, and that the byte and orphan
// accounting adds up.
func TestRandomWorkloads(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -sim.seed=%d)", seed, seed)
	for run := range 4 {
		r := rand.New(rand.NewPCG(seed, uint64(run)))
		tr := randomTrace(r, 400)
		page := eviction.DefaultProfile().PageBytes(0)
		caps := []int64{int64(8+r.IntN(20)) * page, int64(8+r.IntN(20)) * page, int64(8+r.IntN(40)) * page}
		for _, v := range variants() {
			cfg := simConfig{variant: v, profile: eviction.DefaultProfile(), capacities: caps, epoch: 7, seed: run}
			var res result
			var l *layout
			if v.store {
				res, l = replayStores(t, tr, cfg, run)
			} else {
				c, err := newBaseline(tr, cfg)
				if err != nil {
					t.Fatal(err)
				}
				res, l = c.run(), &c.layout
				for i, n := range c.nodes {
					if n.used > n.pages || n.used*l.pageSize != n.q.Bytes() {
						t.Fatalf("run %d %s: node %d holds %d of %d pages, its queue %d bytes", run, v.name, i, n.used, n.pages, n.q.Bytes())
					}
				}
			}
			var orphaned int64
			for b := range tr.blocks {
				if p := tr.blocks[b].parent; l.res.where[b] >= 0 && p >= 0 && l.res.where[p] < 0 {
					orphaned += l.pageSize
				}
			}
			if orphaned != l.res.orphaned {
				t.Fatalf("run %d %s: orphaned bytes %d, recount %d", run, v.name, l.res.orphaned, orphaned)
			}
			if !v.infinite && res.evictions == 0 {
				t.Fatalf("run %d %s: the workload never filled the cluster", run, v.name)
			}
			if res.flopsSaved > res.flopsTotal || res.hitTokens > res.tokens {
				t.Fatalf("run %d %s: saved more than the total", run, v.name)
			}
		}
	}
}

// replayStores replays cfg over real stores, checking invariants as pages
// leave, and checks that the stores hold what the replay says.
func replayStores(t *testing.T, tr *trace, cfg simConfig, run int) (result, *layout) {
	t.Helper()
	c, err := newStoreCluster(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	name := cfg.variant.name
	c.onLeave = func(b int32, node int) {
		if slices.Contains(c.leased, b) {
			t.Fatalf("run %d %s: block %d left node %d, leased by the request in flight", run, name, b, node)
		}
		for _, k := range tr.blocks[b].children {
			if int(c.res.where[k]) == node {
				t.Fatalf("run %d %s: block %d left node %d before its resident child %d", run, name, b, node, k)
			}
		}
	}
	res, err := c.run()
	if err != nil {
		t.Fatalf("run %d %s: %v", run, name, err)
	}
	for i, n := range c.nodes {
		keys := make([]namespace.Key, len(tr.blocks))
		for b := range tr.blocks {
			keys[b] = namespace.Key(tr.blocks[b].key)
		}
		_, ok, err := n.st.Admin().Stat(c.ns.ID, keys)
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for b, here := range ok {
			if here != (int(c.res.where[b]) == i) {
				t.Fatalf("run %d %s: node %d holds block %d: %v, the replay says %v", run, name, i, b, here, !here)
			}
			if here {
				held++
			}
		}
		if st := n.st.Admin().Stats(); st.Pages != int64(held) || int64(held) > c.pages[i] {
			t.Fatalf("run %d %s: node %d has %d pages, %d in the replay's count, capacity %d", run, name, i, st.Pages, held, c.pages[i])
		}
	}
	return res, &c.layout
}
