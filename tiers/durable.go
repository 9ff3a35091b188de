package tiers

import "time"

// PageMeta is what a durable tier records beside a page's bytes, so that it
// can rebuild the index after a restart without anything else.
type PageMeta struct {
	Namespace [32]byte
	Key       [32]byte
	Parent    [32]byte // meaningful when HasParent
	HasParent bool
	Depth     uint32
	// Len is the page's length in bytes (the extent's Len).
	Len int64
	// ChecksumAlg is 1 for CRC-32C, 2 for SHA-256 (namespace.Checksum).
	ChecksumAlg uint8
	// Checksum of the page's bytes under ChecksumAlg.
	Checksum []byte
	// Created is when the page was first published.
	Created time.Time
	// Cost is the writer's measured recompute cost of the page in FLOPs
	// (store.PageSpec.CostHint); 0: none. Finite and >= 0.
	Cost float32
}

// RecoveryStats reports what a Recover found.
type RecoveryStats struct {
	Recovered int   // pages handed to the callback
	Dropped   int   // slots whose header or payload did not verify
	Torn      int   // slots written but never sealed (no commit marker)
	Bytes     int64 // bytes of recovered pages
}

// Durable is implemented by tiers whose pages survive a restart (ssd).
//
// The store writes a page's bytes with WriteAt, verifies its checksum, then
// calls Seal; only when Seal returns is the page published. Recover, run
// before the tier serves, hands back every sealed page that verifies. Free
// unseals the slot, so a freed page never comes back.
type Durable interface {
	Tier
	// Seal makes the extent's bytes and meta durable (per the tier's sync
	// policy) and marks the slot committed.
	Seal(ext Extent, meta PageMeta) error
	// Recover calls fn for every sealed slot that verifies, marks those
	// extents live, and frees every other slot. fn returning an error frees
	// that extent (the store did not want it) and recovery goes on.
	Recover(fn func(ext Extent, meta PageMeta) error) (RecoveryStats, error)
}
