package main

import (
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stratakv/strata/eviction"
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
// checks, at each eviction, that the page is not leased (pinned by the
// request in flight) and, for every policy a store may run (not Plain), that
// it has no resident child on the same node (invariant 5); and at the end,
// that the byte and orphan accounting adds up.
func TestRandomWorkloads(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -sim.seed=%d)", seed, seed)
	for run := range 4 {
		r := rand.New(rand.NewPCG(seed, uint64(run)))
		tr := randomTrace(r, 400)
		bpt := eviction.DefaultProfile().KVBytesPerToken()
		page := 512 * bpt
		caps := []int64{int64(8+r.IntN(20)) * page, int64(8+r.IntN(20)) * page, int64(8+r.IntN(40)) * page}
		for _, v := range variants() {
			c, err := newCluster(tr, simConfig{variant: v, profile: eviction.DefaultProfile(), capacities: caps, epoch: 7, seed: run})
			if err != nil {
				t.Fatal(err)
			}
			c.onEvict = func(node int, b int32) {
				if slices.Contains(c.pinned, b) {
					t.Fatalf("run %d %s: evicted block %d, leased by the request in flight", run, v.name, b)
				}
				if v.plain {
					return
				}
				for _, k := range tr.blocks[b].children {
					if int(c.where[k]) == node {
						t.Fatalf("run %d %s: evicted block %d before its resident child %d on node %d", run, v.name, b, k, node)
					}
				}
			}
			res := c.run()
			var orphaned int64
			for b := range tr.blocks {
				if p := tr.blocks[b].parent; c.where[b] >= 0 && p >= 0 && c.where[p] < 0 {
					orphaned += c.blockBytes(int32(b))
				}
			}
			if orphaned != c.orphaned {
				t.Fatalf("run %d %s: orphaned bytes %d, recount %d", run, v.name, c.orphaned, orphaned)
			}
			if v.dropOrphans && !v.noNotice && orphaned != 0 {
				// Orphans are dropped when they learn of it, which they
				// do at once; nothing is pinned between requests.
				t.Fatalf("run %d %s: %d orphaned bytes left", run, v.name, orphaned)
			}
			if v.hints && !v.noNotice {
				// With hints a resident page is marked an orphan exactly
				// when one of its ancestors is absent.
				for b := range tr.blocks {
					if c.where[b] < 0 {
						continue
					}
					absent := false
					for p := tr.blocks[b].parent; p >= 0 && !absent; p = tr.blocks[p].parent {
						absent = c.where[p] < 0
					}
					if got := c.nodes[c.where[b]].q.Orphan(c.handle[b]); got != absent {
						t.Fatalf("run %d %s: block %d marked orphan %v, an ancestor absent %v", run, v.name, b, got, absent)
					}
				}
			}
			for i, n := range c.nodes {
				if n.used > n.capacity || n.used != n.q.Bytes() {
					t.Fatalf("run %d %s: node %d uses %d of %d, policy tracks %d", run, v.name, i, n.used, n.capacity, n.q.Bytes())
				}
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
