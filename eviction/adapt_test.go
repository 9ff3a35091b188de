package eviction

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestGhostsFIFO(t *testing.T) {
	gs := newGhosts(64)
	for k := range uint64(64) {
		if _, pushed := gs.add(ghost{key: k, class: ghostOnce, bucket: noBucket}); pushed {
			t.Fatalf("ghost %d pushed one out of a ring with room", k)
		}
	}
	old, pushed := gs.add(ghost{key: 100, class: ghostReused, bucket: 3, deep: true})
	if !pushed || old.key != 0 {
		t.Fatalf("a full ring pushed out %+v (%v), want the oldest, key 0", old, pushed)
	}
	if _, ok := gs.take(0); ok {
		t.Fatal("the ghost pushed out is still found")
	}
	if g, ok := gs.take(100); !ok || g.bucket != 3 || g.class != ghostReused {
		t.Fatalf("take(100) = %+v, %v", g, ok)
	}
	if gs.len() != 63 || gs.count[ghostOnce] != 63 || gs.count[ghostReused] != 0 || gs.deep != 0 {
		t.Fatalf("len %d counts %v deep %d, want 63 once", gs.len(), gs.count, gs.deep)
	}
	// A key that departs again replaces its ghost (and the slot it takes
	// pushes the next oldest out).
	gs.add(ghost{key: 5, class: ghostRefused, bucket: noBucket})
	if g, ok := gs.take(5); !ok || g.class != ghostRefused || gs.count[ghostRefused] != 0 || gs.len() != gs.count[ghostOnce] {
		t.Fatalf("a key departing twice: %+v %v, len %d counts %v", g, ok, gs.len(), gs.count)
	}
}

// churn inserts n pages with fresh keys from *next and evicts each at once
// (no hit): ghosts of pages used once.
func churn(q *Queue, next *uint64, n int, depth uint32) {
	for range n {
		*next++
		q.Evict(q.Insert(Page{Key: *next, Bytes: 1 << 20, Depth: depth}))
	}
}

func TestAdaptFirstTimerReuse(t *testing.T) {
	const capacity = 128
	q := mustNew(t, Config{Kind: KindCost, Capacity: capacity, History: -1})
	leaf := Page{Bytes: 1 << 20, Depth: 2}                 // ends its put
	inner := Page{Bytes: 1 << 20, Depth: 2, ChainDepth: 6} // pages follow it in its put
	if s := q.ReuseShare(leaf); s != 1 {
		t.Fatalf("share before any outcome %g, want 1", s)
	}
	next := uint64(1 << 32)
	// Leaves are never asked for again; inner pages come back once each.
	for range 6 {
		churn(q, &next, capacity/2, leaf.Depth)
		for k := range uint64(capacity / 4) {
			p := inner
			p.Key = 1 + k
			q.Evict(q.Insert(p)) // comes back from round 2 on
		}
	}
	ls, is := q.ReuseShare(leaf), q.ReuseShare(inner)
	if !(ls < 0.1) || !(is > 0.5) {
		t.Fatalf("learned shares: leaf %g (never reused), inner %g (always): want < 0.1 and > 0.5", ls, is)
	}
	// A full tier holding a page with proven reuse refuses a first-timer
	// leaf, since evicted pages came back more often than such leaves do.
	hot := q.Insert(Page{Key: 7, Bytes: 1 << 20, Depth: 2})
	q.Hit(hot)
	q.Hit(hot)
	q.SetCapacity(1 << 20)
	p := leaf
	p.Key = next + 1
	if q.Admit(p) {
		t.Errorf("admitted a first-timer leaf (share %g) over a page hit twice (evicted pages came back %g of the time)",
			q.ReuseShare(leaf), q.ad.victimReuse())
	}
	// A page with descendants in its put is never refused for its worth:
	// that would cut them.
	p = inner
	p.Key = next + 2
	if !q.Admit(p) {
		t.Error("refused a page with descendants in its put")
	}
	// The static policy compares nothing.
	st := mustNew(t, Config{Kind: KindCost, Capacity: capacity, History: -1, Static: true})
	sh := st.Insert(Page{Key: 7, Bytes: 1 << 20})
	st.Hit(sh)
	st.SetCapacity(1 << 20)
	if !st.Admit(Page{Key: 9, Bytes: 1 << 20}) || st.ReuseShare(leaf) != 1 || st.HalfLife() != float64(DefaultHalfLife(capacity)) {
		t.Error("a Static queue refused a page or learned something")
	}
}

func TestAdaptFirstTimerRanksByShare(t *testing.T) {
	const capacity = 128
	q := mustNew(t, Config{Kind: KindCost, Capacity: capacity, History: -1})
	next := uint64(1 << 32)
	for range 6 {
		churn(q, &next, capacity, 3) // leaves at depth 3, never reused
	}
	// A first-timer of that kind now starts below one used once.
	w1 := q.WorthOf(Page{Key: next + 1, Bytes: 1 << 20, Depth: 3})
	w2 := q.WorthOf(Page{Key: next + 2, Bytes: 1 << 20, Depth: 3, Freq: 2})
	if !(w1 < w2/4) {
		t.Errorf("first-timer worth %g, page seen twice %g: want the first-timer far below", w1, w2)
	}
}

func TestAdaptDepthWeight(t *testing.T) {
	const capacity = 128
	// Shallow pages come back, deep ones do not: the depth counts less.
	q := mustNew(t, Config{Kind: KindCost, Capacity: capacity, History: -1})
	next := uint64(1 << 32)
	for range 8 {
		churn(q, &next, capacity/2, 400)
		for k := range uint64(capacity / 2) {
			q.Evict(q.Insert(Page{Key: 1 + k, Bytes: 1 << 20, Depth: 0}))
		}
	}
	if w := q.ad.weight; !(w < 0.5) {
		t.Errorf("depth weight %g after shallow pages came back and deep ones did not, want < 0.5", w)
	}
	// The other way round it stays at (or returns to) 1.
	q = mustNew(t, Config{Kind: KindCost, Capacity: capacity, History: -1})
	for range 8 {
		churn(q, &next, capacity/2, 0)
		for k := range uint64(capacity / 2) {
			q.Evict(q.Insert(Page{Key: 1 + k, Bytes: 1 << 20, Depth: 400}))
		}
	}
	if w := q.ad.weight; w < 0.9 {
		t.Errorf("depth weight %g after deep pages came back, want about 1", w)
	}
	deep, shallow := q.WorthOf(Page{Key: 1, Bytes: 1 << 20, Depth: 400, Freq: 2}), q.WorthOf(Page{Key: 2, Bytes: 1 << 20, Freq: 2})
	want := DefaultProfile().PageFLOPs(400, 0) / DefaultProfile().PageFLOPs(0, 0)
	if r := deep / shallow; math.Abs(r/want-1) > 0.1 {
		t.Errorf("deep/shallow worth %g, want the cost ratio %g", r, want)
	}
}

// TestGhostsMatchModel adds and takes random keys, repeats and pushed-out
// ghosts included, and checks the ring and its index against a plain
// model: the live keys with the number of the add that put each.
func TestGhostsMatchModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	gs := newGhosts(100)
	live := map[uint64]int{} // key: the add that put it
	adds := 0
	for step := range 20_000 {
		k := r.Uint64N(300)
		if r.IntN(3) == 0 {
			_, ok := gs.take(k)
			if _, want := live[k]; ok != want {
				t.Fatalf("step %d: take(%d) = %v, want %v", step, k, ok, want)
			}
			delete(live, k)
			continue
		}
		gs.add(ghost{key: k, class: ghostOnce, bucket: noBucket})
		delete(live, k)
		// The ring pushes out the ghost in the slot it wraps onto: the
		// one put len(ring) adds ago, if still live.
		for x, a := range live {
			if a == adds-len(gs.ring) {
				delete(live, x)
			}
		}
		live[k] = adds
		adds++
		if gs.len() != len(live) {
			t.Fatalf("step %d: %d ghosts, the model %d", step, gs.len(), len(live))
		}
		if step%100 == 0 {
			for k := range uint64(300) {
				_, ok := gs.index.get(k, gs.ring)
				if _, want := live[k]; ok != want {
					t.Fatalf("step %d: key %d indexed %v, want %v", step, k, ok, want)
				}
			}
		}
	}
}
