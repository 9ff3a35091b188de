package store

import (
	"fmt"
	"sync"

	"github.com/stratakv/strata/tiers"
)

// memTier is an in-memory tier behind the seam: each extent its own slice,
// capacity counted in bytes. failWrites injects write errors. It is not
// tiers.Mapped, so it exercises the copying read path.
type memTier struct {
	mu         sync.Mutex
	capacity   int64
	used       int64
	extents    map[int64][]byte
	next       int64
	failWrites error
}

func newMemTier(capacity int64) *memTier {
	return &memTier{capacity: capacity, extents: make(map[int64][]byte)}
}

func (m *memTier) Kind() tiers.Kind { return tiers.KindHost }

func (m *memTier) Alloc(size int64) (tiers.Extent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if size > m.capacity {
		return tiers.Extent{}, tiers.ErrTooLarge
	}
	if m.used+size > m.capacity {
		return tiers.Extent{}, fmt.Errorf("mem tier: %w", tiers.ErrFull)
	}
	m.next++
	m.used += size
	m.extents[m.next] = make([]byte, size)
	return tiers.Extent{Off: m.next, Len: size, Cap: size, Gen: uint64(m.next)}, nil
}

func (m *memTier) WriteAt(ext tiers.Extent, p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWrites != nil {
		return m.failWrites
	}
	b, ok := m.extents[ext.Off]
	if !ok || off < 0 || off+int64(len(p)) > int64(len(b)) {
		return tiers.ErrOutOfRange
	}
	copy(b[off:], p)
	return nil
}

func (m *memTier) ReadAt(ext tiers.Extent, p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.extents[ext.Off]
	if !ok || off < 0 || off+int64(len(p)) > int64(len(b)) {
		return tiers.ErrOutOfRange
	}
	copy(p, b[off:])
	return nil
}

func (m *memTier) Free(ext tiers.Extent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.extents[ext.Off]
	if !ok {
		panic(fmt.Sprintf("mem tier: double free of extent %d", ext.Off))
	}
	m.used -= int64(len(b))
	delete(m.extents, ext.Off)
}

func (m *memTier) Stats() tiers.Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return tiers.Stats{Kind: tiers.KindHost, Capacity: m.capacity, Used: m.used, Requested: m.used, Extents: int64(len(m.extents))}
}

func (m *memTier) Close() error { return nil }

func (m *memTier) usedBytes() int64 { return m.Stats().Used }
