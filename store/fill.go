package store

import (
	"fmt"

	"github.com/stratakv/strata/internal/crc32c"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// In-place writes. A writer that reads a page's bytes from a socket (the
// raw plane's Put and Write frames) puts them straight into the
// reservation's memory when its tier is mapped, instead of into a buffer
// that Write then copies: one copy fewer per byte put.
//
// The bytes arrive without the reservation locked, since a stalled client
// must not hold a lock the store's own paths wait on. The reservation is
// marked filling instead, and the mark keeps its extent alive. An abort, an
// expiry or a failed commit in the meantime closes the reservation and
// leaves the extent to the fill, whose end frees it (freeReservedLocked,
// endFill). A commit during a fill answers INCOMPLETE, since those bytes
// are not the page's yet. Without the mark, an expired reservation's
// extent could be handed to another page while a socket still wrote into
// it, and that page would be published with bytes other than the ones its
// checksum was verified against.

// WriteInPlace is Write whose n bytes at off fill puts straight into the
// reservation's memory, dst (every byte of it), with the checks of Write.
// They count as written once fill returns nil; a fill that fails leaves
// them unwritten, and its error is returned. On a tier that is not mapped,
// fill fills a buffer that Write then copies.
func (pub Publisher) WriteInPlace(id namespace.ID, writeID uint64, off int64, n int, fill func(dst []byte) error) error {
	dst, r, err := pub.s.beginFill(id, writeID, off, n)
	if err != nil {
		return err
	}
	if r == nil {
		buf := make([]byte, n)
		if err := fill(buf); err != nil {
			return err
		}
		return pub.Write(id, writeID, off, buf)
	}
	err = fill(dst)
	pub.s.endFill(r, off, dst, err == nil)
	return err
}

// beginFill marks open reservation writeID filling and returns its memory
// at [off, off+n); a nil reservation (and no error) when its tier is not
// mapped.
func (s *Store) beginFill(id namespace.ID, writeID uint64, off int64, n int) ([]byte, *reservation, error) {
	ns, err := s.lockNamespace(id)
	if err != nil {
		return nil, nil, err
	}
	defer s.unlock()
	r, err := s.openReservationLocked(ns, writeID)
	if err != nil {
		return nil, nil, err
	}
	m, ok := s.cfg.Tiers[r.tier].(tiers.Mapped)
	if !ok {
		return nil, nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	end := off + int64(n)
	if err := r.writable(writeID, off, end); err != nil {
		return nil, nil, err
	}
	r.filling++
	return m.Bytes(r.ext)[off:end:end], r, nil
}

// endFill ends a fill of r that put dst at off (ok: every byte of it),
// adding dst to r's running CRC-32C while it is still in the cache when
// the fill continues the bytes summed, and frees r's extent if r ended
// meanwhile and this was its last fill.
func (s *Store) endFill(r *reservation, off int64, dst []byte, ok bool) {
	r.mu.Lock()
	r.filling--
	if ok && !r.closed {
		end := off + int64(len(dst))
		switch {
		case r.ns.Checksum != namespace.CRC32C:
		case off == r.summed:
			r.sum, r.summed = crc32c.Update(r.sum, dst), end
		case off < r.summed:
			r.summed = -1 // a rewrite of summed bytes: Commit reads them all
		}
		r.written = max(r.written, end)
	}
	free := r.freeLater && r.filling == 0
	if free {
		r.freeLater = false
	}
	r.mu.Unlock()
	if free {
		s.lock()
		s.cfg.Tiers[r.tier].Free(r.ext)
		s.unlock()
	}
}

// freeReservedLocked closes r and frees its extent, or, while a fill is
// putting bytes into it, leaves the freeing to the fill's end.
func (s *Store) freeReservedLocked(r *reservation) {
	r.mu.Lock()
	r.closed = true
	later := r.filling > 0
	r.freeLater = later
	r.mu.Unlock()
	if !later {
		s.cfg.Tiers[r.tier].Free(r.ext)
	}
}

// writable checks that r takes bytes [off, end): it is open, and they
// leave no gap after what was written. r.mu is held.
func (r *reservation) writable(writeID uint64, off, end int64) error {
	if r.closed {
		return fmt.Errorf("write %d: %w", writeID, ErrWriteClosed)
	}
	if off < 0 || off > r.written || end > r.spec.Size || end < off {
		return fmt.Errorf("write %d: bytes [%d,%d) of a %d-byte page with %d written: %w",
			writeID, off, end, r.spec.Size, r.written, ErrWriteOutOfRange)
	}
	return nil
}
