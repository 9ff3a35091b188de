//go:build linux

package tiers

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHostSharedGenerations maps GenFD read-only, as a client process does,
// and checks over random Allocs and Frees whose size mix shifts (so slabs
// move between classes) that the word at GenIndex(ext) equals ext.Gen while
// ext is live and never again once it is freed.
func TestHostSharedGenerations(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: 64 * kib})
	gens, err := unix.Mmap(h.GenFD(), 0, int(h.GenWords()*8), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(gens)
	word := func(idx int64) uint64 { return binary.LittleEndian.Uint64(gens[idx*8:]) }
	type rec struct {
		ext Extent
		idx int64
	}
	var live, stale []rec
	mixes := [][]int64{{4096, 12_345}, {64 * kib, 100_000}, {200_000, 5000}, {1 * mib}}
	mix := mixes[0]
	for step := range 4000 {
		if step%400 == 0 {
			mix = mixes[rng.IntN(len(mixes))]
		}
		if len(live) > 0 && (rng.IntN(2) == 0 || step%400 > 350) {
			i := rng.IntN(len(live))
			r := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			h.Free(r.ext)
			if h.GenIndex(r.ext) != -1 {
				t.Fatalf("step %d: GenIndex of freed %+v is not -1", step, r.ext)
			}
			stale = append(stale, r)
		} else if ext, err := h.Alloc(mix[rng.IntN(len(mix))]); err == nil {
			idx := h.GenIndex(ext)
			if idx < 0 || idx >= h.GenWords() {
				t.Fatalf("step %d: GenIndex(%+v) = %d of %d", step, ext, idx, h.GenWords())
			}
			live = append(live, rec{ext, idx})
		}
		for _, r := range live {
			if w := word(r.idx); w != r.ext.Gen {
				t.Fatalf("step %d: live %+v: shared word %d", step, r.ext, w)
			}
		}
		for _, r := range stale {
			if w := word(r.idx); w == r.ext.Gen {
				t.Fatalf("step %d: freed %+v: shared word still %d", step, r.ext, w)
			}
		}
		if len(stale) > 2000 {
			stale = stale[len(stale)-1000:]
		}
	}
}
