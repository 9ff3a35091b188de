//go:build linux

package tiers

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stratakv/strata/internal/testing/testseed"
)

// liveExt is the model's record of a live extent: the extent and where in
// the pattern its bytes come from.
type liveExt struct {
	ext Extent
	pat int
}

// TestHostRandom runs random Allocs (with writes) and Frees over a small
// arena whose size mix shifts every few hundred steps, and after every step
// checks: the allocator's internal invariants, no two live extents overlap,
// Stats match the model, Generation matches every live extent and no freed
// one, and every live extent still holds the bytes written to it.
// Reproduce a failure with -host.seed.
func TestHostRandom(t *testing.T) {
	seed := testseed.Choose(t, *hostSeed, "host.seed")
	rng := testseed.New(seed)

	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: 64 * kib})
	mixes := [][]int64{
		{1, 4096, 4097, 12_345},
		{64 * kib, 70_000, 100_000},                 // multi-slab spans
		{200_000, 300_000, 5000},                    // large and small
		{64 * kib, 64*kib - 1, 1_179_648 / 8, 4096}, // near-identical classes
		{1 * mib, 1},                                // a 16-slab span
	}
	pattern := make([]byte, 2*mib)
	for i := range pattern {
		pattern[i] = byte(rng.Uint32())
	}
	var live []liveExt
	var stale []Extent // freed extents, most recent last
	mix := mixes[0]
	for step := range *hostSteps {
		if step%300 == 0 {
			mix = mixes[rng.IntN(len(mixes))]
		}
		var what string
		switch r := rng.IntN(100); {
		case r < 2: // free everything: lets classes shift
			what = fmt.Sprintf("free all %d", len(live))
			for _, l := range live {
				h.Free(l.ext)
				stale = append(stale, l.ext)
			}
			live = live[:0]
		case r < 45 && len(live) > 0:
			i := rng.IntN(len(live))
			what = fmt.Sprintf("free %+v", live[i].ext)
			h.Free(live[i].ext)
			stale = append(stale, live[i].ext)
			live = slices.Delete(live, i, i+1)
		default:
			size := mix[rng.IntN(len(mix))]
			what = fmt.Sprintf("alloc %d", size)
			ext, err := h.Alloc(size)
			if errors.Is(err, ErrFull) {
				break
			}
			if err != nil {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
			l := liveExt{ext: ext, pat: rng.IntN(len(pattern) - int(size) + 1)}
			if err := h.WriteAt(ext, pattern[l.pat:l.pat+int(size)], 0); err != nil {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
			live = append(live, l)
		}
		if len(stale) > 512 {
			stale = stale[len(stale)-512:]
		}
		if err := checkModel(h, live, stale, pattern); err != nil {
			t.Fatalf("seed %d step %d (%s): %v", seed, step, what, err)
		}
	}
}

// checkModel checks h against the model after a step.
func checkModel(h *Host, live []liveExt, stale []Extent, pattern []byte) error {
	if err := checkHost(h); err != nil {
		return err
	}
	want := Stats{Kind: KindHost, Capacity: h.Size(), Extents: int64(len(live))}
	exts := make([]Extent, len(live))
	for i, l := range live {
		exts[i] = l.ext
		want.Used += l.ext.Cap
		want.Requested += l.ext.Len
		if g := h.Generation(l.ext); g != l.ext.Gen {
			return fmt.Errorf("live %+v: Generation %d", l.ext, g)
		}
		if !bytes.Equal(h.Bytes(l.ext), pattern[l.pat:l.pat+int(l.ext.Len)]) {
			return fmt.Errorf("live %+v lost its bytes", l.ext)
		}
	}
	if st := h.Stats(); st != want {
		return fmt.Errorf("Stats = %+v, model says %+v", st, want)
	}
	for _, s := range stale {
		if g := h.Generation(s); g == s.Gen {
			return fmt.Errorf("freed %+v: Generation still %d", s, g)
		}
	}
	return noOverlap(h, exts)
}

// noOverlap checks that extents lie inside the arena on 4 KiB boundaries,
// hold their Len within their Cap, and do not overlap.
func noOverlap(h *Host, exts []Extent) error {
	sorted := slices.Clone(exts)
	slices.SortFunc(sorted, func(a, b Extent) int { return int(a.Off - b.Off) })
	end := int64(0)
	for _, e := range sorted {
		switch {
		case e.Off%granule != 0 || e.Cap%granule != 0 || e.Len > e.Cap || e.Len <= 0:
			return fmt.Errorf("extent %+v: misaligned or Len outside Cap", e)
		case e.Off < end:
			return fmt.Errorf("extent %+v overlaps the previous one, which ends at %d", e, end)
		}
		end = e.Off + e.Cap
	}
	if end > h.Size() {
		return fmt.Errorf("extent ends at %d, past the %d-byte arena", end, h.Size())
	}
	return nil
}
