package store

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/stratakv/strata/tiers"
)

// Demoting on a graceful stop.
//
// A node that stops on purpose (SIGTERM, a planned restart) would lose
// everything its volatile tiers (gpu, host) hold, though a durable tier
// (ssd) below them could keep it across the restart. DemoteAll copies the
// pages of every volatile tier above the first durable one into it, most
// valuable first (by the tier's eviction worth, taken once at the start),
// each copy verified against the page's checksum and sealed before the
// page moves, exactly as the mover's demotions. It stops at ctx's end (the
// node's drain timeout) or when the durable tier has no room left: it
// never evicts a durable page to make room, since the pages it holds are
// the ones that survive. Leased and pinned pages stay where they are
// (a move would break the lease's promise). It runs beside the mover,
// with buffers of its own.

// DemoteAll moves the pages of the volatile tiers to the first durable
// tier below them, most valuable first, until ctx ends or that tier is
// full; it returns how many pages moved, and ctx's error if it ended the
// work. A store without a durable tier below a volatile one moves nothing.
func (s *Store) DemoteAll(ctx context.Context) (int, error) {
	dst := -1
	for i, t := range s.cfg.Tiers {
		if _, ok := t.(tiers.Durable); ok {
			dst = i
			break
		}
	}
	moved := 0
	var bufs [2][]byte
	for tier := 0; tier < dst; tier++ {
		for _, e := range s.byWorth(tier) {
			if err := ctx.Err(); err != nil {
				return moved, err
			}
			ok, full := s.demoteTo(e, tier, dst, &bufs)
			if full {
				break
			}
			if ok {
				moved++
			}
		}
	}
	return moved, nil
}

// byWorth lists tier's pages, most valuable first.
func (s *Store) byWorth(tier int) []*entry {
	s.lock()
	defer s.unlock()
	q := s.policy.pol[tier]
	type ranked struct {
		e     *entry
		worth float64
	}
	var all []ranked
	for _, e := range s.policy.owner[tier] {
		if e != nil && !e.dead {
			all = append(all, ranked{e, q.Worth(e.h)})
		}
	}
	slices.SortFunc(all, func(a, b ranked) int { return cmp.Compare(b.worth, a.worth) })
	out := make([]*entry, len(all))
	for i, r := range all {
		out[i] = r.e
	}
	return out
}

// demoteTo moves e from tier to dst; full says dst has no room (without
// evicting).
func (s *Store) demoteTo(e *entry, tier, dst int, bufs *[2][]byte) (moved, full bool) {
	s.lock()
	var ext tiers.Extent
	var err error
	for try := 0; ; try++ {
		if e.dead || int(e.tier) != tier || e.pins > 0 { // leased or being read
			s.unlock()
			return false, false
		}
		ext, err = tryAlloc(s.cfg.Tiers[dst], e.size())
		if !errors.Is(err, tiers.ErrPending) || try >= maxRoomWaits {
			break
		}
		s.unlock()
		waitRoom(s.cfg.Tiers[dst:dst+1], e.size())
		s.lock()
	}
	if err != nil {
		s.unlock()
		return false, true
	}
	s.pinLocked(e)
	src, meta := e.extent(), s.sealMetaLocked(e, dst)
	s.unlock()
	err = s.copyVerified(e, tier, src, dst, ext, meta, bufs)
	s.finishMove(e, tier, src, dst, ext, err)
	return err == nil, false
}
