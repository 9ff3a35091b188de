package eviction

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSwitchRestates checks that a switch of half-life restates the
// pages' priorities as if the new half-life had held since each page's
// last use: pages put once under a half-life of 4 operations and then
// switched to 64 rank, and are valued, as in a queue that always had 64.
func TestSwitchRestates(t *testing.T) {
	const pages = 64
	short, long, hs, hl := switchPair(t, pages)
	short.setHalfLife(64)
	for i := range hs {
		got, want := short.Value(hs[i])-short.Clock(), long.Value(hl[i])-long.Clock()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("page %d: value %.6f half-lives from now after the switch, want %.6f", i, got, want)
		}
	}
	for range pages {
		vs, _ := short.Victim()
		vl, _ := long.Victim()
		if short.ident(vs).key != long.ident(vl).key {
			t.Fatalf("after the switch the victim is key %d, with the long half-life throughout %d", short.ident(vs).key, long.ident(vl).key)
		}
		short.Evict(vs)
		long.Evict(vl)
	}
}

// switchPair is two queues of the same pages, each put once: short with
// a half-life of 4 operations, long with 64.
func switchPair(t *testing.T, pages int) (short, long *Queue, hs, hl []Handle) {
	t.Helper()
	short = mustNew(t, Config{Kind: KindCost, Capacity: pages, HalfLife: 4, Static: true, History: -1})
	long = mustNew(t, Config{Kind: KindCost, Capacity: pages, HalfLife: 64, Static: true, History: -1})
	for i := range uint32(pages) {
		p := Page{Key: uint64(i), Bytes: miniPage, Depth: (i * 37) % 50}
		hs, hl = append(hs, short.Insert(p)), append(hl, long.Insert(p))
	}
	return short, long, hs, hl
}

// TestSwitchSpread checks that a switch of half-life is restated a
// bounded number of pages at a time: the switch itself and each page
// operation after it change at most restateBatch pages' priorities
// besides the page the operation uses (a switch that restated every page
// at once fails here), the switch is done within len(pages)/restateBatch
// operations, and then the pages, some hit once during the switch, rank,
// and are valued, as in a queue that always had the new half-life. A
// switch chosen while one is under way (back to the short half-life)
// follows it.
func TestSwitchSpread(t *testing.T) {
	const pages = 40 * restateBatch
	for _, back := range []bool{false, true} {
		cfg := Config{Kind: KindCost, Capacity: 2 * pages, HalfLife: 4, Static: true, History: -1}
		short := mustNew(t, cfg)
		cfg.HalfLife = 64
		if back {
			cfg.HalfLife = 4
		}
		ref := mustNew(t, cfg) // the last half-life throughout
		var hs, hr []Handle
		for i := range uint32(pages) {
			p := Page{Key: uint64(i), Bytes: miniPage, Depth: (i * 37) % 50}
			hs, hr = append(hs, short.Insert(p)), append(hr, ref.Insert(p))
		}
		prios := func() []float64 {
			ps := make([]float64, len(short.pages))
			for i := range short.pages {
				ps[i] = short.pages[i].prio
			}
			return ps
		}
		changed := func(was []float64) int {
			n := 0
			for i, p := range prios()[:len(was)] {
				if p != was[i] {
					n++
				}
			}
			return n
		}
		was := prios()
		short.setHalfLife(64)
		if back {
			short.setHalfLife(4)
		}
		if n := changed(was); n > restateBatch {
			t.Fatalf("back %v: the switch restated %d pages at once, want at most %d", back, n, restateBatch)
		}
		ops := 0
		for ; short.rs.on; ops++ {
			was = prios()
			if !back && ops%2 == 1 { // a hit of a page used once, at its insert
				i := (ops * 97) % pages
				short.Hit(hs[i])
				ref.Hit(hr[i])
			} else {
				p := Page{Key: uint64(pages + ops), Bytes: miniPage, Depth: uint32(ops % 50)}
				hs, hr = append(hs, short.Insert(p)), append(hr, ref.Insert(p))
			}
			if n := changed(was); n > restateBatch+1 {
				t.Fatalf("back %v: operation %d after the switch restated %d pages, want at most %d", back, ops, n, restateBatch)
			}
			if ops > 3*pages/restateBatch {
				t.Fatalf("back %v: the switch is not done after %d operations", back, ops)
			}
		}
		if back && ops < pages/restateBatch {
			t.Errorf("back: the switch back took %d operations, want the two switches' sweeps (%d or more)", ops, pages/restateBatch)
		}
		if short.HalfLife() != ref.HalfLife() {
			t.Fatalf("back %v: half-life %v after the switches, want %v", back, short.HalfLife(), ref.HalfLife())
		}
		for i := range hs {
			got, want := short.Value(hs[i])-short.Clock(), ref.Value(hr[i])-ref.Clock()
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("back %v: page %d: value %.6f half-lives from now after the switch, want %.6f", back, i, got, want)
			}
		}
		for range hs {
			vs, _ := short.Victim()
			vr, _ := ref.Victim()
			if short.ident(vs).key != ref.ident(vr).key {
				t.Fatalf("back %v: after the switch the victim is key %d, with one half-life throughout %d", back, short.ident(vs).key, ref.ident(vr).key)
			}
			short.Evict(vs)
			ref.Evict(vr)
		}
	}
}

// TestSwitchReads checks that a page read while its switch is under way
// (Value, Worth) is valued as after the switch, before the sweep has
// reached it.
func TestSwitchReads(t *testing.T) {
	short, long, hs, hl := switchPair(t, 8*restateBatch)
	short.setHalfLife(64)
	last := len(hs) - 1 // past the first batch: not swept yet
	if !short.rs.on || int(hs[last]) < short.rs.next {
		t.Fatalf("the sweep passed page %d at once", last)
	}
	got, want := short.Worth(hs[last]), long.Worth(hl[last])
	if math.Abs(got/want-1) > 1e-9 {
		t.Errorf("worth %g of an unswept page during the switch, want %g", got, want)
	}
}

// TestRandomSwitches is TestRandomWorkloads for a KindCost queue whose
// half-life switches every few dozen operations, often before the last
// switch is restated: the heap stays a heap of the eligible pages, each
// at its position, every victim is eligible, and once a switch is
// restated the victim is the minimum again (harness.evict).
func TestRandomSwitches(t *testing.T) {
	seed := testSeed(t)
	hls := []float64{1.0 / 64, 4, 256, 8192}
	for run := range 10 {
		r := rand.New(rand.NewPCG(seed, uint64(run)))
		m := &harness{t: t, q: mustNew(t, Config{Kind: KindCost, Capacity: 1024, Static: true}), r: r, pages: map[Handle]*mpage{}}
		during, waited := 0, 0 // operations during a switch, switches that waited
		for i := range 6000 {
			if i > 1000 && r.IntN(40) == 0 {
				if m.q.rs.on {
					waited++
				}
				m.q.setHalfLife(hls[r.IntN(len(hls))])
			}
			if m.q.rs.on {
				during++
			}
			m.step()
			checkHeap(t, m.q)
		}
		if during < 100 || waited == 0 {
			t.Fatalf("run %d: %d operations during a switch, %d switches chosen during one: the test tests too little", run, during, waited)
		}
		for m.q.rs.on {
			m.q.Hit(m.pick())
		}
		for len(m.live) > 0 {
			for _, h := range m.live {
				for m.pages[h].pins > 0 {
					m.pages[h].pins--
					m.q.Unpin(h)
				}
			}
			before := len(m.live)
			m.evict()
			if len(m.live) == before {
				t.Fatalf("run %d: %d unpinned pages left but no victim", run, before)
			}
		}
	}
}

// checkHeap fails unless q's heap is ordered by its slots, each slot's
// page knows its position, and it holds exactly the eligible live pages.
func checkHeap(t *testing.T, q *Queue) {
	t.Helper()
	for i := range q.heap {
		if h := q.heap[i].h; q.pages[h].pos != int32(i) {
			t.Fatalf("heap slot %d holds page %d, whose position is %d", i, h, q.pages[h].pos)
		}
		if i > 0 && q.heap[i].before(&q.heap[(i-1)/2]) {
			t.Fatalf("heap slot %d is before its parent", i)
		}
	}
	n := 0
	for h := 1; h < len(q.pages); h++ {
		if s := &q.pages[h]; s.flags&flagLive != 0 && q.eligible(s) {
			n++
			if s.pos < 0 {
				t.Fatalf("eligible page %d is not in the heap", h)
			}
		}
	}
	if n != len(q.heap) {
		t.Fatalf("%d eligible pages, %d in the heap", n, len(q.heap))
	}
}

// BenchmarkSwitch is the pauses of the store's lock that a switch of
// the chosen half-life causes in a full tier of a million pages: the
// switch (setHalfLife) and each operation after it until every page is
// restated, a hit (op=hit) or a put that evicts the victim (op=put), each
// timed alone. The k-th operation after a switch restates the same
// handles at every switch, so max-pause-ns is the longest of the
// operations' shortest times over the switches in the same direction,
// to the long half-life or back (a pause that the machine's other load
// caused, descheduling one operation, is left out); raw-max-pause-ns
// counts those too. ops/switch is the operations a switch is spread
// over; ns/op is a whole switch with its operations.
func BenchmarkSwitch(b *testing.B) {
	for _, put := range []bool{false, true} {
		b.Run(map[bool]string{false: "op=hit", true: "op=put"}[put], func(b *testing.B) { benchSwitch(b, put) })
	}
}

func benchSwitch(b *testing.B, put bool) {
	const pages = 1 << 20
	q := mustNew(b, Config{Kind: KindCost, Capacity: pages, History: -1, Static: true})
	hs := make([]Handle, pages)
	for i := range pages {
		hs[i] = q.Insert(Page{Key: uint64(i), Bytes: 1 << 20, Depth: uint32(i % 100)})
	}
	op := func(j int) {
		if !put {
			q.Hit(hs[j%pages])
			return
		}
		v, _ := q.Victim()
		q.Evict(v)
		q.Insert(Page{Key: uint64(pages + j), Bytes: 1 << 20, Depth: uint32(j % 100)})
	}
	hl := []float64{pages / 4, 8 * pages}
	// By direction and operation after the switch (0: the switch).
	shortest := [2][]time.Duration{make([]time.Duration, pages/restateBatch+2), make([]time.Duration, pages/restateBatch+2)}
	for _, s := range shortest {
		for k := range s {
			s[k] = time.Hour
		}
	}
	var raw time.Duration
	i, j, k := 0, 0, 0
	timed := func(f func()) {
		t0 := time.Now()
		f()
		d := time.Since(t0)
		raw = max(raw, d)
		shortest[i%2][k] = min(shortest[i%2][k], d)
		k++
	}
	b.ReportAllocs()
	for b.Loop() {
		k = 0
		timed(func() { q.setHalfLife(hl[i%2]) })
		for q.rs.on {
			timed(func() { op(j) })
			j += 7919 // a prime: the hits spread over the tier
		}
		i++
	}
	var worst time.Duration
	for _, s := range shortest[:min(i, 2)] {
		for _, d := range s[:k] {
			worst = max(worst, d)
		}
	}
	b.ReportMetric(float64(worst.Nanoseconds()), "max-pause-ns")
	b.ReportMetric(float64(raw.Nanoseconds()), "raw-max-pause-ns")
	b.ReportMetric(float64(k-1), "ops/switch")
}
