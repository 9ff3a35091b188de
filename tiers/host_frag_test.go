//go:build linux

package tiers

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// realisticMix is the page-size mix of a node carrying a handful of
// namespaces (page = 2 x layers x KV heads x head dim x dtype bytes x tokens).
var realisticMix = []struct {
	name string
	size int64
}{
	{"64 KiB: one layer of a 16-token block, 8 KV heads, bf16", 2 * 8 * 128 * 2 * 16},
	{"256 KiB: the same, 64 tokens", 2 * 8 * 128 * 2 * 64},
	{"1,179,648: Qwen3-8B, 8 tokens, bf16", 2 * 36 * 8 * 128 * 2 * 8},
	{"2 MiB: Llama-3-8B, 16 tokens, bf16", 2 * 32 * 8 * 128 * 2 * 16},
	{"2 MiB: a second namespace of that size (a TP fork)", 2 << 20},
	{"4,497,408: DeepSeek-V3 MLA latent, 61 layers x 576 x bf16 x 64 tokens", 61 * 576 * 2 * 64},
}

// fragFigures are the fragmentation measures of a host at one moment.
type fragFigures struct {
	extents  int64
	internal float64 // (Used - Requested) / Used: rounding to classes
	external float64 // (Capacity - Used) / Capacity: free bytes, when no class of the mix can allocate
	overhead float64 // (Capacity - Requested) / Capacity: both together
	free     int64
}

func measureFrag(h *Host) fragFigures {
	st := h.Stats()
	f := fragFigures{extents: st.Extents, free: st.Capacity - st.Used}
	if st.Used > 0 {
		f.internal = float64(st.Used-st.Requested) / float64(st.Used)
	}
	f.external = float64(st.Capacity-st.Used) / float64(st.Capacity)
	f.overhead = float64(st.Capacity-st.Requested) / float64(st.Capacity)
	return f
}

// fillMix allocates pages of sizes picked uniformly from sizes until every
// size gets ErrFull, and returns live with the new extents appended.
func fillMix(t *testing.T, h *Host, rng *rand.Rand, sizes []int64, live []Extent) []Extent {
	t.Helper()
	open := append([]int64(nil), sizes...)
	for len(open) > 0 {
		i := rng.IntN(len(open))
		ext, err := h.Alloc(open[i])
		switch {
		case errors.Is(err, ErrFull):
			open = append(open[:i], open[i+1:]...)
		case err != nil:
			t.Fatal(err)
		default:
			live = append(live, ext)
		}
	}
	return live
}

// freeFraction frees each extent of live with probability p and returns the
// rest.
func freeFraction(h *Host, rng *rand.Rand, live []Extent, p float64) []Extent {
	kept := live[:0]
	for _, e := range live {
		if rng.Float64() < p {
			h.Free(e)
		} else {
			kept = append(kept, e)
		}
	}
	return kept
}

// TestHostFragmentation measures internal and external fragmentation of a
// 64 GiB host (default 64 MiB slabs) under the realistic mix. External
// fragmentation is measured when every class of the current mix gets
// ErrFull, so every free byte is unusable for that mix.
func TestHostFragmentation(t *testing.T) {
	const capacity = 64 << 30
	var sizes []int64
	for _, p := range realisticMix {
		sizes = append(sizes, p.size)
	}
	oldMix, newMix := sizes[:3], sizes[3:]
	for _, sc := range []struct {
		name string
		run  func(*Host, *rand.Rand) []Extent
		// bounds checked; 0 means only logged
		maxInternal, maxExternal float64
	}{
		{"fill: the mix until every class is full", func(h *Host, rng *rand.Rand) []Extent {
			return fillMix(t, h, rng, sizes, nil)
		}, 0.005, 0.01},
		{"churn: 20 x (free a random 20%, refill)", func(h *Host, rng *rand.Rand) []Extent {
			live := fillMix(t, h, rng, sizes, nil)
			for range 20 {
				live = fillMix(t, h, rng, sizes, freeFraction(h, rng, live, 0.2))
			}
			return live
		}, 0.005, 0.01},
		{"shift after drain: fill the 3 small sizes, free all, fill the 3 large", func(h *Host, rng *rand.Rand) []Extent {
			freeAll(h, fillMix(t, h, rng, oldMix, nil))
			return fillMix(t, h, rng, newMix, nil)
		}, 0.005, 0.01},
		{"shift with half live: fill the 3 small sizes, free a random half, fill the 3 large", func(h *Host, rng *rand.Rand) []Extent {
			live := freeFraction(h, rng, fillMix(t, h, rng, oldMix, nil), 0.5)
			return fillMix(t, h, rng, newMix, live)
		}, 0, 0},
	} {
		t.Run(sc.name, func(t *testing.T) {
			h := newTestHost(t, HostConfig{Capacity: capacity})
			rng := rand.New(rand.NewPCG(1, 2))
			live := sc.run(h, rng)
			mustCheck(t, h)
			f := measureFrag(h)
			t.Logf("%s: %d extents; internal %.3f%%, external %.3f%% (%d MiB free of %d GiB), total overhead %.3f%%",
				sc.name, f.extents, 100*f.internal, 100*f.external, f.free>>20, capacity>>30, 100*f.overhead)
			for _, cs := range h.ClassStats() {
				t.Logf("  class %9d: %4d slabs in %d-slab spans of %4d slots, %6d extents, %6d free slots, internal %.3f%%",
					cs.Size, cs.Slabs, cs.SpanSlabs, cs.SpanSlots, cs.Extents, cs.FreeSlots,
					100*float64(cs.Extents*cs.Size-cs.Requested)/float64(max(1, cs.Extents*cs.Size)))
			}
			if sc.maxInternal > 0 && (f.internal > sc.maxInternal || f.external > sc.maxExternal) {
				t.Errorf("internal %.4f, external %.4f; want at most %.4f, %.4f",
					f.internal, f.external, sc.maxInternal, sc.maxExternal)
			}
			freeAll(h, live)
		})
	}
}
