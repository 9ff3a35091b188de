package tiers

// Host: the DRAM tier.
//
// # Arena
//
// One memfd (MFD_CLOEXEC, not sealed) of Capacity bytes, mapped MAP_SHARED
// read-write. The kernel commits physical pages on first touch, so a large
// Capacity costs address space until pages are written, and FD and Size let
// same-host clients receive the fd over a Unix socket and map the very same
// bytes. Touched pages stay committed after their extent is freed: a cache
// refills them.
//
// # Allocator
//
// The workload: every page of a namespace has one size (commonly 64 KiB to
// 4 MiB, but anything from 1 byte), and a node carries a handful of
// namespaces, so there are few distinct sizes, each allocated many times.
// That is a slab allocator's case.
//
//   - Size classes (host_classes.go): a request rounds up to a multiple of
//     4 KiB below 1 MiB and to one of 256 steps per power of two above, so
//     internal waste is under 1/256 above 1 MiB (under 6.25% from 64 KiB;
//     a 1-byte request takes 4 KiB), and the usual KV page sizes are
//     classes exactly. Exact-size classes would save the last 0.4% but
//     leave the class count unbounded; these are a fixed table computed
//     from Capacity, and every extent is 4 KiB-aligned.
//   - Slabs: the arena is cut into slabs of SlabSize bytes, the unit in
//     which memory moves between classes. A class carves spans of whole
//     slabs into equal slots: one slab for classes up to SlabSize/64, more
//     (contiguous) when that keeps the span's unusable tail under 1/64
//     (host_classes.go, spanGeometry), and always enough for one slot, so
//     pages larger than a slab work.
//   - A span carved for a class is on the class's partial list while it has a
//     free slot. Alloc takes the head span and pops its free list or, if the
//     list is empty, its bump index (the slots never used since carving):
//     O(1). Free pushes the slot on its span's free list: O(1).
//   - When a span empties it goes back: it stays carved as the class's spare
//     if the class has none (so a class hovering at a span boundary does not
//     re-carve on every call), else its slabs return to the free-slab pool.
//     A class that finds the pool without a run for it reclaims the oldest
//     spares of other classes. So a shift in the page-size mix strands no
//     memory once the old pages are freed (a half-freed span still stays
//     with its class: there is no relocation).
//   - Free slabs are a bitmap: single-slab spans take the lowest free slab,
//     multi-slab spans the highest free run, so the two kinds grow from
//     opposite ends. Carving happens once per span, not per Alloc.
//
// # Slot metadata and generations
//
// Metadata lives outside the data bytes and the Go heap, one entry per
// 4 KiB of arena (the most slots a slab can hold), committed as touched: a
// generation (uint64, in a second memfd that same-host clients map
// read-only, see host_shm.go) and a free-list link (int32, in an anonymous
// mapping) per slot, indexed by the span's first slab times slots-per-slab
// plus the slot. A slot's generation is odd while it holds a live extent and even
// while free: Alloc bumps it (Extent.Gen is the odd value) and Free bumps it
// again. Every slab has a floor, the highest generation any span covering it
// reached, raised before its slabs return to the pool; a new span starts all
// its slots at the highest floor of its slabs and writes a slot's entry only
// on the slot's first allocation (below bump). Generation answers from the
// slot's entry below bump and from the slab floor otherwise, all atomic
// loads. Invariant: for any extent ext that Alloc ever returned,
// Generation(ext) == ext.Gen exactly while ext is live; once it is freed,
// whatever reuses its bytes, no generation it can observe equals ext.Gen.
// A reader that copies an extent's bytes and then re-checks Generation
// (seqlock style) therefore discards a copy that raced a reclaim. The order
// matters: a slot's entry is written before bump passes it, bump is reset
// before a span's owner words are published, and floors are raised before
// owner words clear.
//
// # Locking
//
// One mutex per class (its spans, partial list and counters) and poolMu for
// the free-slab bitmap, the spare list and class.spare. Order: a class
// mutex, then poolMu; never two class mutexes. Owner words, floors, bump
// and generations are atomics, so Generation takes no lock. Alloc and Free
// allocate no heap memory (but for one append the first time a class
// carves a span).
//
// # Fragmentation
//
// Measured by TestHostFragmentation on a 64 GiB arena with 64 MiB slabs and
// a mix of 64 KiB, 256 KiB, 1,179,648, 2 MiB (twice: a bf16 page
// 2*32*8*128*2*16 is 2 MiB) and 4,497,408-byte pages, filled until every
// class is full:
//
//	go test ./tiers/ -run TestHostFragmentation -v
//
//	scenario                                    internal  external  (free)
//	fill: the mix until every class is full       0.080%    0.864%  566 MiB
//	churn: 20 x (free a random 20%, refill)       0.080%    0.864%  566 MiB
//	shift: fill 3 small sizes, free all,
//	       fill the 3 large                       0.094%    0.798%  522 MiB
//	shift: fill 3 small sizes, free a random
//	       half, fill the 3 large                 0.000%   50.634%  32 GiB
//
// Internal waste is the 4,497,408-byte page's 0.18% (every other size is a
// class). External waste when full is span tails: 1/64 in the 1,179,648
// class's slabs and 1.53% in the 4,505,600 class's 3-slab spans; no slab
// is left free. The last line is the limit of any allocator that
// does not move pages: freeing a random half of the old pages empties
// (almost) no span of 56 to 1,024 slots, so the new sizes find no slab. The
// old classes' free slots serve old pages again, and their slabs come back
// as the store evicts those spans' pages.

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DefaultSlabSize is HostConfig.SlabSize's default: 64 MiB holds 16 of the
// common largest pages (4 MiB) with no tail, keeps a class's one partially
// used span small next to a host tier of tens to hundreds of GiB, and keeps
// the slab bitmap and span records small (1 TiB is 16,384 slabs).
const DefaultSlabSize = 64 << 20

// maxHostCapacity bounds HostConfig.Capacity from above (exclusive): slot
// indexes within a span, at most Capacity/4 KiB, are int32.
const maxHostCapacity = 1 << 43

// HostConfig configures a Host. The zero value of each field but Capacity
// selects its default.
type HostConfig struct {
	// Capacity is the arena size in bytes, rounded down to whole slabs.
	// Required (no default); at least 4 KiB and less than 8 TiB.
	Capacity int64
	// SlabSize is the unit in which memory moves between size classes, in
	// bytes, a multiple of 4 KiB; each slab costs 64 bytes of Go heap.
	// Default Capacity/64 rounded down to a power of two, between 1 MiB and
	// DefaultSlabSize (64 MiB), and never more than Capacity.
	SlabSize int64
	// Name names the memfd, as seen in /proc/<pid>/fd and /proc/<pid>/maps;
	// the generations' memfd is Name+"-gens". Default "strata-host".
	Name string
	// Prefault commits the whole arena when the tier is made
	// (MADV_POPULATE_WRITE) instead of page by page as puts first touch
	// it. A fresh page's first touch is the kernel zeroing it, on a VM
	// also the hypervisor backing it: 0.69–0.84 s a GiB on the VM of
	// benchmarks/README.md, 170–205 µs per 256 KiB page, more than a put
	// of it costs, paid by the first puts through each part of the arena
	// (BenchmarkArenaTouch, two runs). With Prefault the tier's start pays
	// it once (0.61–0.70 s a GiB there), and a host without the memory
	// fails at start instead of later. Default off: the arena costs only
	// what it holds.
	Prefault bool
}

// withDefaults validates cfg and fills in defaults.
func (cfg HostConfig) withDefaults() (HostConfig, error) {
	if cfg.Capacity < granule || cfg.Capacity >= maxHostCapacity {
		return cfg, fmt.Errorf("host: capacity %d not in [%d, %d): %w",
			cfg.Capacity, granule, int64(maxHostCapacity), ErrInvalidConfig)
	}
	if cfg.SlabSize == 0 {
		// At least 64 slabs, so that a small tier can still hold several
		// page sizes at once; at most DefaultSlabSize; at least 1 MiB
		// unless the tier is smaller.
		slab := int64(1) << (bits.Len64(uint64(cfg.Capacity/64)) - 1) // power of two
		cfg.SlabSize = min(DefaultSlabSize, max(1<<20, slab), cfg.Capacity&^(granule-1))
	}
	if cfg.SlabSize <= 0 || cfg.SlabSize%granule != 0 {
		return cfg, fmt.Errorf("host: slab size %d is not a positive multiple of %d: %w",
			cfg.SlabSize, granule, ErrInvalidConfig)
	}
	if cfg.SlabSize > cfg.Capacity {
		return cfg, fmt.Errorf("host: capacity %d is less than one %d-byte slab: %w",
			cfg.Capacity, cfg.SlabSize, ErrInvalidConfig)
	}
	if cfg.Name == "" {
		cfg.Name = "strata-host"
	}
	if len(cfg.Name) > 244 || strings.IndexByte(cfg.Name, 0) >= 0 {
		return cfg, fmt.Errorf("host: memfd name %q: longer than 244 bytes or has a NUL: %w",
			cfg.Name, ErrInvalidConfig)
	}
	return cfg, nil
}

// Host is the host-DRAM tier: a memfd-backed arena with a size-class slab
// allocator. It implements Tier and Mapped and is safe for concurrent use,
// except that Close must not run concurrently with other methods.
type Host struct {
	mem          []byte // the arena, mapped MAP_SHARED
	fd           int    // the arena's memfd
	size         int64  // len(mem): whole slabs
	slabSize     int64
	nslabs       int
	slotsPerSlab int64 // metadata entries per slab: slabSize / 4 KiB
	closed       atomic.Bool

	classes []class // by class index; every class up to size

	// Per slab, atomic: which span covers it (see ownerWord) and its
	// generation floor (see the design comment).
	owner []atomic.Uint64
	floor []atomic.Uint64
	// spans holds a span record per slab, used at the first slab of each
	// span; see span for what guards it.
	spans []span
	// Per slot, in mappings outside the Go heap (gensMem, nextMem): the
	// generation (atomic) and the free-list link (guarded like the span).
	// gensMem maps the memfd genFD, shared with same-host clients.
	gensMem, nextMem []byte
	genFD            int
	gens             []atomic.Uint64
	next             []int32

	// poolMu guards the free-slab pool and spare spans below, and
	// class.spare and class.active.
	poolMu    sync.Mutex
	freeBits  []uint64 // bit s set: slab s is free
	freeSlabs int
	// spareHead and spareTail end the list of spare spans, oldest first,
	// linked through span.prev and span.next; -1 if empty.
	spareHead, spareTail int32
	// active lists the classes that ever carved a span, in that order; it
	// only grows, so a copy of the slice header stays valid.
	active []int32
}

var (
	_ Tier   = (*Host)(nil)
	_ Mapped = (*Host)(nil)
)

// NewHost maps a memfd arena of cfg.Capacity bytes (rounded down to whole
// slabs) and returns the tier over it.
func NewHost(cfg HostConfig) (*Host, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	nslabs := int(cfg.Capacity / cfg.SlabSize)
	h := &Host{
		size:         int64(nslabs) * cfg.SlabSize,
		slabSize:     cfg.SlabSize,
		nslabs:       nslabs,
		slotsPerSlab: cfg.SlabSize / granule,
		owner:        make([]atomic.Uint64, nslabs),
		floor:        make([]atomic.Uint64, nslabs),
		spans:        make([]span, nslabs),
		freeBits:     make([]uint64, (nslabs+63)/64),
		freeSlabs:    nslabs,
		spareHead:    -1,
		spareTail:    -1,
	}
	for s := range nslabs {
		h.freeBits[s/64] |= 1 << (s % 64)
	}
	h.initClasses()
	entries := h.size / granule
	if h.gensMem, h.genFD, err = mapArena(cfg.Name+"-gens", entries*8); err != nil {
		return nil, fmt.Errorf("host: generations: %w", err)
	}
	if h.nextMem, err = mapAnon(entries * 4); err != nil {
		unmapArena(h.gensMem, h.genFD)
		return nil, fmt.Errorf("host: %w", err)
	}
	h.gens = unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(h.gensMem))), entries)
	h.next = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(h.nextMem))), entries)
	h.mem, h.fd, err = mapArena(cfg.Name, h.size)
	if err == nil && cfg.Prefault {
		if err = populate(h.mem); err != nil {
			unmapArena(h.mem, h.fd)
			err = fmt.Errorf("prefaulting the %d-byte arena: %w", h.size, err)
		}
	}
	if err != nil {
		unmapArena(h.gensMem, h.genFD)
		unmap(h.nextMem)
		return nil, fmt.Errorf("host: %w", err)
	}
	return h, nil
}

// initClasses builds the class table: every class no larger than the arena.
func (h *Host) initClasses() {
	h.classes = make([]class, classCount(h.size))
	for i := range h.classes {
		cl := &h.classes[i]
		cl.size, cl.spanSlabs, cl.slots = classGeometry(i, h.slabSize, h.nslabs)
		cl.partial, cl.spare = -1, -1
	}
}

// Kind returns KindHost.
func (h *Host) Kind() Kind { return KindHost }

// FD returns the arena's memfd, for passing to same-host clients (which map
// Size bytes of it MAP_SHARED). It stays owned by h and is closed by Close.
func (h *Host) FD() int { return h.fd }

// Size returns the arena's length in bytes: Capacity rounded down to whole
// slabs, the length to map FD with.
func (h *Host) Size() int64 { return h.size }

// Alloc sets aside an extent of size bytes in the smallest class holding it.
// It fails with ErrClosed after Close, ErrTooLarge when size <= 0 or its
// class exceeds the arena, and ErrFull when the class has no free slot and no
// run of free slabs (or spare span) is left for a new span of it.
func (h *Host) Alloc(size int64) (Extent, error) {
	if h.closed.Load() {
		return Extent{}, fmt.Errorf("host: allocating %d bytes: %w", size, ErrClosed)
	}
	cls := -1
	if size > 0 && size <= h.size {
		cls = classIndex(size)
	}
	if cls < 0 || cls >= len(h.classes) {
		return Extent{}, fmt.Errorf("host: allocating %d bytes in a %d-byte arena: %w",
			size, h.size, ErrTooLarge)
	}
	cl := &h.classes[cls]
	cl.mu.Lock()
	if cl.partial < 0 && !h.growLocked(cl, int32(cls)) {
		cl.mu.Unlock()
		return Extent{}, fmt.Errorf("host: allocating %d bytes (class %d): %w", size, cl.size, ErrFull)
	}
	start := cl.partial
	sp := &h.spans[start]
	base := int64(start) * h.slotsPerSlab
	var slot int32
	var gen uint64
	if sp.free >= 0 {
		slot = sp.free
		sp.free = h.next[base+int64(slot)]
		gen = h.gens[base+int64(slot)].Add(1)
	} else {
		slot = sp.bump.Load()
		gen = sp.floor + 1
		h.gens[base+int64(slot)].Store(gen) // before bump passes the slot
		sp.bump.Store(slot + 1)
	}
	sp.live++
	if sp.free < 0 && sp.bump.Load() == cl.slots {
		h.removePartialLocked(cl, start)
	}
	cl.extents++
	cl.requested += size
	cl.mu.Unlock()
	return Extent{
		Off: int64(start)*h.slabSize + int64(slot)*cl.size,
		Len: size,
		Cap: cl.size,
		Gen: gen,
	}, nil
}

// Free returns ext, which must be the Extent Alloc returned, to its class.
// Freeing an extent that is not live (a double free, a stale generation, an
// extent of another tier) panics: it is a programmer error. After Close,
// Free does nothing.
func (h *Host) Free(ext Extent) {
	if h.closed.Load() {
		return
	}
	l := h.lockLive(ext, "Free")
	cl, sp, e := l.cl, l.sp, l.e
	h.gens[e].Store(ext.Gen + 1)
	sp.maxGen = max(sp.maxGen, ext.Gen+1)
	h.next[e] = sp.free
	sp.free = l.slot
	sp.live--
	cl.extents--
	cl.requested -= ext.Len
	switch {
	case sp.live == 0:
		if sp.inPartial {
			h.removePartialLocked(cl, l.start)
		}
		h.releaseLocked(cl, l.start)
	case !sp.inPartial:
		h.pushPartialLocked(cl, l.start)
	}
	cl.mu.Unlock()
}

// liveSlot is a live extent's slot, found by lockLive.
type liveSlot struct {
	cl    *class
	sp    *span
	start int32 // the span's first slab
	slot  int32
	e     int64 // the slot's metadata index
}

// lockLive finds ext's slot and locks its class, panicking (a programmer
// error) when ext is not a live extent of this arena; op names the caller
// in the panic. The caller unlocks l.cl.mu.
func (h *Host) lockLive(ext Extent, op string) liveSlot {
	if ext.Off < 0 || ext.Off >= h.size {
		panic(fmt.Sprintf("tiers: Host.%s of %+v: outside the %d-byte arena", op, ext, h.size))
	}
	s := ext.Off / h.slabSize
	w := h.owner[s].Load()
	if w == 0 {
		panic(fmt.Sprintf("tiers: Host.%s of %+v: not live (its slab is free)", op, ext))
	}
	cls, start := decodeOwner(w)
	cl := &h.classes[cls]
	rel := ext.Off - int64(start)*h.slabSize
	if ext.Cap != cl.size || rel%cl.size != 0 {
		panic(fmt.Sprintf("tiers: Host.%s of %+v: not a slot of the %d-byte class there", op, ext, cl.size))
	}
	slot := int32(rel / cl.size)
	cl.mu.Lock()
	sp := &h.spans[start]
	e := int64(start)*h.slotsPerSlab + int64(slot)
	if h.owner[s].Load() != w || slot >= sp.bump.Load() || h.gens[e].Load() != ext.Gen || ext.Gen%2 == 0 {
		cl.mu.Unlock()
		panic(fmt.Sprintf("tiers: Host.%s of %+v: not live (double free or stale generation)", op, ext))
	}
	return liveSlot{cl: cl, sp: sp, start: start, slot: slot, e: e}
}

// Retire implements Retirer: ext stays live (its generation odd) under a
// generation two higher, so that no copy checked against ext.Gen passes.
// Retiring an extent that is not live panics, as Free does.
func (h *Host) Retire(ext Extent) Extent {
	if h.closed.Load() {
		return ext
	}
	l := h.lockLive(ext, "Retire")
	defer l.cl.mu.Unlock()
	ext.Gen += 2
	h.gens[l.e].Store(ext.Gen)
	l.sp.maxGen = max(l.sp.maxGen, ext.Gen)
	return ext
}

// Generation returns the current generation of ext's slot with one atomic
// load per step and no lock. It equals ext.Gen exactly while ext is live; a
// reader that copied ext's bytes re-checks it to discard a copy that raced a
// Free and reuse. After Close it returns 0, which no extent has.
//
// On amd64 a copy followed by Generation is a sound seqlock read. On weakly
// ordered CPUs (arm64) Go has no load fence, so an in-process reader there
// must hold a lease instead; cross-process readers issue their own barrier.
func (h *Host) Generation(ext Extent) uint64 {
	if h.closed.Load() {
		return 0
	}
	if ext.Off < 0 || ext.Off >= h.size {
		panic(fmt.Sprintf("tiers: Host.Generation of %+v: outside the %d-byte arena", ext, h.size))
	}
	s := ext.Off / h.slabSize
	w := h.owner[s].Load()
	if w == 0 {
		return h.floor[s].Load()
	}
	cls, start := decodeOwner(w)
	slot := (ext.Off - int64(start)*h.slabSize) / h.classes[cls].size
	if slot < int64(h.spans[start].bump.Load()) {
		return h.gens[int64(start)*h.slotsPerSlab+slot].Load()
	}
	return h.floor[s].Load()
}

// WriteAt copies p into ext at off. It fails with ErrOutOfRange when the
// range leaves ext.Len or ext leaves the arena, and ErrClosed after Close.
func (h *Host) WriteAt(ext Extent, p []byte, off int64) error { return h.copyAt(ext, p, off, true) }

// ReadAt copies len(p) bytes of ext at off into p. It fails like WriteAt.
func (h *Host) ReadAt(ext Extent, p []byte, off int64) error { return h.copyAt(ext, p, off, false) }

// copyAt copies p into ext at off (write) or len(p) bytes of ext at off
// into p.
func (h *Host) copyAt(ext Extent, p []byte, off int64, write bool) error {
	b, err := h.window(ext, off, len(p))
	if err != nil {
		return rangeErr("host", write, ext, p, off, err)
	}
	if write {
		copy(b, p)
	} else {
		copy(p, b)
	}
	return nil
}

// rangeErr wraps err, the failure of tier's copy of p to (write) or from
// ext at off.
func rangeErr(tier string, write bool, ext Extent, p []byte, off int64, err error) error {
	doing := "reading"
	if write {
		doing = "writing"
	}
	return fmt.Errorf("%s: %s %d bytes at %d of extent %+v: %w", tier, doing, len(p), off, ext, err)
}

// window returns the n bytes of ext at off.
func (h *Host) window(ext Extent, off int64, n int) ([]byte, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	if off < 0 || off > ext.Len-int64(n) || ext.Off < 0 || ext.Len < 0 || ext.Off > h.size-ext.Len {
		return nil, ErrOutOfRange
	}
	return h.mem[ext.Off+off : ext.Off+off+int64(n)], nil
}

// Bytes returns ext's first ext.Len bytes of the arena, without a copy, with
// the capacity clipped to ext.Len. The slice is valid until ext is freed or h
// closed; calling Bytes after Close is a programmer error and panics.
func (h *Host) Bytes(ext Extent) []byte {
	if h.closed.Load() {
		panic("tiers: Host.Bytes after Close")
	}
	end := ext.Off + ext.Len
	return h.mem[ext.Off:end:end]
}

// Stats reports capacity and usage. Each class's figures are a consistent
// snapshot; with Allocs and Frees running, the sum across classes may mix
// moments.
func (h *Host) Stats() Stats {
	st := Stats{Kind: KindHost, Capacity: h.size}
	for _, cls := range h.activeClasses() {
		cl := &h.classes[cls]
		cl.mu.Lock()
		st.Extents += cl.extents
		st.Used += cl.extents * cl.size
		st.Requested += cl.requested
		cl.mu.Unlock()
	}
	return st
}

// ClassStats describes one size class of a Host.
type ClassStats struct {
	Size      int64 // slot size in bytes: the Extent.Cap of the class
	SpanSlabs int   // slabs per span
	SpanSlots int   // slots per span
	Slabs     int   // slabs the class holds, its spare span included
	Extents   int64 // live extents
	FreeSlots int64 // slots of the held slabs not holding an extent
	Requested int64 // sum of Len over live extents
}

// ClassStats reports every class that holds slabs, smallest first.
func (h *Host) ClassStats() []ClassStats {
	var out []ClassStats
	for _, cls := range h.activeClasses() {
		cl := &h.classes[cls]
		cl.mu.Lock()
		cs := ClassStats{
			Size:      cl.size,
			SpanSlabs: int(cl.spanSlabs),
			SpanSlots: int(cl.slots),
			Slabs:     int(cl.spans * cl.spanSlabs),
			Extents:   cl.extents,
			FreeSlots: int64(cl.spans)*int64(cl.slots) - cl.extents,
			Requested: cl.requested,
		}
		cl.mu.Unlock()
		h.poolMu.Lock()
		if cl.spare >= 0 {
			cs.Slabs += int(cl.spanSlabs)
			cs.FreeSlots += int64(cl.slots)
		}
		h.poolMu.Unlock()
		if cs.Slabs > 0 {
			out = append(out, cs)
		}
	}
	slices.SortFunc(out, func(a, b ClassStats) int { return cmp.Compare(a.Size, b.Size) })
	return out
}

// activeClasses returns the classes that ever carved a span.
func (h *Host) activeClasses() []int32 {
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	return h.active
}

// Close unmaps the arena and its metadata and closes the memfd (clients
// that mapped it keep their mappings). Afterwards Alloc, WriteAt and ReadAt
// fail with ErrClosed, Free does nothing, Generation returns 0, and Bytes
// panics; slices Bytes returned before must no longer be used. Close must not
// run concurrently with other methods. A second Close returns ErrClosed.
func (h *Host) Close() error {
	if !h.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("host: close: %w", ErrClosed)
	}
	err := errors.Join(unmapArena(h.mem, h.fd), unmapArena(h.gensMem, h.genFD), unmap(h.nextMem))
	h.mem, h.gens, h.next, h.gensMem, h.nextMem = nil, nil, nil, nil, nil
	if err != nil {
		return fmt.Errorf("host: close: %w", err)
	}
	return nil
}
