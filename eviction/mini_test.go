package eviction

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tier is a test's cache of one queue: it hits resident keys, puts the
// others through Admit and Insert, and evicts to its capacity.
type tier struct {
	q     *Queue
	h     map[uint64]Handle
	bytes int64
}

const miniPage = 1 << 20

func newTier(t *testing.T, pages int) *tier {
	return &tier{q: mustNew(t, Config{Kind: KindCost, Capacity: pages, CapacityBytes: int64(pages) * miniPage}),
		h: map[uint64]Handle{}, bytes: int64(pages) * miniPage}
}

func (c *tier) request(key uint64) {
	if h, ok := c.h[key]; ok {
		c.q.Hit(h)
		return
	}
	c.q.Record(key)
	p := Page{Key: key, Bytes: miniPage}
	if !c.q.Admit(p) {
		return
	}
	c.h[key] = c.q.Insert(p)
	for c.q.Bytes() > c.bytes {
		v, ok := c.q.Victim()
		if !ok {
			return
		}
		delete(c.h, c.q.ident(v).key)
		c.q.Evict(v)
	}
}

// TestMiniChoosesPerWorkload drives a queue with two workloads on which
// the candidates disagree and checks that the miniature simulations take
// the live queue to a fitting half-life: a hot set under scans of keys
// used once wants a long one (a short one lets each scan flush it); keys
// reused a little later and then never wants a short one (a long one
// keeps pages for uses that are over).
func TestMiniChoosesPerWorkload(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	const pages = 256
	r := rand.New(rand.NewPCG(seed, 1))

	scan := newTier(t, pages)
	cands := Candidates()
	if c, ok := scan.q.Choice(); !ok || c != cands[len(cands)-1] {
		t.Fatalf("a cold queue holds %v (%v), want the longest half-life, %v", c, ok, cands[len(cands)-1])
	}
	for k := range uint64(pages) {
		scan.request(1<<50 + k) // fills the tier: nothing evicted yet
	}
	if c, _ := scan.q.Choice(); c != cands[len(cands)-1] {
		t.Fatalf("a full queue that has evicted nothing holds %v, want %v", c, cands[len(cands)-1])
	}
	scan.request(1<<50 + pages) // the first eviction
	if c, _ := scan.q.Choice(); c != cands[startCandidate] {
		t.Fatalf("after its first eviction a queue holds %v, want %v", c, cands[startCandidate])
	}
	fresh := uint64(1 << 40)
	for range 200 * pages {
		if r.IntN(2) == 0 {
			scan.request(uint64(r.IntN(pages / 2))) // the hot set, half the tier
		} else {
			fresh++
			scan.request(fresh) // used once
		}
	}
	if c, _ := scan.q.Choice(); c.HalfLife < 2 {
		t.Errorf("hot set under scans: chose %v, want a half-life of 2 capacities or more", c)
	}

	recent := newTier(t, pages)
	for i := range uint64(200 * pages) {
		recent.request(1<<40 + i) // each key now
		if i >= pages/4 {
			recent.request(1<<40 + i - pages/4) // and once more, about half a tier later
		}
		if r.IntN(2) == 0 {
			recent.request(uint64(r.IntN(4 * pages))) // a uniform set of four tiers: reuse too far apart to keep
		}
	}
	if c, _ := recent.q.Choice(); c.HalfLife > 0.25 {
		t.Errorf("keys reused once a little later: chose %v, want LRU or 0.25 capacities", c)
	}
}

// TestMiniSample checks the sample: a tier of sampleTarget pages or fewer
// samples every key, a larger one about sampleTarget/pages of them, the
// same keys every time; the shadows are scaled to the sampled capacity.
func TestMiniSample(t *testing.T) {
	small := mustNew(t, Config{Kind: KindCost, Capacity: sampleTarget, CapacityBytes: sampleTarget * miniPage})
	big := mustNew(t, Config{Kind: KindCost, Capacity: 64 * sampleTarget, CapacityBytes: 64 * sampleTarget * miniPage})
	n := 0
	for k := range uint64(1 << 16) {
		if !small.mini.sampled(k) {
			t.Fatalf("a tier of %d pages left key %d out of its sample", sampleTarget, k)
		}
		if big.mini.sampled(k) {
			n++
		}
		if big.mini.sampled(k) != big.mini.sampled(k) {
			t.Fatal("sampled twice, two answers")
		}
	}
	if want := 1 << 16 / 64; n < want*3/4 || n > want*5/4 {
		t.Errorf("a tier of %d pages sampled %d of 65536 keys, want about %d", 64*sampleTarget, n, want)
	}
	if got := big.mini.capac; got != sampleTarget*miniPage {
		t.Errorf("shadow capacity %d bytes, want %d", got, sampleTarget*miniPage)
	}
	for _, cfg := range []Config{{Kind: KindCost, Capacity: 64}, {Kind: KindCost, Capacity: 64, CapacityBytes: 1 << 30, HalfLife: 10},
		{Kind: KindCost, Capacity: 64, CapacityBytes: 1 << 30, Static: true}, {Kind: KindLRU, Capacity: 64, CapacityBytes: 1 << 30}} {
		if _, ok := mustNew(t, cfg).Choice(); ok {
			t.Errorf("%+v chooses a setting, want none (no capacity, fixed, static or another kind)", cfg)
		}
	}
}

// TestSwitchRestates checks that a switch of half-life restates the
// pages' priorities as if the new half-life had held since each page's
// last use: pages put once under a half-life of 4 operations and then
// switched to 64 rank, and are valued, as in a queue that always had 64,
// and the reverse. A switch to a shorter half-life lowers every page's
// priority, the older the more, so the heap's slots must take the new
// keys before it is reordered (a slot left behind is only settled when it
// reaches the top: heap.go).
func TestSwitchRestates(t *testing.T) {
	const pages = 64
	for _, hl := range [][2]int{{4, 64}, {64, 4}} {
		from := mustNew(t, Config{Kind: KindCost, Capacity: pages, HalfLife: hl[0], Static: true, History: -1})
		to := mustNew(t, Config{Kind: KindCost, Capacity: pages, HalfLife: hl[1], Static: true, History: -1})
		var hs, ht []Handle
		for i := range uint32(pages) {
			p := Page{Key: uint64(i), Bytes: miniPage, Depth: (i * 37) % 50}
			hs, ht = append(hs, from.Insert(p)), append(ht, to.Insert(p))
		}
		from.setHalfLife(float64(hl[1]))
		for i := range hs {
			got, want := from.Value(hs[i])-from.Clock(), to.Value(ht[i])-to.Clock()
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("%d to %d: page %d: value %.6f half-lives from now after the switch, want %.6f", hl[0], hl[1], i, got, want)
			}
		}
		for range pages {
			vs, _ := from.Victim()
			vl, _ := to.Victim()
			if from.ident(vs).key != to.ident(vl).key {
				t.Fatalf("%d to %d: after the switch the victim is key %d, with the new half-life throughout %d",
					hl[0], hl[1], from.ident(vs).key, to.ident(vl).key)
			}
			from.Evict(vs)
			to.Evict(vl)
		}
	}
}
