package eviction

import "math"

// A switch of KindCost's half-life (setHalfLife) restates every tracked
// page's priority as if the new half-life had held since the page's last
// use. A priority stores the half-lives elapsed at that use, so without
// it a switch from a short half-life to a long one would leave the pages
// used during the short one spread over as many half-lives as passed
// then, in half-lives of the long one (a page used a tier's operations
// ago would rank 2^32 below one used now after a switch from LRU, and a
// tier of stale pages inserted just before a switch to a long half-life
// would outrank new ones for many capacities). Only the time since the
// last use is restated: the decay between earlier uses stays as it was.
//
// Restating is spread over the operations that follow the switch, so
// that no single one pauses the store for the whole tier (restating a
// million pages and rebuilding the heap at once took 32-80 ms): every page
// operation (step) restates the next
// restateBatch handles of a sweep over the slab, and a page is restated
// before it is read or changed (live) and when Summarize samples it. A
// page's restated priority depends only on its last use and the switch
// (restating.apply), so whenever it is restated it ends where restating
// it at the switch would have put it, and its heap slot goes with it, up
// or down (reslot).
//
// Invariants while a switch is under way (rs.on):
//   - A page whose handle is below rs.next, or that is flagged
//     flagRestated, is stated in the new half-life; any other live page is
//     stated in the old one, and its last use (tick) is at or before the
//     switch (rs.tick): a page used or inserted since carries
//     flagRestated, a page that the sweep has passed none.
//   - The heap is ordered by its slots' keys, a restated page's slot
//     holds its new key (or, after a hit, less: heap.go) and an
//     unrestated page's its old one, and settle compares them as they
//     are: it does not restate the top, since after a switch to a longer
//     half-life every unrestated page's key rises, and settling would
//     then restate the whole heap in one operation. So while a switch is
//     under way the victim is exact among restated pages and among
//     unrestated ones but not between the two, which costs order, not
//     correctness, for at most len(pages)/restateBatch operations (an old
//     page goes sooner or later than an at-once restatement would have
//     sent it).
//   - A switch chosen while another is under way waits for it (pending):
//     the flag marks one switch only.
//
// Races: none of its own; the queue is used under its caller's lock, and
// each operation's share of the sweep is done inside that operation.
type restating struct {
	on      bool
	subToo  bool    // the best descendant's priority is restated too (setHalfLife)
	tick    uint32  // Queue.tick at the switch
	next    int     // the sweep's next handle: those below are restated
	k       float64 // 1/old − 1/new half-life: added per operation since the last use
	pending float64 // a half-life chosen while on, switched to when done; 0 none
}

// restateBatch is how many handles of the slab each page operation
// restates while a switch is under way: a tier of n pages is restated
// within n/restateBatch operations, a quarter of an epoch of the
// miniature simulations (a sixteenth of the capacity's operations) when
// full. At a million pages a switch is spread over 16,383 operations,
// none longer than 35-55 µs (BenchmarkSwitch's max-pause-ns, hits or
// puts), where restating them at once took 32-80 ms on the same loaded
// 2-core machine. A store operation over many pages restates up to
// restateBatch for each: a 1,000-key lookup (1,000 hits) pays 7-9 µs a
// hit more, 7-9 ms, for the 16 or so such lookups a switch of a
// million-page tier lasts. 16 made that a quarter, but the window an
// epoch long cost the order it mixes (restate.go's invariants): with five
// placements, TestAcceptanceChoice's 60% of Belady on the synthetic trace
// at 5% fell 3.93 points short, past its 3.9 bar (3.78 with 64, 3.81
// restated at once), and gen:scan at 10% 0.95 short of 8 capacities
// fixed (0.86, 0.89).
const restateBatch = 64

// apply restates s, stated in the old half-life, in the new one.
func (r *restating) apply(s *state) {
	age := float64(r.tick - s.tick)
	s.prio += age * r.k
	if r.subToo && !math.IsInf(s.sub, -1) {
		s.sub += age * r.k
	}
}

// setHalfLife makes h the half-life from now on and begins restating the
// tracked pages in it (see restating), the first restateBatch handles at
// once; if a switch is still under way, h waits until it is done.
//
// The best descendant's priority (sub) is restated alike, by the page's
// own time since its last use (the queue keeps no time for the sub, which
// a value hint may have set later), but not on a switch to or from LRU,
// where that error is multiplied by 64 per operation: measured with
// strata-sim on gen:agent:1 at 5% (one placement), restating it there too
// saved 85.65% of prefill FLOPs against LRU's 85.75% (the queue went
// through LRU and back), leaving it as it was on every switch 90.90% but
// 32.17% on gen:scan at 25% (1.8 points short of 8 capacities fixed),
// and restating it but there 91.03% and 33.39%.
func (q *Queue) setHalfLife(h float64) {
	if q.rs.on {
		q.rs.pending = h
		return
	}
	if h == q.halfLife {
		return
	}
	q.rs = restating{on: true, subToo: min(h, q.halfLife) >= 1, tick: q.tick, next: 1, k: 1/q.halfLife - 1/h}
	q.halfLife = h
	q.restateSome(restateBatch)
}

// restateSome restates the sweep's next n handles; at the end of the
// slab the switch is done, and a pending one begins.
func (q *Queue) restateSome(n int) {
	r := &q.rs
	for end := min(r.next+n, len(q.pages)); r.next < end; {
		h := Handle(r.next)
		r.next++
		s := &q.pages[h]
		switch {
		case s.flags&flagLive == 0:
		case s.flags&flagRestated != 0:
			s.flags &^= flagRestated
		default:
			r.apply(s)
			q.reslot(h)
		}
	}
	if r.next >= len(q.pages) {
		h := r.pending
		*r = restating{}
		if h != 0 {
			q.setHalfLife(h)
		}
	}
}

// restate states h in the new half-life if the switch under way has not
// yet, and reports whether it did; the heap is the caller's to fix.
func (q *Queue) restate(h Handle) bool {
	r := &q.rs
	if !r.on || int(h) < r.next {
		return false
	}
	s := &q.pages[h]
	if s.flags&(flagLive|flagRestated) != flagLive {
		return false
	}
	s.flags |= flagRestated
	r.apply(s)
	return true
}

// current is restate of h and, if it moved, its heap slot moved with it.
func (q *Queue) current(h Handle) {
	if q.restate(h) {
		q.reslot(h)
	}
}

// reslot brings restated h's heap slot, if it has one, to its key, up or
// down: fix would leave a raised key's slot behind, for settle, which
// would then meet every page raised by a switch to a longer half-life in
// one call, and restate the whole heap in one operation.
func (q *Queue) reslot(h Handle) {
	s := &q.pages[h]
	if s.pos < 0 {
		return // not a victim now: restating changes no eligibility
	}
	i := int(s.pos)
	e := q.entryOf(h)
	raised := q.heap[i].before(&e)
	q.heap[i] = e
	if raised {
		q.down(i)
	} else {
		q.up(i)
	}
}
