package server

import (
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// The request layer's read side (requests.go): lookups, reads of page
// bytes or of their place in the shared arena, and read leases.

// lookup answers which keys the node holds and their hit prefix, leasing
// the prefix when asked, and counts the hits.
func (s *Server) lookup(n store.Namespace, keys []namespace.Key, lease bool, ttl time.Duration) (store.LookupResult, error) {
	if err := s.checkBatch(len(keys), "keys"); err != nil {
		return store.LookupResult{}, err
	}
	res, err := s.cfg.Store.Reader().Lookup(n.ID, keys, lease, ttl)
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
	return s.cfg.Store.Reader().Read(n.ID, lease, keys, func(i int, p store.PageView) error {
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

// probed takes back what a lookup counted (hits, recency) when the client
// said the owner counted it already (a probe: LookupRequest.probe).
func (s *Server) probed(n store.Namespace, keys int) {
	s.cfg.Store.Reader().TakeBackLookup(n.ID, keys)
}

// locate finds pages in arena, under the lease, if any, for a same-host
// client that copies them itself (store.Extents).
func (s *Server) locate(n store.Namespace, lease uint64, keys []namespace.Key, arena tiers.Tier) ([]store.PageExtent, error) {
	if err := s.checkBatch(len(keys), "keys"); err != nil {
		return nil, err
	}
	return s.cfg.Store.Reader().Extents(n.ID, lease, keys, arena)
}

// located counts the bytes of pages locate found mapped, and the time
// from start: locating, not copying, since the client copies.
func (s *Server) located(n store.Namespace, bytes int, start time.Time) {
	if bytes > 0 {
		s.served(n, bytes)
		s.metrics.PageTime("out", time.Since(start))
	}
}

// served counts page bytes a client copied itself (from the shared arena).
func (s *Server) served(n store.Namespace, bytes int) {
	if bytes > 0 {
		s.metrics.Transfer(n.ID, "out", bytes)
	}
}

// renewLease extends a read lease of n.
func (s *Server) renewLease(n store.Namespace, lease uint64, ttl time.Duration) (store.Lease, error) {
	return s.cfg.Store.Reader().RenewLease(n.ID, lease, ttl)
}

// releaseLease ends a read lease of n.
func (s *Server) releaseLease(n store.Namespace, lease uint64) error {
	return s.cfg.Store.Reader().ReleaseLease(n.ID, lease)
}

// orphans marks pages a cluster lookup found past a missing page of their
// sequence (store.MarkOrphans), after taking back, and counting as
// retracted, what this node's part of the lookup counted for the first
// counted of them (store.Uncount).
func (s *Server) orphans(n store.Namespace, keys []namespace.Key, counted int) (int, error) {
	if counted > len(keys) {
		return 0, badRequest("counted %d of %d keys", counted, len(keys))
	}
	if counted > 0 {
		tokens, flops, err := s.cfg.Store.Reader().Uncount(n.ID, keys[:counted])
		if err != nil {
			return 0, err
		}
		s.recordRetracted(n.ID, tokens, flops)
	}
	return s.cfg.Store.Reader().MarkOrphans(n.ID, keys)
}
