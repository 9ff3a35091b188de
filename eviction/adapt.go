package eviction

import (
	"math"
	"unsafe"
)

// Adaptation: what a KindCost queue learns online (see "Adaptivity" in the
// package documentation) from pages that come back (a key put again after
// it left the queue, or after Admit turned it away), remembered in a ghost
// list of recently departed keys (the half-life and the admission rule
// are chosen by miniature simulation instead: mini.go):
//
//   - the weight of the depth's share of a page's cost;
//   - the share of evicted pages that come back (victimReuse), which
//     Admit compares a first-timer's expected reuse with;
//   - the expected reuse of a page seen for the first time, per class of
//     page (its depth and its distance to the end of the sequence it was
//     put with, both in powers of two) and per Page.Group (a namespace):
//     the share of such pages that are asked for again before their ghost
//     fades, whether they were kept, evicted or refused. A first-timer
//     starts with that share as its reuse count instead of 1, so where
//     most first-timers are never used again (documents read once) they
//     rank below pages with a proven reuse and Admit turns them away when
//     the tier is full of better pages; where they are (growing agent
//     contexts) they rank as before. Since the class includes the depth,
//     this also learns whether deeper pages are reused more or less here:
//     the recompute cost counts in full, multiplied by the reuse measured
//     for pages like it.

// ghost is one departed page remembered by key.
type ghost struct {
	key   uint64
	group uint32
	class uint8 // ghostOnce, ghostReused or ghostRefused
	// bucket is the reuse class of a first-timer whose outcome is still
	// open (probation), or noBucket.
	bucket uint8
	// deep: the page's depth added more to its cost than the average
	// page's (flagDeep).
	deep bool
	// live: the ring slot holds a ghost (set by ghosts.add; in the
	// struct's padding, not a slice of its own).
	live bool
}

const (
	ghostOnce    uint8 = iota // evicted without a hit since it was inserted
	ghostReused               // evicted after at least one hit
	ghostRefused              // turned away by Admit
)

// noBucket marks a page or ghost with no open first-timer outcome.
const noBucket = math.MaxUint8

// ghosts is a FIFO of departed keys, at most len(ring), with an index by
// key. The oldest ghost leaves when a new one arrives on a full ring: the
// horizon of a come-back is as many departures as the tier holds pages.
type ghosts struct {
	ring  []ghost
	next  int
	index ghostIndex // by key, of the live ghosts
	count [3]int     // live ghosts by class
	deep  int        // live ghosts with deep set
}

func newGhosts(n int) *ghosts {
	n = max(n, 64)
	return &ghosts{ring: make([]ghost, n), index: newGhostIndex(n)}
}

// add remembers g; the oldest ghost it pushes out is returned (ok true).
func (gs *ghosts) add(g ghost) (old ghost, ok bool) {
	if i, dup := gs.index.get(g.key, gs.ring); dup { // a key departs again before it came back
		old, ok = gs.ring[i], true
		gs.drop(int(i))
	}
	i := gs.next
	gs.next = (gs.next + 1) % len(gs.ring)
	if gs.ring[i].live {
		old, ok = gs.ring[i], true
		gs.drop(i)
	}
	g.live = true
	gs.ring[i] = g
	gs.index.put(int32(i), gs.ring)
	gs.count[g.class]++
	if g.deep {
		gs.deep++
	}
	return old, ok
}

// take removes and returns key's ghost.
func (gs *ghosts) take(key uint64) (ghost, bool) {
	i, ok := gs.index.get(key, gs.ring)
	if !ok {
		return ghost{}, false
	}
	g := gs.ring[i]
	gs.drop(int(i))
	return g, true
}

// bytes is the memory of the ring and its index.
func (gs *ghosts) bytes() int {
	return len(gs.ring)*int(unsafe.Sizeof(ghost{})) + len(gs.index.slots)*int(unsafe.Sizeof(gs.index.slots[0]))
}

// len is the number of live ghosts.
func (gs *ghosts) len() int { return gs.index.n }

func (gs *ghosts) drop(i int) {
	g := gs.ring[i]
	gs.ring[i].live = false
	gs.index.del(g.key, gs.ring)
	gs.count[g.class]--
	if g.deep {
		gs.deep--
	}
}

// reuseBuckets is the number of first-timer classes: depth and distance to
// the end of the put, each as log2 in 0..7.
const reuseBuckets = 64

// reuseBucket is the first-timer class of p.
func reuseBucket(p *Page) uint8 {
	dist := uint32(0)
	if p.ChainDepth > p.Depth {
		dist = p.ChainDepth - p.Depth
	}
	return uint8(min(log2Bucket(p.Depth), 7)*8 + min(log2Bucket(dist), 7))
}

// log2Bucket is 0 for 0, else 1 + floor(log2(v)).
func log2Bucket(v uint32) int {
	n := 0
	for v > 0 {
		n++
		v >>= 1
	}
	return n
}

// reuse is one group's (namespace's) record of first-timers' outcomes:
// how many were asked for again (hit) out of how many were resolved, per
// bucket, the counts halving whenever window outcomes have been added so
// that the estimate follows the workload.
type reuse struct {
	hit, all     [reuseBuckets]float64
	sumHit, sum  float64
	added, limit int
}

// prior is the weight, in outcomes, of the group-wide share in a bucket's
// estimate, so that a bucket seen a few times leans on the whole group.
const reusePrior = 4

func newReuse(window int) *reuse { return &reuse{limit: max(window, 256)} }

// record adds one outcome for bucket b.
func (r *reuse) record(b uint8, hit bool) {
	if b >= reuseBuckets {
		return
	}
	v := 0.0
	if hit {
		v = 1
	}
	r.hit[b] += v
	r.all[b]++
	r.sumHit += v
	r.sum++
	if r.added++; r.added >= r.limit {
		for i := range r.all {
			r.hit[i] /= 2
			r.all[i] /= 2
		}
		r.sumHit /= 2
		r.sum /= 2
		r.added /= 2
	}
}

// share is the estimated chance that a first-timer of bucket b is asked
// for again: 1 until outcomes are known (a page with no history counts as
// used once, as before adaptation), then the bucket's share shrunk toward
// the group's.
func (r *reuse) share(b uint8) float64 {
	if r == nil || b >= reuseBuckets {
		return 1
	}
	group := (r.sumHit + 1) / (r.sum + 1)
	return max((r.hit[b]+reusePrior*group)/(r.all[b]+reusePrior), minShare)
}

// minShare bounds a share from below, so a first-timer is never worth
// nothing (log2 of it is its head start below a page used once).
const minShare = 1.0 / 64

// adapt is a KindCost queue's learned state.
type adapt struct {
	gh     *ghosts
	groups map[uint32]*reuse
	window int
	// weight is the learned weight of the depth's share of a page's cost
	// (log2(cost/flat cost) counts weight times), in [0, 1], from 1;
	// meanGain the running mean of that log2 over inserted pages.
	weight, meanGain float64
	// back and gone count the ghosts of evicted pages that came back and
	// that faded, halving every window (victimReuse).
	back, gone float64
}

// victimReuse is the share of evicted pages that were asked for again
// before their ghost faded: how much an eviction costs, learned.
func (a *adapt) victimReuse() float64 { return (a.back + 1) / (a.back + a.gone + 2) }

// evictionOutcome records whether an evicted page came back.
func (a *adapt) evictionOutcome(came bool) {
	if came {
		a.back++
	} else {
		a.gone++
	}
	if a.back+a.gone > float64(a.window) {
		a.back /= 2
		a.gone /= 2
	}
}

// depthWeight is the weight of the depth's share of the cost: 1 when not
// adaptive.
func (a *adapt) depthWeight() float64 {
	if a == nil {
		return 1
	}
	return a.weight
}

// inserted tracks the mean depth gain (log2 of cost over flat cost) of
// inserted pages, over about a window of inserts.
func (a *adapt) inserted(gain float64) {
	a.meanGain += (gain - a.meanGain) / float64(a.window)
}

// newAdapt is the learned state of a queue of capacity pages.
func newAdapt(capacity int) *adapt {
	return &adapt{gh: newGhosts(capacity), groups: map[uint32]*reuse{}, window: max(capacity, 256), weight: 1}
}

func (a *adapt) group(g uint32) *reuse {
	r := a.groups[g]
	if r == nil {
		r = newReuse(a.window)
		a.groups[g] = r
	}
	return r
}

// share is the expected reuse of a first-timer of bucket b in group g.
func (a *adapt) share(g uint32, b uint8) float64 {
	if a == nil {
		return 1
	}
	return a.groups[g].share(b)
}

// depart remembers a page that left (evicted or refused); a ghost pushed
// out by it closes its first-timer outcome as not reused.
func (a *adapt) depart(g ghost) {
	old, ok := a.gh.add(g)
	if !ok {
		return
	}
	if old.bucket != noBucket {
		a.group(old.group).record(old.bucket, false)
	}
	if old.class != ghostRefused {
		a.evictionOutcome(false)
	}
}

// depthStep is the step of the depth weight per come-back when deep and
// shallow ghosts are as many (ARC's rule again: a come-back of the fewer
// counts more, up to twice).
const depthStep = 1.0 / 64

// comeback handles key put again: its ghost, if any, closes its
// first-timer outcome and moves the depth weight.
func (a *adapt) comeback(key uint64) {
	g, ok := a.gh.take(key)
	if !ok {
		return
	}
	if g.bucket != noBucket {
		a.group(g.group).record(g.bucket, true)
	}
	if g.class != ghostRefused {
		a.evictionOutcome(true)
	}
	// The depth weight, the same way: a deep page coming back says depth
	// was undervalued, a shallow one that it was overvalued.
	all := float64(a.gh.len() + 2)
	if g.deep {
		a.weight += 2 * depthStep * float64(a.gh.len()-a.gh.deep+1) / all
	} else {
		a.weight -= 2 * depthStep * float64(a.gh.deep+1) / all
	}
	a.weight = min(max(a.weight, 0), 1)
}
