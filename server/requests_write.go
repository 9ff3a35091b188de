package server

import (
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// The request layer's write side (requests.go): publication, in two phases
// (reserve, write, commit, abort) or in one call (put, into a granted
// slot too), and deletion.

// reserve validates page specs and sets aside space for them.
func (s *Server) reserve(n store.Namespace, specs []store.PageSpec, ttl time.Duration) ([]store.Reservation, error) {
	if err := s.checkBatch(len(specs), "pages"); err != nil {
		return nil, err
	}
	for i, spec := range specs {
		if err := checkSpec(spec); err != nil {
			return nil, badRequest("page %d: %v", i, err)
		}
	}
	return s.cfg.Store.Publisher().Reserve(n.ID, specs, ttl)
}

// directWrite hands out the extent of reservation writeID in arena, for a
// same-host writer to copy the page into (store.DirectWrite); mapped is
// false when the extent is not in the arena. A reservation whose extent
// cannot be handed out is aborted.
func (s *Server) directWrite(n store.Namespace, writeID uint64, arena tiers.Tier) (tiers.Extent, bool, error) {
	ext, mapped, err := s.cfg.Store.Publisher().DirectWrite(n.ID, writeID, arena)
	if err != nil {
		s.abandon(n.ID, writeID)
	}
	return ext, mapped, err
}

// write writes pieces into a reservation from off on, one after another.
// No piece at all still names the reservation: the store judges it.
func (s *Server) write(n store.Namespace, writeID uint64, off int64, pieces ...[]byte) error {
	if len(pieces) == 0 {
		return s.cfg.Store.Publisher().Write(n.ID, writeID, off, nil)
	}
	start := off
	defer func() { s.received(n, int(off-start)) }() // once per call, not per piece
	for _, p := range pieces {
		if err := s.cfg.Store.Publisher().Write(n.ID, writeID, off, p); err != nil {
			return err
		}
		off += int64(len(p))
	}
	return nil
}

// writeInPlace is write of n bytes that fill puts straight into the
// reservation (store.WriteInPlace).
func (s *Server) writeInPlace(n store.Namespace, writeID uint64, off int64, size int, fill func(dst []byte) error) error {
	if err := s.cfg.Store.Publisher().WriteInPlace(n.ID, writeID, off, size, fill); err != nil {
		return err
	}
	s.received(n, size)
	return nil
}

// received counts page bytes received into a reservation.
func (s *Server) received(n store.Namespace, bytes int) {
	if bytes > 0 {
		s.metrics.Transfer(n.ID, "in", bytes)
	}
}

// commitItem is one reservation to commit: its declared size and checksum.
type commitItem struct {
	writeID uint64
	size    int64
	sum     []byte
	// repeat: the caller may not commit the reservation (a frame
	// connection that does not hold it), only be told its remembered
	// outcome (store.Outcome).
	repeat bool
}

// commit verifies and publishes reservations, in order, answering each
// one's outcome: a write id whose reservation ended before (committed,
// refused, expired, aborted) answers the outcome it ended with while the
// store remembers it, on every plane (SPEC.md §2, Repeated commits).
func (s *Server) commit(n store.Namespace, items []commitItem) ([]store.CommitStatus, error) {
	if err := s.checkBatch(len(items), "items"); err != nil {
		return nil, err
	}
	out := make([]store.CommitStatus, len(items))
	for i, it := range items {
		var st store.CommitStatus
		var err error
		if it.repeat {
			st, err = s.cfg.Store.Publisher().Outcome(n.ID, it.writeID)
		} else {
			st, err = s.cfg.Store.Publisher().Commit(n.ID, it.writeID, it.size, it.sum)
		}
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// abort drops reservations and says how many it dropped.
func (s *Server) abort(n store.Namespace, writeIDs []uint64) (int, error) {
	if err := s.checkLimit(len(writeIDs), "write ids"); err != nil {
		return 0, err
	}
	return s.cfg.Store.Publisher().Abort(n.ID, writeIDs)
}

// abandon aborts reservations or granted slots of namespace id that a
// connection held and gives up: it ends, a slot lapsed, or an extent it
// was given cannot be mapped. Each was checked when it was handed out, and
// the outcome is no one's to hear.
func (s *Server) abandon(id namespace.ID, writeIDs ...uint64) {
	_, _ = s.cfg.Store.Publisher().Abort(id, writeIDs)
}

// published records the time from a reservation (since) to its verified
// commit.
func (s *Server) published(since time.Time) {
	s.metrics.PageTime("in", time.Since(since))
}

// put publishes one page in one call (store.Put): fill writes its bytes.
// The time from reservation to a verified commit is recorded.
func (s *Server) put(n store.Namespace, spec store.PageSpec, sum []byte, ttl time.Duration,
	fill func(write func([]byte) error) error) (store.PutResult, error) {
	if err := checkSpec(spec); err != nil {
		return store.PutResult{}, err
	}
	start := time.Now()
	written := 0 // counted once per page, not per piece
	res, err := s.cfg.Store.Publisher().Put(n.ID, spec, sum, ttl, func(write func([]byte) error) error {
		return fill(func(p []byte) error {
			if err := write(p); err != nil {
				return err
			}
			written += len(p)
			return nil
		})
	})
	s.putDone(n, written, start, res)
	return res, err
}

// putInPlace is put whose fill writes the page's bytes into dst
// (store.PutInPlace: the reservation's memory where its tier is mapped).
func (s *Server) putInPlace(n store.Namespace, spec store.PageSpec, sum []byte, ttl time.Duration,
	fill func(dst []byte) error) (store.PutResult, error) {
	if err := checkSpec(spec); err != nil {
		return store.PutResult{}, err
	}
	start, written := time.Now(), 0
	res, err := s.cfg.Store.Publisher().PutInPlace(n.ID, spec, sum, ttl, func(dst []byte) error {
		err := fill(dst)
		if err == nil {
			written = len(dst)
		}
		return err
	})
	s.putDone(n, written, start, res)
	return res, err
}

// putDone counts a one-call put's bytes received and, when it published
// the page, the time from start.
func (s *Server) putDone(n store.Namespace, written int, start time.Time, res store.PutResult) {
	s.received(n, written)
	if res.Committed() {
		s.published(start)
	}
}

// grant sets aside up to count slots of n's page size in the shared arena
// for a same-host writer (store.Grant): fewer, or none, when the arena has
// no free extent or the tenant is at its quota (err says which).
// The caller bounded count (checkLimit).
func (s *Server) grant(n store.Namespace, count int, arena tiers.Tier) ([]store.Granted, error) {
	return s.cfg.Store.Publisher().Grant(n.ID, count, 0, arena)
}

// putGranted publishes a page a same-host writer copied into granted slot
// writeID (store.PutGranted); spec was checked (checkSpec). The time from
// the grant (since) to a verified commit is recorded.
func (s *Server) putGranted(n store.Namespace, writeID uint64, spec store.PageSpec, sum []byte, since time.Time) (store.PutResult, error) {
	res, err := s.cfg.Store.Publisher().PutGranted(n.ID, writeID, spec, sum)
	if res.Committed() {
		s.published(since)
	}
	return res, err
}

// remove deletes pages and says how many it deleted.
func (s *Server) remove(n store.Namespace, keys []namespace.Key) (int, error) {
	if err := s.checkBatch(len(keys), "keys"); err != nil {
		return 0, err
	}
	return s.cfg.Store.Publisher().Delete(n.ID, keys)
}
