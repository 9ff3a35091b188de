package tiers

import (
	"fmt"
	"sync"
)

// Heap is a tier whose extents are byte slices on the Go heap, each
// allocated for its page: for tests and the eviction simulator
// (cmd/strata-sim runs real stores over it), not for serving: its memory
// is the process's own, not an arena that same-host clients can map, and
// nothing survives the process. It reports itself as a host tier.
//
// Capacity is exact: an extent's Cap is its Len, and Alloc fails with
// ErrFull when the live extents' bytes plus size would exceed the
// capacity, so a store over a Heap of n × page bytes holds at most n
// pages. Offsets are never reused; generations are unique per tier.
type Heap struct {
	capacity int64

	mu      sync.Mutex // guards the fields below
	slots   map[int64][]byte
	used    int64
	nextOff int64
	gen     uint64
	closed  bool
}

// NewHeap returns an empty Heap that hands out at most capacity bytes.
func NewHeap(capacity int64) (*Heap, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("heap tier capacity %d: %w", capacity, ErrInvalidConfig)
	}
	return &Heap{capacity: capacity, slots: make(map[int64][]byte)}, nil
}

// Kind implements Tier: KindHost.
func (h *Heap) Kind() Kind { return KindHost }

// Alloc implements Tier.
func (h *Heap) Alloc(size int64) (Extent, error) {
	if size <= 0 || size > h.capacity {
		return Extent{}, fmt.Errorf("heap extent of %d bytes (capacity %d): %w", size, h.capacity, ErrTooLarge)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return Extent{}, ErrClosed
	case h.used+size > h.capacity:
		return Extent{}, fmt.Errorf("heap: %d of %d bytes used: %w", h.used, h.capacity, ErrFull)
	}
	h.gen++
	ext := Extent{Off: h.nextOff, Len: size, Cap: size, Gen: h.gen}
	h.nextOff += size
	h.used += size
	h.slots[ext.Off] = make([]byte, size)
	return ext, nil
}

// slot is ext's bytes, or an error for an extent that is not live or a
// range outside it.
func (h *Heap) slot(ext Extent, off int64, n int) ([]byte, error) {
	h.mu.Lock()
	b, ok := h.slots[ext.Off]
	h.mu.Unlock()
	if !ok || int64(len(b)) != ext.Len {
		return nil, fmt.Errorf("heap extent at %d is not live: %w", ext.Off, ErrOutOfRange)
	}
	if off < 0 || off+int64(n) > ext.Len {
		return nil, fmt.Errorf("bytes [%d,%d) of a %d-byte extent: %w", off, off+int64(n), ext.Len, ErrOutOfRange)
	}
	return b[off : off+int64(n)], nil
}

// WriteAt implements Tier.
func (h *Heap) WriteAt(ext Extent, p []byte, off int64) error {
	return h.copyAt(ext, p, off, true)
}

// ReadAt implements Tier.
func (h *Heap) ReadAt(ext Extent, p []byte, off int64) error {
	return h.copyAt(ext, p, off, false)
}

// copyAt copies p into the extent at off (write) or out of it.
func (h *Heap) copyAt(ext Extent, p []byte, off int64, write bool) error {
	b, err := h.slot(ext, off, len(p))
	switch {
	case err != nil:
		return err
	case write:
		copy(b, p)
	default:
		copy(p, b)
	}
	return nil
}

// Bytes implements Mapped: the extent's bytes, valid until it is freed.
func (h *Heap) Bytes(ext Extent) []byte {
	b, err := h.slot(ext, 0, int(ext.Len))
	if err != nil {
		panic(err) // the store maps only extents it holds
	}
	return b
}

// Free implements Tier.
func (h *Heap) Free(ext Extent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.slots[ext.Off]
	if !ok || int64(len(b)) != ext.Len {
		panic(fmt.Sprintf("tiers: heap extent at %d freed twice or never allocated", ext.Off))
	}
	delete(h.slots, ext.Off)
	h.used -= ext.Len
}

// Stats implements Tier.
func (h *Heap) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Kind: KindHost, Capacity: h.capacity, Used: h.used, Extents: int64(len(h.slots)), Requested: h.used}
}

// Close implements Tier: later allocations fail with ErrClosed.
func (h *Heap) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	return nil
}
