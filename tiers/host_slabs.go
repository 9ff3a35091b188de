package tiers

import (
	"math/bits"
	"sync/atomic"
)

// span is the record of a run of slabs carved into the slots of one class.
// The record lives at the index of the run's first slab in Host.spans; the
// records of the other slabs of the run are unused.
//
// While a class holds the span its mutex guards the plain fields; while the
// span is a spare or free, Host.poolMu does. The hand-over between the two
// always goes through poolMu, which orders the writes.
type span struct {
	// bump counts the slots handed out at least once since the span was
	// carved: the free list holds slots below it, and slots at or above it
	// have stale generation entries. Written under the class mutex, read
	// by Generation without it.
	bump  atomic.Int32
	class int32 // index of the class the span is carved for
	free  int32 // first slot of the free list, -1 if empty
	live  int32 // live extents
	// prev and next link the class's partial list (under the class mutex)
	// or the pool's spare list (under poolMu); -1 ends a list.
	prev, next int32
	inPartial  bool
	// floor is the generation every slot had when the span was carved; a
	// slot's first allocation gets floor+1.
	floor uint64
	// maxGen is the highest generation any slot of the span has reached.
	maxGen uint64
}

// owner words, one per slab, say which span covers it: 0 for a free slab,
// else (class+1)<<ownerShift | first slab of the span.
const ownerShift = 40

func ownerWord(cls int32, start int32) uint64 {
	return uint64(cls+1)<<ownerShift | uint64(start)
}

func decodeOwner(w uint64) (cls int32, start int32) {
	return int32(w>>ownerShift) - 1, int32(w & (1<<ownerShift - 1))
}

// pushPartialLocked puts span start at the head of cl's partial list.
// cl.mu must be held.
func (h *Host) pushPartialLocked(cl *class, start int32) {
	sp := &h.spans[start]
	sp.prev, sp.next, sp.inPartial = -1, cl.partial, true
	if cl.partial >= 0 {
		h.spans[cl.partial].prev = start
	}
	cl.partial = start
}

// removePartialLocked unlinks span start from cl's partial list.
// cl.mu must be held.
func (h *Host) removePartialLocked(cl *class, start int32) {
	h.unlinkSpan(start, &cl.partial, nil)
	h.spans[start].inPartial = false
}

// unlinkSpan takes span start out of the doubly linked list whose first
// span is *head and, when tail is not nil, whose last is *tail. The list's
// lock must be held.
func (h *Host) unlinkSpan(start int32, head, tail *int32) {
	sp := &h.spans[start]
	if sp.prev >= 0 {
		h.spans[sp.prev].next = sp.next
	} else {
		*head = sp.next
	}
	if sp.next >= 0 {
		h.spans[sp.next].prev = sp.prev
	} else if tail != nil {
		*tail = sp.prev
	}
	sp.prev, sp.next = -1, -1
}

// growLocked gives cl a span with free slots, at the head of its partial
// list: its spare if it has one, else a newly carved run of free slabs,
// reclaiming other classes' spares when the pool has no run free. It reports
// false when no memory is left for the class. cl.mu must be held.
func (h *Host) growLocked(cl *class, cls int32) bool {
	k := int(cl.spanSlabs)
	h.poolMu.Lock()
	if !cl.active {
		cl.active = true
		h.active = append(h.active, cls) // once per class for the arena's life
	}
	if sp := cl.spare; sp >= 0 {
		cl.spare = -1
		h.unlinkSparePoolLocked(sp)
		h.poolMu.Unlock()
		cl.spans++
		h.pushPartialLocked(cl, sp)
		return true
	}
	start := h.takeSlabsPoolLocked(k)
	for start < 0 && h.spareHead >= 0 {
		h.reclaimSparePoolLocked(h.spareHead)
		start = h.takeSlabsPoolLocked(k)
	}
	h.poolMu.Unlock()
	if start < 0 {
		return false
	}
	h.carveLocked(cl, cls, int32(start))
	return true
}

// carveLocked formats the claimed run of slabs at start as an empty span of
// cl. Slot generations are not touched: a slot's entry is written on its first
// allocation (at bump), and Generation answers from the slab floor above bump.
// cl.mu must be held and the run claimed from the pool.
func (h *Host) carveLocked(cl *class, cls int32, start int32) {
	var floor uint64
	for s := start; s < start+cl.spanSlabs; s++ {
		floor = max(floor, h.floor[s].Load())
	}
	sp := &h.spans[start]
	sp.class, sp.free, sp.live = cls, -1, 0
	sp.floor, sp.maxGen = floor, floor
	sp.bump.Store(0) // before the owner words publish the span
	w := ownerWord(cls, start)
	for s := start; s < start+cl.spanSlabs; s++ {
		h.owner[s].Store(w)
	}
	cl.spans++
	h.pushPartialLocked(cl, start)
}

// releaseLocked hands span start, now empty and off the partial list, back:
// it becomes cl's spare if cl has none, else its slabs go back to the pool.
// cl.mu must be held.
func (h *Host) releaseLocked(cl *class, start int32) {
	cl.spans--
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	if cl.spare < 0 {
		cl.spare = start
		h.linkSparePoolLocked(start)
		return
	}
	h.uncarvePoolLocked(start)
}

// reclaimSparePoolLocked uncarves the spare span start for use by any class.
// poolMu must be held.
func (h *Host) reclaimSparePoolLocked(start int32) {
	h.unlinkSparePoolLocked(start)
	h.classes[h.spans[start].class].spare = -1
	h.uncarvePoolLocked(start)
}

// uncarvePoolLocked returns the slabs of the empty span start to the pool.
// Each slab's floor rises to the span's highest generation before its owner
// word clears, so a slot carved there later starts above every generation
// handed out here. poolMu must be held.
func (h *Host) uncarvePoolLocked(start int32) {
	sp := &h.spans[start]
	end := start + h.classes[sp.class].spanSlabs
	for s := start; s < end; s++ {
		if h.floor[s].Load() < sp.maxGen {
			h.floor[s].Store(sp.maxGen)
		}
	}
	for s := start; s < end; s++ {
		h.owner[s].Store(0)
	}
	h.putSlabsPoolLocked(int(start), int(end-start))
}

// linkSparePoolLocked appends span start to the spare list (oldest first).
// poolMu must be held.
func (h *Host) linkSparePoolLocked(start int32) {
	sp := &h.spans[start]
	sp.prev, sp.next = h.spareTail, -1
	if h.spareTail >= 0 {
		h.spans[h.spareTail].next = start
	} else {
		h.spareHead = start
	}
	h.spareTail = start
}

// unlinkSparePoolLocked removes span start from the spare list.
// poolMu must be held.
func (h *Host) unlinkSparePoolLocked(start int32) {
	h.unlinkSpan(start, &h.spareHead, &h.spareTail)
}

// takeSlabsPoolLocked claims k contiguous free slabs and returns the first,
// or -1. One slab comes from the lowest free slab and runs from the highest
// free run, so single-slab spans and multi-slab runs grow from opposite ends
// and fragment each other less. poolMu must be held.
func (h *Host) takeSlabsPoolLocked(k int) int {
	if k > h.freeSlabs {
		return -1
	}
	start := -1
	if k == 1 {
		for i, w := range h.freeBits {
			if w != 0 {
				start = i*64 + bits.TrailingZeros64(w)
				break
			}
		}
	} else {
		start = h.highestRunPoolLocked(k)
	}
	if start < 0 {
		return -1
	}
	for s := start; s < start+k; s++ {
		h.freeBits[s/64] &^= 1 << (s % 64)
	}
	h.freeSlabs -= k
	return start
}

// highestRunPoolLocked returns the first slab of the highest run of k free
// slabs, or -1. poolMu must be held.
func (h *Host) highestRunPoolLocked(k int) int {
	run := 0
	for s := h.nslabs - 1; s >= 0; s-- {
		w := h.freeBits[s/64]
		if w == 0 && s%64 == 63 {
			run = 0
			s -= 63 // skip a word with no free slab
			continue
		}
		if w&(1<<(s%64)) == 0 {
			run = 0
			continue
		}
		if run++; run == k {
			return s
		}
	}
	return -1
}

// putSlabsPoolLocked returns k slabs from start to the pool.
// poolMu must be held.
func (h *Host) putSlabsPoolLocked(start, k int) {
	for s := start; s < start+k; s++ {
		h.freeBits[s/64] |= 1 << (s % 64)
	}
	h.freeSlabs += k
}
