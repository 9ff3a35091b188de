//go:build linux

package tiers

import (
	"fmt"
	"math/bits"
)

// checkHost verifies the allocator's internal invariants. The host must be
// quiescent (no concurrent calls); it takes no locks.
func checkHost(h *Host) error {
	if err := checkPool(h); err != nil {
		return err
	}
	spares := map[int32]bool{}
	for s := h.spareHead; s >= 0; s = h.spans[s].next {
		if spares[s] {
			return fmt.Errorf("spare list loops at slab %d", s)
		}
		spares[s] = true
		if h.classes[h.spans[s].class].spare != s {
			return fmt.Errorf("spare span %d is not its class's spare", s)
		}
	}
	per := map[int32]*spanTally{}
	for s := 0; s < h.nslabs; {
		w := h.owner[s].Load()
		if w == 0 {
			s++
			continue
		}
		cls, start := decodeOwner(w)
		if int(start) != s {
			return fmt.Errorf("slab %d: first owned slab of a span names start %d", s, start)
		}
		cl := &h.classes[cls]
		for t := s; t < s+int(cl.spanSlabs); t++ {
			if t >= h.nslabs || h.owner[t].Load() != w {
				return fmt.Errorf("span at %d (class %d, %d slabs): slab %d has another owner", s, cl.size, cl.spanSlabs, t)
			}
		}
		live, err := checkSpan(h, start)
		if err != nil {
			return err
		}
		if spares[start] != (live == 0) {
			return fmt.Errorf("span at %d: %d live but spare=%v", s, live, spares[start])
		}
		if spares[start] {
			delete(spares, start)
		} else {
			if per[cls] == nil {
				per[cls] = &spanTally{}
			}
			per[cls].spans++
			per[cls].live += live
		}
		s += int(cl.spanSlabs)
	}
	if len(spares) != 0 {
		return fmt.Errorf("spare spans %v are not carved", spares)
	}
	for i := range h.classes {
		if err := checkClass(h, int32(i), per[int32(i)]); err != nil {
			return err
		}
	}
	return nil
}

// spanTally counts the spans a class holds and their live extents.
type spanTally struct{ spans, live int32 }

// checkPool verifies the free-slab bitmap against the owner words.
func checkPool(h *Host) error {
	n := 0
	for i, w := range h.freeBits {
		n += bits.OnesCount64(w)
		for b := range 64 {
			s := i*64 + b
			free := w&(1<<b) != 0
			if s >= h.nslabs {
				if free {
					return fmt.Errorf("free bit %d beyond %d slabs", s, h.nslabs)
				}
				continue
			}
			if free != (h.owner[s].Load() == 0) {
				return fmt.Errorf("slab %d: free bit %v but owner %#x", s, free, h.owner[s].Load())
			}
		}
	}
	if n != h.freeSlabs {
		return fmt.Errorf("freeSlabs %d, bitmap has %d", h.freeSlabs, n)
	}
	return nil
}

// checkSpan verifies one carved span's free list and generations and
// returns its live count.
func checkSpan(h *Host, start int32) (int32, error) {
	sp := &h.spans[start]
	cl := &h.classes[sp.class]
	bump := sp.bump.Load()
	if bump < 0 || bump > cl.slots {
		return 0, fmt.Errorf("span %d: bump %d of %d slots", start, bump, cl.slots)
	}
	base := int64(start) * h.slotsPerSlab
	free := map[int32]bool{}
	for i := sp.free; i >= 0; i = h.next[base+int64(i)] {
		if i >= bump || free[i] {
			return 0, fmt.Errorf("span %d: free list holds %d (bump %d, seen %v)", start, i, bump, free[i])
		}
		free[i] = true
	}
	for i := range bump {
		g := h.gens[base+int64(i)].Load()
		if g <= sp.floor || g > sp.maxGen+1 {
			return 0, fmt.Errorf("span %d slot %d: generation %d outside (%d, %d]", start, i, g, sp.floor, sp.maxGen+1)
		}
		if free[i] != (g%2 == 0) {
			return 0, fmt.Errorf("span %d slot %d: free=%v with generation %d", start, i, free[i], g)
		}
	}
	for s := start; s < start+cl.spanSlabs; s++ {
		if f := h.floor[s].Load(); f > sp.floor {
			return 0, fmt.Errorf("span %d: slab %d floor %d above the span's %d", start, s, f, sp.floor)
		}
	}
	live := bump - int32(len(free))
	if live != sp.live {
		return 0, fmt.Errorf("span %d: live %d, slots say %d", start, sp.live, live)
	}
	hasFree := len(free) > 0 || bump < cl.slots
	if sp.inPartial != (hasFree && live > 0) {
		return 0, fmt.Errorf("span %d: inPartial=%v with %d live, free slots %v", start, sp.inPartial, live, hasFree)
	}
	return live, nil
}

// checkClass verifies a class's counters and partial list against the spans
// found by the slab walk.
func checkClass(h *Host, cls int32, t *spanTally) error {
	cl := &h.classes[cls]
	var spans, live int32
	if t != nil {
		spans, live = t.spans, t.live
	}
	if cl.spans != spans || cl.extents != int64(live) {
		return fmt.Errorf("class %d: %d spans, %d extents; walk found %d, %d", cl.size, cl.spans, cl.extents, spans, live)
	}
	prev := int32(-1)
	for s := cl.partial; s >= 0; s = h.spans[s].next {
		sp := &h.spans[s]
		w := h.owner[s].Load()
		if c, st := decodeOwner(w); w == 0 || c != cls || st != s || !sp.inPartial || sp.prev != prev {
			return fmt.Errorf("class %d: partial list entry %d is not a partial span of it", cl.size, s)
		}
		prev = s
	}
	if cl.extents == 0 && cl.requested != 0 {
		return fmt.Errorf("class %d: no extents but %d bytes requested", cl.size, cl.requested)
	}
	return nil
}
