package tiers

import (
	"math/bits"
	"sync"
)

// Size classes of the host arena. A request is rounded up to the smallest
// class holding it:
//
//   - up to 1 MiB, classes step by one 4 KiB granule (4 KiB, 8 KiB, ...,
//     1 MiB): 256 classes;
//   - above 1 MiB, each power of two is cut into 256 equal steps
//     ((1 MiB, 2 MiB] steps by 4 KiB, (2 MiB, 4 MiB] by 8 KiB, (4 MiB, 8 MiB]
//     by 16 KiB, ...).
//
// Internal waste is therefore below 4 KiB / size under 1 MiB (at most 6.25%
// from 64 KiB up) and below 1/256 (0.39%) above. Every class is a multiple
// of 4 KiB, so every extent starts and ends on a page boundary (what O_DIRECT
// demotion to SSD, cudaHostRegister and ibv_reg_mr want). KV page sizes are
// products of small powers of two and a layer or head count, so most land on
// a class exactly: 64 KiB, 1,179,648 (1.125 MiB) and 2 MiB all do; a 61-layer
// MLA page of 4,497,408 bytes wastes 0.18%.
const (
	granuleShift = 12 // log2 of the granule
	granule      = int64(1) << granuleShift
	stepShift    = 8 // log2 of the classes per power of two
	steps        = 1 << stepShift
	linearShift  = granuleShift + stepShift // log2 of the end of the linear range (1 MiB)
	linearLimit  = int64(1) << linearShift
)

// Span geometry: a class is carved in spans of whole slabs. A span holds
// floor(span/class) slots; the rest (the tail) is lost while the span is
// carved. Small classes use one slab; larger ones take the fewest slabs whose
// tail is at most 1/maxTailFraction of the span, trying up to maxExtraSlabs
// more than the minimum (and no more than an eighth of the arena), and
// otherwise the least wasteful count in that range.
const (
	maxTailFraction = 64
	maxExtraSlabs   = 15
)

// classIndex returns the index of the smallest class holding size bytes.
// size must be positive.
func classIndex(size int64) int {
	if size <= linearLimit {
		return int((size+granule-1)>>granuleShift) - 1
	}
	e := bits.Len64(uint64(size-1)) - 1 // 2^e < size <= 2^(e+1)
	sh := uint(e - stepShift)
	m := (size - int64(1)<<e + int64(1)<<sh - 1) >> sh // 1..steps
	return steps + (e-linearShift)*steps + int(m) - 1
}

// classSize returns the slot size of class idx.
func classSize(idx int) int64 {
	if idx < steps {
		return int64(idx+1) << granuleShift
	}
	j := idx - steps
	e := linearShift + j/steps
	m := int64(j%steps + 1)
	return int64(1)<<e + m<<uint(e-stepShift)
}

// classCount returns how many classes an arena of size bytes has: every
// class no larger than the arena.
func classCount(size int64) int {
	n := classIndex(size)
	if classSize(n) <= size {
		n++
	}
	return n
}

// classGeometry returns the slot size of class idx and, for an arena of
// nslabs slabs of slabSize, the slabs a span of it takes and the slots a
// span holds (spanGeometry).
func classGeometry(idx int, slabSize int64, nslabs int) (size int64, spanSlabs, slots int32) {
	size = classSize(idx)
	k, n := spanGeometry(size, slabSize, nslabs)
	return size, int32(k), int32(n)
}

// spanGeometry returns how many slabs of slabSize a span of class size c
// takes in an arena of nslabs slabs, and how many slots it holds. c must not
// exceed nslabs*slabSize.
func spanGeometry(c, slabSize int64, nslabs int) (spanSlabs, slots int) {
	kmin := int((c + slabSize - 1) / slabSize)
	kmax := max(kmin, min(kmin+maxExtraSlabs, nslabs/8))
	best, bestWaste := kmin, 2.0
	for k := kmin; k <= kmax; k++ {
		span := int64(k) * slabSize
		tail := span % c
		if tail*maxTailFraction <= span {
			best = k
			break
		}
		if w := float64(tail) / float64(span); w < bestWaste {
			best, bestWaste = k, w
		}
	}
	return best, int(int64(best) * slabSize / c)
}

// class is one size class: its geometry and the spans carved for it.
type class struct {
	size      int64 // slot size in bytes; fixed at NewHost
	spanSlabs int32 // slabs per span; fixed at NewHost
	slots     int32 // slots per span; fixed at NewHost

	// mu guards the fields below and every span the class holds (its free
	// list, bump, live count and partial-list links).
	mu sync.Mutex
	// partial is the first of the class's spans with a free slot, -1 if
	// none; the list is linked through span.prev and span.next.
	partial int32
	// spans counts the spans the class holds, full or partial (its spare
	// is the pool's).
	spans int32
	// extents counts live extents; requested sums their Len.
	extents   int64
	requested int64

	// spare is the class's one empty span kept carved so that a class
	// oscillating around a span boundary does not re-carve on every call,
	// -1 if none. Guarded by Host.poolMu, not mu.
	spare int32
	// active says the class is listed in Host.active. Guarded by
	// Host.poolMu.
	active bool
}
