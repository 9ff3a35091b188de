package tiers

import (
	"fmt"
	"sync"
)

// gpuAlloc carves extents out of the GPU arena. It is pure bookkeeping over
// offsets: it never touches device memory, so it is tested without a GPU.
//
// To do: share the host allocator instead. Only mem, fd, the arena mapping,
// window, Bytes, FD and Size in host.go touch the memfd; the rest works on
// offsets and can move into a slabAlloc type (with host_slabs.go) that Host
// and GPU both wrap, after which this file and its tests go.
//
// It is a deliberately small slab allocator, a simpler cousin of the host
// tier's (host.go, "Allocator"), sharing its size classes and span geometry
// (host_classes.go: classIndex, classSize, spanGeometry) but not its
// lock-free generation reads, spares or slot metadata outside the heap:
//
//   - The arena is cut into slabs of slabSize bytes. A class carves a span of
//     spanGeometry's slabs (one for small classes, more for pages larger
//     than a slab or to keep the tail under 1/64) into equal slots.
//   - A class keeps the spans with a free slot in partial (a stack; each span
//     knows its index there, so removal is O(1)). Alloc takes the last
//     partial span and pops its free list, else its bump index (slots never
//     handed out since carving): O(1). Free pushes the slot back: O(1).
//   - A span whose last extent is freed returns its slabs to the pool at
//     once, so a shift in the page-size mix strands no memory once the old
//     pages are gone. Single-slab spans take the lowest free slab, multi-slab
//     spans the highest free run, so the two grow from opposite ends. Both
//     scan the slab table, which is short (a 141 GB device has 2,100 slabs
//     of 64 MiB) and happens once per span.
//   - Generations come from one counter per allocator, so an allocation's
//     generation is unique over the arena's life: once an extent is freed no
//     extent, on any slot, ever carries its generation again. A slot holds
//     its extent's generation while live and 0 while free.
//
// One mutex guards everything. The GPU tier's Alloc and Free are rare next to
// its copies, each of which costs a driver call and a DMA, so the simple lock
// is not where time goes; the host tier's per-class locks earn their keep
// because its copies are memcpys.
type gpuAlloc struct {
	size     int64 // arena bytes: whole slabs
	slabSize int64
	nslabs   int
	classes  []gpuClass // by class index: every class no larger than size

	// mu guards every field below and the classes' partial lists.
	mu sync.Mutex
	// owner holds, per slab, the first slab of the span covering it, or -1
	// when the slab is free.
	owner []int32
	// spans holds a span record at the index of each span's first slab.
	spans     []gpuSpan
	freeSlabs int
	lastGen   uint64 // the last generation handed out
	extents   int64  // live extents
	used      int64  // sum of Cap over live extents
	requested int64  // sum of Len over live extents
}

// gpuClass is one size class: its geometry and its spans with a free slot.
type gpuClass struct {
	size      int64 // slot size in bytes
	spanSlabs int32
	slots     int32   // slots per span
	partial   []int32 // first slabs of the class's spans with a free slot
}

// gpuSpan is the record of a run of slabs carved into one class's slots.
type gpuSpan struct {
	class int32 // class index
	bump  int32 // slots handed out at least once since carving
	live  int32 // live extents
	pidx  int32 // index in the class's partial list, -1 when not there
	free  []int32
	gens  []uint64 // per slot: the live extent's generation, 0 when free
}

// newGPUAlloc returns an allocator over nslabs slabs of slabSize bytes.
// slabSize must be a positive multiple of 4 KiB and nslabs positive.
func newGPUAlloc(slabSize int64, nslabs int) *gpuAlloc {
	a := &gpuAlloc{
		size:      slabSize * int64(nslabs),
		slabSize:  slabSize,
		nslabs:    nslabs,
		owner:     make([]int32, nslabs),
		spans:     make([]gpuSpan, nslabs),
		freeSlabs: nslabs,
	}
	for s := range a.owner {
		a.owner[s] = -1
	}
	a.classes = make([]gpuClass, classCount(a.size))
	for i := range a.classes {
		cl := &a.classes[i]
		cl.size, cl.spanSlabs, cl.slots = classGeometry(i, slabSize, nslabs)
	}
	return a
}

// alloc sets aside a slot of the smallest class holding size bytes. It fails
// with ErrTooLarge when size <= 0 or exceeds every class, and ErrFull when the
// class has no free slot and no run of free slabs is left for a span.
func (a *gpuAlloc) alloc(size int64) (Extent, error) {
	cls := -1
	if size > 0 && size <= a.size {
		cls = classIndex(size)
	}
	if cls < 0 || cls >= len(a.classes) {
		return Extent{}, fmt.Errorf("%d bytes in a %d-byte arena: %w", size, a.size, ErrTooLarge)
	}
	cl := &a.classes[cls]
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(cl.partial) == 0 && !a.carveLocked(cl, int32(cls)) {
		return Extent{}, fmt.Errorf("%d bytes (class %d): %w", size, cl.size, ErrFull)
	}
	start := cl.partial[len(cl.partial)-1]
	sp := &a.spans[start]
	var slot int32
	if n := len(sp.free); n > 0 {
		slot = sp.free[n-1]
		sp.free = sp.free[:n-1]
	} else {
		slot = sp.bump
		sp.bump++
	}
	if len(sp.free) == 0 && sp.bump == cl.slots {
		a.removePartialLocked(cl, start)
	}
	a.lastGen++
	sp.gens[slot] = a.lastGen
	sp.live++
	a.extents++
	a.used += cl.size
	a.requested += size
	return Extent{
		Off: int64(start)*a.slabSize + int64(slot)*cl.size,
		Len: size,
		Cap: cl.size,
		Gen: a.lastGen,
	}, nil
}

// free returns ext's slot. An extent that is not live (a double free, a stale
// generation, an extent of another tier) panics: a programmer error.
func (a *gpuAlloc) free(ext Extent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	start, slot, ok := a.slotLocked(ext)
	if !ok {
		panic(fmt.Sprintf("tiers: GPU.Free of %+v: not a slot of a live span", ext))
	}
	sp := &a.spans[start]
	if ext.Gen == 0 || sp.gens[slot] != ext.Gen {
		panic(fmt.Sprintf("tiers: GPU.Free of %+v: not live (double free or stale generation)", ext))
	}
	cl := &a.classes[sp.class]
	sp.gens[slot] = 0
	sp.free = append(sp.free, slot) // within the capacity set at carving
	sp.live--
	a.extents--
	a.used -= cl.size
	a.requested -= ext.Len
	switch {
	case sp.live == 0:
		if sp.pidx >= 0 {
			a.removePartialLocked(cl, start)
		}
		a.uncarveLocked(start)
	case sp.pidx < 0:
		sp.pidx = int32(len(cl.partial))
		cl.partial = append(cl.partial, start)
	}
}

// generation returns the generation of ext's slot: ext.Gen exactly while ext
// is live, and never ext.Gen again once it is freed.
func (a *gpuAlloc) generation(ext Extent) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	start, slot, ok := a.slotLocked(ext)
	if !ok {
		return 0
	}
	return a.spans[start].gens[slot]
}

// slotLocked finds the span and slot that ext names, reporting false when
// its offset is outside the arena, on a free slab, or not a slot boundary of
// the class there with ext.Cap as its size. a.mu must be held.
func (a *gpuAlloc) slotLocked(ext Extent) (start, slot int32, ok bool) {
	if ext.Off < 0 || ext.Off >= a.size {
		return 0, 0, false
	}
	start = a.owner[ext.Off/a.slabSize]
	if start < 0 {
		return 0, 0, false
	}
	sp := &a.spans[start]
	cl := &a.classes[sp.class]
	rel := ext.Off - int64(start)*a.slabSize
	if ext.Cap != cl.size || rel%cl.size != 0 || rel/cl.size >= int64(sp.bump) {
		return 0, 0, false
	}
	return start, int32(rel / cl.size), true
}

// stats reports capacity and usage.
func (a *gpuAlloc) stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Stats{
		Kind:      KindGPU,
		Capacity:  a.size,
		Used:      a.used,
		Extents:   a.extents,
		Requested: a.requested,
	}
}

// carveLocked claims slabs for a new span of cl and puts it on cl's partial
// list, reporting false when no run of free slabs is long enough. a.mu must
// be held.
func (a *gpuAlloc) carveLocked(cl *gpuClass, cls int32) bool {
	k := int(cl.spanSlabs)
	start := a.takeSlabsLocked(k)
	if start < 0 {
		return false
	}
	for s := start; s < start+k; s++ {
		a.owner[s] = int32(start)
	}
	a.spans[start] = gpuSpan{
		class: cls,
		pidx:  int32(len(cl.partial)),
		free:  make([]int32, 0, cl.slots),
		gens:  make([]uint64, cl.slots),
	}
	cl.partial = append(cl.partial, int32(start))
	a.freeSlabs -= k
	return true
}

// uncarveLocked returns the slabs of the empty span start, already off its
// class's partial list, to the pool. a.mu must be held.
func (a *gpuAlloc) uncarveLocked(start int32) {
	k := a.classes[a.spans[start].class].spanSlabs
	for s := start; s < start+k; s++ {
		a.owner[s] = -1
	}
	a.spans[start] = gpuSpan{}
	a.freeSlabs += int(k)
}

// removePartialLocked takes span start off cl's partial list by moving the
// list's last span into its place. a.mu must be held.
func (a *gpuAlloc) removePartialLocked(cl *gpuClass, start int32) {
	i := a.spans[start].pidx
	last := cl.partial[len(cl.partial)-1]
	cl.partial[i] = last
	a.spans[last].pidx = i
	cl.partial = cl.partial[:len(cl.partial)-1]
	a.spans[start].pidx = -1
}

// takeSlabsLocked finds k contiguous free slabs and returns the first, or -1:
// the lowest free slab when k is 1, else the highest free run. It does not
// mark them taken. a.mu must be held.
func (a *gpuAlloc) takeSlabsLocked(k int) int {
	if k > a.freeSlabs {
		return -1
	}
	if k == 1 {
		for s, o := range a.owner {
			if o < 0 {
				return s
			}
		}
		return -1
	}
	run := 0
	for s := a.nslabs - 1; s >= 0; s-- {
		if a.owner[s] >= 0 {
			run = 0
			continue
		}
		if run++; run == k {
			return s
		}
	}
	return -1
}
