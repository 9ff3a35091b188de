package server

import (
	"context"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// The request layer: what every transport's handler calls once it has
// decoded a request. The gRPC handlers (grpc_*.go) and the frame handlers
// of the raw tcp and shm listeners (frame_*.go) only decode, call these
// and encode; who the caller is (auth.go), which namespace a request may
// use, the validation of sizes, batches, keys and page specs, the
// operations on the store and their metrics are written here once, and
// the errors they return are mapped to each wire in one table
// (errors.go). A new field of a page spec is checked in checkSpec.

// resolve finds the namespace id for caller c: one this node holds, or one
// another node registered since (adopt); the caller's tenant must own it.
func (s *Server) resolve(ctx context.Context, c caller, id namespace.ID) (store.Namespace, error) {
	n, ok := s.cfg.Store.Namespace(id)
	if !ok {
		if n, ok = s.adopt(ctx, id); !ok {
			return store.Namespace{}, errorf(store.ErrNamespaceNotFound, "namespace %s is not registered (open it first)", id.Short())
		}
	}
	return n, c.mayUse(n.Tenant)
}

// checkBatch refuses an empty batch of what, or one over Config.MaxBatch.
func (s *Server) checkBatch(n int, what string) error {
	if n == 0 {
		return badRequest("no %s", what)
	}
	return s.checkLimit(n, what)
}

// checkLimit refuses a batch of what over Config.MaxBatch.
func (s *Server) checkLimit(n int, what string) error {
	if n > s.cfg.MaxBatch {
		return errorf(errBatchTooLarge, "%d %s, the limit is %d", n, what, s.cfg.MaxBatch)
	}
	return nil
}

// lookup answers which keys the node holds and their hit prefix, leasing
// the prefix when asked, and counts the hits.
func (s *Server) lookup(n store.Namespace, keys []namespace.Key, lease bool, ttl time.Duration) (store.LookupResult, error) {
	if err := s.checkBatch(len(keys), "keys"); err != nil {
		return store.LookupResult{}, err
	}
	res, err := s.cfg.Store.Lookup(n.ID, keys, lease, ttl)
	if err != nil {
		return store.LookupResult{}, err
	}
	s.recordHits(n.ID, res)
	return res, nil
}

// read hands send each page of keys in order, pinned while send runs
// (under the lease, if any), and counts what was sent.
func (s *Server) read(n store.Namespace, lease uint64, keys []namespace.Key, send func(i int, p store.PageView) error) error {
	if err := s.checkBatch(len(keys), "keys"); err != nil {
		return err
	}
	return s.cfg.Store.Read(n.ID, lease, keys, func(i int, p store.PageView) error {
		start := time.Now()
		if err := send(i, p); err != nil {
			return err
		}
		if p.Found {
			s.metrics.Transfer(n.ID, "out", len(p.Data))
			s.metrics.PageTime("out", time.Since(start))
		}
		return nil
	})
}

// served counts page bytes a client copied itself (from the shared arena).
func (s *Server) served(n store.Namespace, bytes int) {
	if bytes > 0 {
		s.metrics.Transfer(n.ID, "out", bytes)
	}
}

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
	return s.cfg.Store.Reserve(n.ID, specs, ttl)
}

// write writes pieces into a reservation from off on, one after another.
// No piece at all still names the reservation: the store judges it.
func (s *Server) write(n store.Namespace, writeID uint64, off int64, pieces ...[]byte) error {
	if len(pieces) == 0 {
		return s.cfg.Store.Write(n.ID, writeID, off, nil)
	}
	start := off
	defer func() { s.received(n, int(off-start)) }() // once per call, not per piece
	for _, p := range pieces {
		if err := s.cfg.Store.Write(n.ID, writeID, off, p); err != nil {
			return err
		}
		off += int64(len(p))
	}
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
			st, err = s.cfg.Store.Outcome(n.ID, it.writeID)
		} else {
			st, err = s.cfg.Store.Commit(n.ID, it.writeID, it.size, it.sum)
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
	return s.cfg.Store.Abort(n.ID, writeIDs)
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
	res, err := s.cfg.Store.Put(n.ID, spec, sum, ttl, func(write func([]byte) error) error {
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
	res, err := s.cfg.Store.PutInPlace(n.ID, spec, sum, ttl, func(dst []byte) error {
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
		s.metrics.PageTime("in", time.Since(start))
	}
}

// grant sets aside up to count slots of n's page size in the shared arena
// for a same-host writer (store.Grant): fewer, or none, when the arena has
// no free extent or the tenant is at its quota (err says which).
// The caller bounded count (checkLimit).
func (s *Server) grant(n store.Namespace, count int, arena tiers.Tier) ([]store.Granted, error) {
	return s.cfg.Store.Grant(n.ID, count, 0, arena)
}

// putGranted publishes a page a same-host writer copied into granted slot
// writeID (store.PutGranted); spec was checked (checkSpec). The time from
// the grant (since) to a verified commit is recorded.
func (s *Server) putGranted(n store.Namespace, writeID uint64, spec store.PageSpec, sum []byte, since time.Time) (store.PutResult, error) {
	res, err := s.cfg.Store.PutGranted(n.ID, writeID, spec, sum)
	if res.Committed() {
		s.metrics.PageTime("in", time.Since(since))
	}
	return res, err
}

// remove deletes pages and says how many it deleted.
func (s *Server) remove(n store.Namespace, keys []namespace.Key) (int, error) {
	if err := s.checkBatch(len(keys), "keys"); err != nil {
		return 0, err
	}
	return s.cfg.Store.Delete(n.ID, keys)
}
