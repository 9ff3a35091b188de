package eviction

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stratakv/strata/internal/testing/panics"
)

func mustNew(t testing.TB, cfg Config) *Queue {
	t.Helper()
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func page(depth uint32) Page { return Page{Key: uint64(depth)*7919 + 1, Bytes: 1 << 20, Depth: depth} }

// victims drains q and returns the order of the handles it evicted.
func victims(q *Queue) []Handle {
	var out []Handle
	for {
		h, ok := q.Victim()
		if !ok {
			return out
		}
		q.Evict(h)
		out = append(out, h)
	}
}

func equal(a, b []Handle) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		// run inserts pages and returns the eviction order expected.
		run func(q *Queue) []Handle
	}{{
		name: "lru",
		cfg:  Config{Kind: KindLRU},
		run: func(q *Queue) []Handle {
			a, b, c := q.Insert(page(0)), q.Insert(page(0)), q.Insert(page(0))
			q.Hit(a)
			return []Handle{b, c, a}
		},
	}, {
		name: "lfu",
		cfg:  Config{Kind: KindLFU},
		run: func(q *Queue) []Handle {
			a, b, c := q.Insert(page(0)), q.Insert(page(0)), q.Insert(page(0))
			q.Hit(a)
			q.Hit(a)
			q.Hit(c)
			return []Handle{b, c, a}
		},
	}, {
		name: "gdsf-bytes ignores depth",
		cfg:  Config{Kind: KindGDSFBytes},
		run: func(q *Queue) []Handle {
			deep, shallow := q.Insert(page(100)), q.Insert(page(0))
			return []Handle{deep, shallow} // equal value: older first
		},
	}, {
		name: "cost keeps the deeper page",
		cfg:  Config{Kind: KindCost, History: -1},
		run: func(q *Queue) []Handle {
			deep, shallow := q.Insert(page(100)), q.Insert(page(0))
			return []Handle{shallow, deep}
		},
	}, {
		name: "cost: reuse beats depth",
		cfg:  Config{Kind: KindCost, History: -1},
		run: func(q *Queue) []Handle {
			deep, shallow := q.Insert(page(10)), q.Insert(page(0))
			q.Hit(shallow)
			return []Handle{deep, shallow}
		},
	}, {
		name: "cost hint overrides the profile",
		cfg:  Config{Kind: KindCost, History: -1},
		run: func(q *Queue) []Handle {
			p := page(100)
			p.Cost = 1
			cheap, shallow := q.Insert(p), q.Insert(page(0))
			return []Handle{cheap, shallow}
		},
	}, {
		name: "leaf first",
		cfg:  Config{Kind: KindLRU},
		run: func(q *Queue) []Handle {
			parent := q.Insert(page(0))
			child := q.Insert(page(1))
			q.ChildAdded(parent, true)
			q.Hit(child)
			q.Hit(parent) // least valuable by recency, but it has a child
			return []Handle{child}
		},
	}, {
		name: "orphans first, remote parents last",
		cfg:  Config{Kind: KindLRU},
		run: func(q *Queue) []Handle {
			withRemote := q.Insert(page(0))
			q.ChildAdded(withRemote, false)
			leaf := q.Insert(page(0))
			orphan := q.Insert(page(5))
			q.SetOrphan(orphan, true)
			return []Handle{orphan, leaf, withRemote}
		},
	}, {
		name: "plain ignores children",
		cfg:  Config{Kind: KindLRU, Plain: true},
		run: func(q *Queue) []Handle {
			parent := q.Insert(page(0))
			child := q.Insert(page(1))
			q.ChildAdded(parent, true)
			return []Handle{parent, child}
		},
	}, {
		name: "pinned pages are skipped",
		cfg:  Config{Kind: KindLRU},
		run: func(q *Queue) []Handle {
			a, b := q.Insert(page(0)), q.Insert(page(0))
			q.Pin(a)
			q.Pin(a)
			q.Unpin(a)
			return []Handle{b}
		},
	}, {
		name: "offline priorities",
		cfg:  Config{Kind: KindOffline},
		run: func(q *Queue) []Handle {
			a, b := q.Insert(page(0)), q.Insert(page(0))
			q.SetPriority(a, 5)
			q.SetPriority(b, -5)
			return []Handle{b, a}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := mustNew(t, tt.cfg)
			want := tt.run(q)
			if got := victims(q); !equal(got, want) {
				t.Fatalf("evicted %v, want %v", got, want)
			}
		})
	}
}

func TestLeafFirstUnblocks(t *testing.T) {
	q := mustNew(t, Config{Kind: KindCost})
	parent := q.Insert(page(0))
	child := q.Insert(page(1))
	q.ChildAdded(parent, true)
	for range 3 {
		q.Hit(child) // the child is worth more, and still goes first
	}
	if h, _ := q.Victim(); h != child {
		t.Fatalf("victim %d, want the child %d", h, child)
	}
	q.Evict(child)
	q.ChildRemoved(parent, true) // the caller's bookkeeping
	if h, ok := q.Victim(); !ok || h != parent {
		t.Fatalf("victim %d, %v: want the parent once it is a leaf", h, ok)
	}
}

func TestGDSFClock(t *testing.T) {
	q := mustNew(t, Config{Kind: KindGDSFBytes})
	old := q.Insert(page(0))
	q.Hit(old)
	q.Hit(old) // value = 3 credits
	for range 10 {
		// A stream of fresh pages: each eviction raises the clock to the
		// evicted value, until the old page is the cheapest.
		q.Insert(page(0))
		h, _ := q.Victim()
		q.Evict(h)
		if h == old {
			if q.Clock() <= 0 {
				t.Fatal("clock did not advance")
			}
			return
		}
	}
	t.Fatal("a page hit long ago never aged out")
}

func TestCostAging(t *testing.T) {
	q := mustNew(t, Config{Kind: KindCost, History: -1, HalfLife: 4})
	old := q.Insert(page(0))
	q.Hit(old)
	q.Hit(old) // reuse count 3
	w := q.Worth(old)
	for i := range 40 {
		// A stream of fresh pages (count 1): the old page's count halves
		// every 4 operations, so it is the cheapest after about 8.
		q.Insert(page(0))
		h, _ := q.Victim()
		q.Evict(h)
		if h == old {
			if i < 4 {
				t.Fatalf("a page used 3 times went after %d fresh pages", i)
			}
			if q.Clock() <= 0 {
				t.Fatal("clock did not advance")
			}
			return
		}
		if i == 3 {
			// Four operations since the last hit: one half-life.
			if got := q.Worth(old); got < 0.49*w || got > 0.51*w {
				t.Fatalf("worth after one half-life %g, want half of %g", got, w)
			}
		}
	}
	t.Fatal("a page hit long ago never aged out")
}

func TestAdmit(t *testing.T) {
	for _, capAdmit := range []bool{false, true} {
		// The static policy: an adaptive one compares a page that ends its
		// put with the victim whatever CapacityAdmission (TestAdaptAdmit).
		q := mustNew(t, Config{Kind: KindCost, History: -1, HalfLife: 4, CapacityAdmission: capAdmit, Static: true})
		p := page(0)
		hot := q.Insert(p)
		for range 5 {
			q.Hit(hot)
		}
		if !q.Admit(p) {
			t.Fatal("refused a page with no capacity set")
		}
		q.SetCapacity(p.Bytes) // full with one page used 6 times
		before := q.Clock()
		if got := q.Admit(p); got == capAdmit {
			t.Fatalf("CapacityAdmission %v: Admit of a fresh page over a hotter victim = %v", capAdmit, got)
		}
		if !capAdmit {
			continue
		}
		if q.Clock() <= before {
			t.Fatal("a refusal must advance the clock")
		}
		// After enough refusals the stale hot page is worth less than a new one.
		admitted := false
		for range 40 {
			if admitted = q.Admit(p); admitted {
				break
			}
		}
		if !admitted {
			t.Fatal("refusals never aged the victim out")
		}
		// An orphan victim goes first whatever its value: it never keeps a
		// page out.
		q.SetOrphan(hot, true)
		for range 5 {
			q.Hit(hot)
		}
		if !q.Admit(p) {
			t.Fatal("an orphan victim kept a page out")
		}
	}
	q := mustNew(t, Config{Kind: KindCost, History: -1})
	p := page(0)
	q.SetCutoff(q.WorthOf(p) * 1.5)
	if !q.Admit(p) {
		t.Fatalf("refused a page worth more than %g of the cutoff", DefaultAdmitShare)
	}
	q.SetCutoff(q.WorthOf(p) * 1.01 / DefaultAdmitShare)
	if q.Admit(p) {
		t.Fatalf("admitted a page below %g of the cutoff", DefaultAdmitShare)
	}
	if q.Evicted() == 0 {
		t.Fatal("refusals are not counted as turnover")
	}
}

// TestChildWorth: a page whose resident descendants (here on another node)
// are worth more is kept as long as they would be, and its Worth says so.
func TestChildWorth(t *testing.T) {
	q := mustNew(t, Config{Kind: KindCost, History: -1})
	parent := q.Insert(page(0))
	q.ChildAdded(parent, false)
	leaf := q.Insert(page(0))
	q.Hit(leaf)
	// Both are in different classes: the leaf goes first anyway.
	if h, _ := q.Victim(); h != leaf {
		t.Fatalf("victim %d, want the leaf %d", h, leaf)
	}
	own := q.Worth(parent)
	q.SetChildWorth(parent, 100*own)
	if got := q.Worth(parent); got < 99*own || got > 101*own {
		t.Fatalf("worth with a hot child %g, want about %g", got, 100*own)
	}
	q.ChildRemoved(parent, false) // now both are leaves: value decides
	if h, _ := q.Victim(); h != leaf {
		t.Fatalf("victim %d, want the leaf %d, not the parent of a hot descendant", h, leaf)
	}
	q.SetChildWorth(parent, 0)
	if got := q.Worth(parent); got != own {
		t.Fatalf("worth without descendants %g, want its own %g", got, own)
	}
	if h, _ := q.Victim(); h != parent {
		t.Fatalf("victim %d, want the parent %d once its descendants are gone", h, parent)
	}
	lru := mustNew(t, Config{Kind: KindLRU})
	h := lru.Insert(page(0))
	v := lru.Value(h)
	lru.SetChildWorth(h, 1e9)
	if lru.Value(h) != v {
		t.Fatal("SetChildWorth changed an LRU priority")
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := New(Config{HalfLife: -1}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("New with a negative half-life: %v, want ErrBadConfig", err)
	}
	for _, share := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := New(Config{AdmitShare: share}); !errors.Is(err, ErrBadConfig) {
			t.Fatalf("New with admit share %g: %v, want ErrBadConfig", share, err)
		}
	}
	// A share of 1 refuses at the whole cutoff.
	q := mustNew(t, Config{Kind: KindCost, History: -1, AdmitShare: 1})
	p := page(0)
	q.SetCutoff(q.WorthOf(p) * 1.5)
	if q.Admit(p) {
		t.Fatal("admit share 1: admitted a page below the cutoff")
	}
}

func TestHistory(t *testing.T) {
	q := mustNew(t, Config{Kind: KindCost, Capacity: 100})
	p := page(3)
	for range 4 {
		q.Record(p.Key)
	}
	if got := q.Estimate(p.Key); got != 4 {
		t.Fatalf("estimate = %d, want 4", got)
	}
	h := q.Insert(p)
	if got := q.pages[h].freq; got != 4 {
		t.Fatalf("re-put page starts at freq %d, want the history's 4", got)
	}
	if q.HistoryBytes() == 0 {
		t.Fatal("no history memory reported")
	}
	if mustNew(t, Config{Kind: KindLRU}).HistoryBytes() != 0 {
		t.Fatal("LRU keeps a history")
	}
}

// TestGhostBytes: an adaptive cost queue reports its ghost list's memory, a
// ring of a ghost per page of capacity and an index of 4-byte slots at a
// load of at most 3/4; a static one and LRU keep none.
func TestGhostBytes(t *testing.T) {
	q := mustNew(t, Config{Kind: KindCost, Capacity: 1000})
	if got, want := q.GhostBytes(), 1000*16+(1000+333+1)*4; got != want {
		t.Errorf("ghost bytes = %d, want %d", got, want)
	}
	if got := mustNew(t, Config{Kind: KindCost, Capacity: 1000, Static: true}).GhostBytes(); got != 0 {
		t.Errorf("static queue: %d ghost bytes", got)
	}
	if got := mustNew(t, Config{Kind: KindLRU, Capacity: 1000}).GhostBytes(); got != 0 {
		t.Errorf("LRU: %d ghost bytes", got)
	}
}

func TestSketchAges(t *testing.T) {
	s := newSketch(64)
	for range 10 {
		s.add(42)
	}
	if got := s.estimate(42); got != 10 {
		t.Fatalf("estimate = %d, want 10", got)
	}
	for i := range s.reset {
		s.add(uint64(1000 + i))
	}
	if got := s.estimate(42); got > 5 {
		t.Fatalf("estimate after a reset period = %d, want halved", got)
	}
}

// TestSketchAddAll checks that adding keys in runs leaves the sketch as
// adding them one by one does, repeats, collisions and halvings included.
func TestSketchAddAll(t *testing.T) {
	one, all := newSketch(256), newSketch(256)
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		keys := make([]uint64, r.IntN(3*addRun))
		for i := range keys {
			keys[i] = r.Uint64N(600) // repeats within a run
		}
		for _, k := range keys {
			one.add(k)
		}
		all.addAll(keys)
	}
	if !slices.Equal(one.words, all.words) || one.adds != all.adds {
		t.Fatal("addAll left the sketch unlike add one by one")
	}
}

// refAdd is the sketch's update written against slots, the definition of
// where a key's counters are: conservative update of the four, then the
// halving every reset adds.
func refAdd(s *sketch, key uint64) {
	idx, sh := s.slots(key)
	m := uint64(15)
	for r := range sketchRows {
		m = min(m, s.words[idx[r]]>>sh[r]&15)
	}
	if m < 15 {
		for r := range sketchRows {
			if s.words[idx[r]]>>sh[r]&15 == m {
				s.words[idx[r]] += 1 << sh[r]
			}
		}
	}
	if s.adds++; s.adds >= s.reset {
		s.halve()
	}
}

// TestSketchAddMatchesSlots: add and addAll, which index the key's block
// directly, change exactly the counters slots names, as refAdd does, over
// a stream with repeats, saturated counters and halvings.
func TestSketchAddMatchesSlots(t *testing.T) {
	ref, one, all := newSketch(512), newSketch(512), newSketch(512)
	r := rand.New(rand.NewPCG(5, 6))
	for range 400 {
		keys := make([]uint64, r.IntN(3*addRun))
		for i := range keys {
			keys[i] = r.Uint64N(2000)
			if r.IntN(4) == 0 {
				keys[i] = 7 // one hot key, whose counters saturate
			}
		}
		for _, k := range keys {
			refAdd(ref, k)
			one.add(k)
		}
		all.addAll(keys)
	}
	if ref.adds == 0 || !slices.Equal(ref.words, one.words) || !slices.Equal(ref.words, all.words) || ref.adds != one.adds || ref.adds != all.adds {
		t.Fatal("add or addAll changed other counters than slots names")
	}
	if got := one.estimate(7); got != 15 {
		t.Fatalf("hot key's estimate %d, want 15 (saturated)", got)
	}
}

func TestHandles(t *testing.T) {
	q := mustNew(t, Config{Kind: KindLRU})
	a := q.Insert(page(0))
	if a == 0 {
		t.Fatal("assigned the zero handle")
	}
	q.Remove(a)
	if q.Len() != 0 || q.Bytes() != 0 {
		t.Fatalf("len %d bytes %d after Remove", q.Len(), q.Bytes())
	}
	if b := q.Insert(page(0)); b != a {
		t.Fatalf("handle %d not reused (got %d)", a, b)
	}
	panics.Expect(t, "stale handle", func() { q.Hit(a + 1) })
	panics.Expect(t, "zero handle", func() { q.Hit(0) })
}

func TestMisuse(t *testing.T) {
	q := mustNew(t, Config{Kind: KindLRU})
	a := q.Insert(page(0))
	q.Pin(a)
	panics.Expect(t, "Evict of a pinned page", func() { q.Evict(a) })
	q.Unpin(a)
	panics.Expect(t, "Unpin of an unpinned page", func() { q.Unpin(a) })
	q.ChildAdded(a, true)
	panics.Expect(t, "Evict of a page with local children", func() { q.Evict(a) })
	q.ChildRemoved(a, true)
	panics.Expect(t, "ChildRemoved without children", func() { q.ChildRemoved(a, true) })
	q.ChildRemoved(a, false) // remote hints are best effort
	panics.Expect(t, "zero-byte page", func() { q.Insert(Page{}) })
	q.Evict(a)
}

// TestChainCost: a shallow page put with deeper pages of its sequence is
// admitted and kept as its deepest fresh descendant would be, where alone
// it is refused below a cutoff that the deep page passes.
func TestChainCost(t *testing.T) {
	prof := DefaultProfile()
	q := mustNew(t, Config{Kind: KindCost, History: -1})
	shallow, deep := page(0), page(40)
	deep.Cost = prof.PageFLOPs(deep.Depth, 0)
	if q.WorthOf(deep) <= q.WorthOf(shallow) {
		t.Fatalf("a page at depth 40 is worth %g, not more than one at depth 0 (%g)", q.WorthOf(deep), q.WorthOf(shallow))
	}
	q.SetCutoff((q.WorthOf(shallow) + q.WorthOf(deep)) / 2 / DefaultAdmitShare)
	if q.Admit(shallow) {
		t.Fatal("admitted a lone shallow page below the cutoff")
	}
	if !q.Admit(deep) {
		t.Fatal("refused the deep page above the cutoff")
	}
	chained := shallow
	chained.ChainDepth = deep.Depth
	if !q.Admit(chained) {
		t.Fatal("refused a shallow page put with a deep descendant above the cutoff")
	}
	if got, want := q.WorthOf(chained), q.WorthOf(deep); got < want*0.999 || got > want*1.001 {
		t.Fatalf("chained shallow page worth %g, want its deep descendant's %g", got, want)
	}
	q.SetCutoff(0)
	lone := q.Insert(shallow)
	q.Insert(chained)
	if h, _ := q.Victim(); h != lone {
		t.Fatalf("victim %d, want the lone shallow page %d before the head of a deep chain", h, lone)
	}
	// A chain cost below the page's own changes nothing, nor does a chain
	// depth no deeper than the page.
	cheap := deep
	cheap.ChainDepth, cheap.ChainCost = 50, 1
	if q.WorthOf(cheap) != q.WorthOf(deep) {
		t.Fatal("a chain cost below the page's own changed its worth")
	}
	above := deep
	above.ChainDepth = 10
	if q.WorthOf(above) != q.WorthOf(deep) {
		t.Fatal("a chain depth shallower than the page changed its worth")
	}
	// A measured chain cost is used as given.
	priced := shallow
	priced.ChainDepth, priced.ChainCost = 1, 1000*deep.Cost
	if q.WorthOf(priced) < 999*q.WorthOf(deep) {
		t.Fatalf("a chain cost of 1000× the deep page's gave worth %g, the deep page's is %g", q.WorthOf(priced), q.WorthOf(deep))
	}
}
