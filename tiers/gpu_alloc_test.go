package tiers

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stratakv/strata/internal/testing/panics"
	"github.com/stratakv/strata/internal/testing/testseed"
)

const (
	gpuKiB = int64(1) << 10
	gpuMiB = int64(1) << 20
)

// newTestGPUAlloc returns an allocator that is checked for consistency when
// the test ends.
func newTestGPUAlloc(t *testing.T, slabSize int64, nslabs int) *gpuAlloc {
	t.Helper()
	a := newGPUAlloc(slabSize, nslabs)
	t.Cleanup(func() { checkGPUAlloc(t, a) })
	return a
}

// checkGPUAlloc verifies the allocator's invariants: owners cover each span
// exactly, the free-slab count matches, each span's free list, bump, live
// count and generations agree, partial lists hold exactly the spans with a
// free slot, no span is empty, and the counters match the spans.
func checkGPUAlloc(t *testing.T, a *gpuAlloc) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("gpuAlloc inconsistent: "+format, args...)
	}
	free := 0
	var extents, used int64
	inPartial := 0
	for s := 0; s < a.nslabs; {
		start := a.owner[s]
		if start < 0 {
			free++
			s++
			continue
		}
		if int(start) != s {
			fail("slab %d: owner %d, not the start of a span", s, start)
		}
		sp := &a.spans[start]
		if sp.class < 0 || int(sp.class) >= len(a.classes) {
			fail("span %d: class %d", start, sp.class)
		}
		cl := &a.classes[sp.class]
		for k := s; k < s+int(cl.spanSlabs); k++ {
			if k >= a.nslabs || a.owner[k] != start {
				fail("span %d of %d slabs: slab %d has owner %d", start, cl.spanSlabs, k, a.owner[min(k, a.nslabs-1)])
			}
		}
		if sp.live <= 0 || sp.bump > cl.slots || int(sp.live)+len(sp.free) != int(sp.bump) || len(sp.gens) != int(cl.slots) {
			fail("span %d: live %d, bump %d, %d free, %d gens, %d slots",
				start, sp.live, sp.bump, len(sp.free), len(sp.gens), cl.slots)
		}
		live := int32(0)
		for i, g := range sp.gens {
			if g != 0 && int32(i) >= sp.bump {
				fail("span %d slot %d: generation %d above bump %d", start, i, g, sp.bump)
			}
			if g != 0 {
				live++
			}
		}
		seen := map[int32]bool{}
		for _, f := range sp.free {
			if f < 0 || f >= sp.bump || sp.gens[f] != 0 || seen[f] {
				fail("span %d: free slot %d (bump %d, generation %d, repeated %v)", start, f, sp.bump, sp.gens[min(max(f, 0), cl.slots-1)], seen[f])
			}
			seen[f] = true
		}
		if live != sp.live {
			fail("span %d: %d live generations, live count %d", start, live, sp.live)
		}
		hasFree := len(sp.free) > 0 || sp.bump < cl.slots
		if hasFree != (sp.pidx >= 0) {
			fail("span %d: has a free slot %v, on the partial list at %d", start, hasFree, sp.pidx)
		}
		if sp.pidx >= 0 {
			inPartial++
			if int(sp.pidx) >= len(cl.partial) || cl.partial[sp.pidx] != start {
				fail("span %d: partial index %d not it", start, sp.pidx)
			}
		}
		extents += int64(sp.live)
		used += int64(sp.live) * cl.size
		s += int(cl.spanSlabs)
	}
	listed := 0
	for _, cl := range a.classes {
		listed += len(cl.partial)
	}
	switch {
	case free != a.freeSlabs:
		fail("%d free slabs, count %d", free, a.freeSlabs)
	case listed != inPartial:
		fail("%d spans on partial lists, %d say so", listed, inPartial)
	case extents != a.extents || used != a.used:
		fail("spans hold %d extents (%d bytes), counters say %d (%d)", extents, used, a.extents, a.used)
	case a.extents == 0 && a.requested != 0:
		fail("no extents but %d bytes requested", a.requested)
	}
}

// TestGPUAllocSizes checks the class and span chosen for single sizes, and
// the sizes refused, on an arena of sixteen 1 MiB slabs.
func TestGPUAllocSizes(t *testing.T) {
	tests := []struct {
		size      int64
		cap       int64
		spanSlabs int32
		err       error
	}{
		{size: 1, cap: 4 * gpuKiB, spanSlabs: 1},
		{size: 4096, cap: 4 * gpuKiB, spanSlabs: 1},
		{size: 4097, cap: 8 * gpuKiB, spanSlabs: 1},
		{size: 64 * gpuKiB, cap: 64 * gpuKiB, spanSlabs: 1},
		{size: 1 * gpuMiB, cap: 1 * gpuMiB, spanSlabs: 1},
		// Spans of at most nslabs/8 = 2 slabs here, whatever their tail.
		{size: 1*gpuMiB + 1, cap: 1*gpuMiB + 4*gpuKiB, spanSlabs: 2},
		{size: 1_179_648, cap: 1_179_648, spanSlabs: 2},
		{size: 16 * gpuMiB, cap: 16 * gpuMiB, spanSlabs: 16},
		{size: 0, err: ErrTooLarge},
		{size: -1, err: ErrTooLarge},
		{size: 16*gpuMiB + 1, err: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.size), func(t *testing.T) {
			a := newTestGPUAlloc(t, gpuMiB, 16)
			ext, err := a.alloc(tt.size)
			if !errors.Is(err, tt.err) {
				t.Fatalf("alloc(%d) = %+v, %v; want error %v", tt.size, ext, err, tt.err)
			}
			if err != nil {
				return
			}
			if ext.Len != tt.size || ext.Cap != tt.cap || ext.Off%(4*gpuKiB) != 0 || ext.Gen == 0 {
				t.Fatalf("alloc(%d) = %+v; want Len %d, Cap %d, 4 KiB-aligned, Gen > 0", tt.size, ext, tt.size, tt.cap)
			}
			if got := a.classes[classIndex(tt.size)].spanSlabs; got != tt.spanSlabs {
				t.Errorf("class %d: %d slabs per span, want %d", tt.cap, got, tt.spanSlabs)
			}
			if st := a.stats(); st != (Stats{Kind: KindGPU, Capacity: 16 * gpuMiB, Used: tt.cap, Extents: 1, Requested: tt.size}) {
				t.Errorf("stats %+v", st)
			}
			checkGPUAlloc(t, a)
			a.free(ext)
			if st := a.stats(); st.Used != 0 || st.Extents != 0 || st.Requested != 0 || a.freeSlabs != 16 {
				t.Errorf("after free: stats %+v, %d free slabs", st, a.freeSlabs)
			}
		})
	}
}

// TestGPUAllocFillShift fills the arena with one size until ErrFull, frees
// everything, and fills it with another: empty spans give their slabs back,
// so the second size gets the whole arena.
func TestGPUAllocFillShift(t *testing.T) {
	a := newTestGPUAlloc(t, gpuMiB, 8)
	fill := func(size int64, want int) []Extent {
		t.Helper()
		var exts []Extent
		for {
			ext, err := a.alloc(size)
			if errors.Is(err, ErrFull) {
				break
			}
			if err != nil {
				t.Fatalf("alloc(%d) after %d: %v", size, len(exts), err)
			}
			exts = append(exts, ext)
		}
		if len(exts) != want {
			t.Fatalf("%d extents of %d bytes fit, want %d", len(exts), size, want)
		}
		checkGPUAlloc(t, a)
		return exts
	}
	small := fill(64*gpuKiB, 8*16)
	for _, ext := range small {
		a.free(ext)
	}
	checkGPUAlloc(t, a)
	big := fill(2*gpuMiB, 4)
	// Free one big extent: exactly one more fits, then the arena is full again.
	a.free(big[1])
	if _, err := a.alloc(2 * gpuMiB); err != nil {
		t.Fatalf("alloc after a free: %v", err)
	}
	if _, err := a.alloc(4 * gpuKiB); !errors.Is(err, ErrFull) {
		t.Fatalf("alloc of a small extent in a full arena: %v, want ErrFull", err)
	}
}

// TestGPUAllocGenerations checks that a reused slot gets a new generation and
// that a freed extent's generation never comes back.
func TestGPUAllocGenerations(t *testing.T) {
	a := newTestGPUAlloc(t, gpuMiB, 2)
	e1, _ := a.alloc(100)
	if got := a.generation(e1); got != e1.Gen {
		t.Fatalf("generation of live %+v = %d", e1, got)
	}
	a.free(e1)
	if got := a.generation(e1); got == e1.Gen {
		t.Fatalf("generation of freed %+v still %d", e1, got)
	}
	e2, _ := a.alloc(100)
	if e2.Off != e1.Off || e2.Gen == e1.Gen {
		t.Fatalf("realloc: %+v after %+v; want the same slot, a new generation", e2, e1)
	}
	if got := a.generation(e1); got == e1.Gen {
		t.Fatalf("generation after reuse equals the freed extent's %d", got)
	}
	if got := a.generation(Extent{Off: -1}); got != 0 {
		t.Fatalf("generation outside the arena = %d", got)
	}
	a.free(e2)
}

// TestGPUAllocBadFree checks that freeing what is not a live extent panics.
func TestGPUAllocBadFree(t *testing.T) {
	tests := []struct {
		name string
		ext  func(live, freed Extent) Extent
	}{
		{"double free", func(_, freed Extent) Extent { return freed }},
		{"stale generation", func(live, _ Extent) Extent { live.Gen++; return live }},
		{"zero generation", func(live, _ Extent) Extent { live.Gen = 0; return live }},
		{"wrong cap", func(live, _ Extent) Extent { live.Cap *= 2; return live }},
		{"inside a slot", func(live, _ Extent) Extent { live.Off += 512; return live }},
		{"free slab", func(live, _ Extent) Extent { live.Off = 3 * gpuMiB; return live }},
		{"outside the arena", func(live, _ Extent) Extent { live.Off = 4 * gpuMiB; return live }},
		{"negative offset", func(live, _ Extent) Extent { live.Off = -4096; return live }},
		{"never handed out", func(live, _ Extent) Extent { live.Off += 10 * live.Cap; return live }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestGPUAlloc(t, gpuMiB, 4)
			freed, _ := a.alloc(4096)
			live, _ := a.alloc(4096)
			a.free(freed)
			bad := tt.ext(live, freed)
			panics.Expect(t, fmt.Sprintf("free(%+v)", bad), func() { a.free(bad) })
			a.free(live)
		})
	}
}

// TestGPUAllocRandom runs random allocs and frees over a small arena whose
// size mix shifts every few hundred steps, checking the invariants, that no
// two live extents overlap, that stats match the model and that generations
// match every live extent and no freed one. Reproduce with -gpu.seed.
func TestGPUAllocRandom(t *testing.T) {
	rng := testseed.Rand(t, *gpuSeed, "gpu.seed")

	a := newTestGPUAlloc(t, 256*gpuKiB, 24)
	mixes := [][]int64{
		{1, 4096, 4097, 12_345},
		{64 * gpuKiB, 70_000, 100_000}, // spans of several slabs
		{300_000, 5000},                // larger than a slab, and small
		{1 * gpuMiB, 1},                // a 4-slab span
	}
	var live, stale []Extent
	var allocs, fulls int
	mix := mixes[0]
	for step := range *gpuSteps {
		if step%300 == 0 {
			mix = mixes[rng.IntN(len(mixes))]
		}
		if len(live) > 0 && rng.IntN(100) < 45 {
			i := rng.IntN(len(live))
			a.free(live[i])
			stale = append(stale, live[i])
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		} else {
			size := mix[rng.IntN(len(mix))]
			ext, err := a.alloc(size)
			switch {
			case errors.Is(err, ErrFull):
				fulls++
			case err != nil:
				t.Fatalf("step %d: alloc(%d): %v", step, size, err)
			default:
				allocs++
				live = append(live, ext)
			}
		}
		if step%97 == 0 || step == *gpuSteps-1 {
			checkGPUAllocModel(t, a, live, stale)
		}
	}
	t.Logf("%d allocs, %d frees, %d refused with ErrFull", allocs, len(stale), fulls)
	for _, ext := range live {
		a.free(ext)
	}
	if st := a.stats(); st.Used != 0 || st.Extents != 0 || st.Requested != 0 || a.freeSlabs != a.nslabs {
		t.Fatalf("after freeing everything: %+v, %d of %d slabs free", st, a.freeSlabs, a.nslabs)
	}
}

// checkGPUAllocModel checks the allocator against the model's live and
// freed extents.
func checkGPUAllocModel(t *testing.T, a *gpuAlloc, live, stale []Extent) {
	t.Helper()
	checkGPUAlloc(t, a)
	sorted := slices.Clone(live)
	slices.SortFunc(sorted, func(x, y Extent) int { return int(x.Off - y.Off) })
	var used, requested int64
	for i, ext := range sorted {
		if i > 0 && sorted[i-1].Off+sorted[i-1].Cap > ext.Off {
			t.Fatalf("live extents overlap: %+v and %+v", sorted[i-1], ext)
		}
		if ext.Off+ext.Cap > a.size {
			t.Fatalf("extent %+v leaves the %d-byte arena", ext, a.size)
		}
		if g := a.generation(ext); g != ext.Gen {
			t.Fatalf("generation of live %+v = %d", ext, g)
		}
		used += ext.Cap
		requested += ext.Len
	}
	want := Stats{Kind: KindGPU, Capacity: a.size, Used: used, Extents: int64(len(live)), Requested: requested}
	if st := a.stats(); st != want {
		t.Fatalf("stats %+v, model %+v", st, want)
	}
	for _, ext := range stale[max(0, len(stale)-200):] {
		if g := a.generation(ext); g == ext.Gen {
			t.Fatalf("freed %+v still has its generation", ext)
		}
	}
}

// TestGPUAllocConcurrent allocs and frees from several goroutines (run it
// with -race) and checks the allocator is consistent and empty afterwards.
func TestGPUAllocConcurrent(t *testing.T) {
	a := newTestGPUAlloc(t, 256*gpuKiB, 64)
	sizes := []int64{4096, 64 * gpuKiB, 300_000}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			var mine []Extent
			for i := range 2000 {
				if len(mine) > 0 && (i+w)%3 == 0 {
					a.free(mine[len(mine)-1])
					mine = mine[:len(mine)-1]
					continue
				}
				ext, err := a.alloc(sizes[(i+w)%len(sizes)])
				if err == nil {
					mine = append(mine, ext)
				} else if !errors.Is(err, ErrFull) {
					t.Errorf("alloc: %v", err)
					return
				}
			}
			for _, ext := range mine {
				a.free(ext)
			}
		})
	}
	wg.Wait()
	if st := a.stats(); st.Extents != 0 || a.freeSlabs != a.nslabs {
		t.Fatalf("after every goroutine freed its extents: %+v, %d of %d slabs free", st, a.freeSlabs, a.nslabs)
	}
}
