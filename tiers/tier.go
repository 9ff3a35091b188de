// Package tiers defines the seam every kind of node memory implements (GPU
// HBM, host DRAM, local SSD) and provides the implementations.
//
// A tier hands out extents: contiguous byte ranges sized for one page. The
// store owns the mapping from pages to extents; a tier knows nothing of keys,
// namespaces or leases. Every extent carries a generation that changes each
// time its bytes are handed to a new owner, so a reader that captured an
// extent can tell afterwards whether it was reclaimed underneath it.
package tiers

import "io"

// Kind names a kind of memory, in the order pages prefer them.
type Kind uint8

// Kinds of tier, fastest first.
const (
	KindGPU Kind = iota + 1
	KindHost
	KindSSD
)

// String returns the name used in flags, stats and the CLI.
func (k Kind) String() string {
	switch k {
	case KindGPU:
		return "gpu"
	case KindHost:
		return "host"
	case KindSSD:
		return "ssd"
	}
	return "unknown"
}

// Extent is a byte range inside one tier, holding at most one page.
type Extent struct {
	// Off is the byte offset inside the tier's address space.
	Off int64
	// Len is the usable length: the size asked for at allocation.
	Len int64
	// Cap is the length the allocator set aside (its size class).
	Cap int64
	// Gen is the allocation generation of the slot; it changes on every
	// allocation of the same range.
	Gen uint64
}

// Stats reports what a tier holds.
type Stats struct {
	Kind     Kind
	Capacity int64 // bytes the tier may hand out
	Used     int64 // bytes held by live extents (their Cap)
	Extents  int64 // live extents
	// Requested is the sum of Len over live extents; Used-Requested is
	// internal fragmentation.
	Requested int64
	// Fault is the tier's disk trouble now (ssd_health.go); FaultNone for
	// tiers without any.
	Fault Fault
}

// Tier is the seam between the store and a kind of memory. Implementations
// are safe for concurrent use. Reads and writes of one extent by different
// goroutines are the caller's to order; the store never writes an extent that
// a reader can see.
type Tier interface {
	// Kind says which kind of memory this is.
	Kind() Kind
	// Alloc sets aside an extent of at least size bytes. It returns an error
	// wrapping ErrFull when there is no room and ErrTooLarge when size can
	// never fit.
	Alloc(size int64) (Extent, error)
	// WriteAt copies p into the extent at off. Writing past ext.Len fails.
	WriteAt(ext Extent, p []byte, off int64) error
	// ReadAt copies len(p) bytes from the extent at off into p.
	ReadAt(ext Extent, p []byte, off int64) error
	// Free returns the extent. Freeing an extent twice is a programmer error.
	Free(ext Extent)
	// Stats reports capacity and usage.
	Stats() Stats
	io.Closer
}

// Mapped is implemented by tiers whose bytes live in this process's address
// space (host). Bytes returns the extent's first ext.Len bytes without a
// copy; the slice is valid until the extent is freed.
type Mapped interface {
	Bytes(ext Extent) []byte
}

// Waiter is implemented by tiers that make room with I/O of their own
// outside the caller's locks (SSD with SSDConfig.Background). TryAlloc is
// Alloc that answers ErrPending instead of waiting for that I/O; WaitRoom
// blocks, for a bounded time, until room for size may be there.
type Waiter interface {
	TryAlloc(size int64) (Extent, error)
	WaitRoom(size int64)
}

var _ Waiter = (*SSD)(nil)

// Retirer is a tier whose extents carry generations that other processes
// check (the host arena's shared memory): Retire changes a live extent's
// generation without freeing it and returns the extent with the new one,
// which is what Free then takes. A reader that cached the old location
// fails its generation check from then on, while the bytes stay for those
// that pinned them.
type Retirer interface {
	Retire(ext Extent) Extent
}
