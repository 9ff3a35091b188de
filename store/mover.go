package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stratakv/strata/tiers"
)

// The mover keeps the faster tiers from filling up by demoting their least
// recently used pages one tier down (docs/design.md §4.5).
//
// A demotion is a verified copy:
//  1. Under Store.mu the victim (the back of its tier's recency list, so
//     unpinned) is pinned and a destination extent allocated in the next
//     tier (dropping that tier's least recently used page if it is full).
//  2. Without the lock, the bytes are checked against the page's checksum,
//     copied, read back from the destination and checked again, and sealed
//     if the destination is durable.
//  3. Under Store.mu the entry switches to the destination only if the
//     mover's pin is the only one: a reader or lease that pinned the page
//     meanwhile may be reading the old extent, so the move is abandoned
//     (the destination freed) rather than pulling it from under them. A
//     page deleted meanwhile is dead: the destination is freed and the
//     last unpin frees the source.
//
// Leased pages are pinned, hence never on a recency list, hence never
// moved.

const (
	// moverLow is the use of a tier below which the mover stops demoting.
	moverLow = 0.90
	// spillBatch is how many pages the mover demotes from a tier after a
	// page had to land below it.
	spillBatch = 16
)

// wakeMover notes that a page landed in tier and wakes the mover to make
// room in the tiers above it.
func (s *Store) wakeMover(tier int) {
	for i := range tier {
		s.spill[i].Store(true)
	}
	select {
	case s.moverWake <- struct{}{}:
	default:
	}
}

// mover runs until Close, demoting when woken and on a slow tick.
func (s *Store) mover() {
	if len(s.cfg.Tiers) < 2 {
		s.wg.Done()
		return
	}
	// Watermarks are also checked without a wake-up.
	s.loop(time.Second, s.moverWake, func(time.Time) {
		for tier := 0; tier < len(s.cfg.Tiers)-1; tier++ {
			s.drain(tier)
		}
	})
}

// drain demotes pages of tier until its use is under the low watermark, or
// nothing more can move. When a page landed below this tier it demotes at
// least spillBatch pages even under the watermark: a tier whose size class
// is full refuses pages before it looks full.
func (s *Store) drain(tier int) {
	t := s.cfg.Tiers[tier]
	budget := 0
	if s.spill[tier].Swap(false) {
		budget = spillBatch
	}
	for ; ; budget-- {
		st := t.Stats()
		if use := float64(st.Used) / float64(max(st.Capacity, 1)); use < moverLow && budget <= 0 {
			return
		}
		select {
		case <-s.stop:
			return
		default:
		}
		if !s.demoteOne(tier) {
			return
		}
	}
}

// demoteOne moves the least recently used page of tier one tier down. It
// reports whether there was anything to try.
func (s *Store) demoteOne(tier int) bool {
	s.lock()
	e := s.victimLocked(tier)
	if e == nil {
		s.unlock()
		return false
	}
	dst := tier + 1
	ext, err := s.allocInLocked(dst, e.size())
	if errors.Is(err, tiers.ErrPending) {
		s.unlock()
		waitRoom(s.cfg.Tiers[dst:dst+1], e.size())
		return true
	}
	if err != nil {
		s.unlock()
		lvl := slog.LevelWarn
		if s.cfg.Tiers[dst].Stats().Fault != tiers.FaultNone {
			lvl = slog.LevelDebug // the tier logged its fault once
		}
		s.log.Log(context.Background(), lvl, "demotion: no room in the next tier", "from", s.cfg.Tiers[tier].Kind(), "err", err)
		return false
	}
	s.pinLocked(e)
	src, meta := e.extent(), s.sealMetaLocked(e, dst)
	s.unlock()

	err = s.copyVerified(e, tier, src, dst, ext, meta, &s.moveBufs)
	s.finishMove(e, tier, src, dst, ext, err)
	return true
}

// finishMove publishes a copy of e from tier (extent src) to dst (extent
// ext) that copyVerified made (err its outcome), or frees the copy when it
// failed or e changed meanwhile (dropped, or pinned by a reader), and
// unpins e.
func (s *Store) finishMove(e *entry, tier int, src tiers.Extent, dst int, ext tiers.Extent, err error) {
	s.lock()
	defer s.unlock()
	switch {
	case err != nil:
		s.log.Error("demotion failed", "key", e.key.String(), "from", s.cfg.Tiers[tier].Kind(), "err", err)
		s.cfg.Tiers[dst].Free(ext)
	case e.dead || e.pins > 1:
		s.cfg.Tiers[dst].Free(ext)
	default:
		e.setExtent(ext)
		s.moveTierLocked(e, dst)
		s.cfg.Tiers[tier].Free(src)
		e.ns.tierPages[tier].Add(-1)
		e.ns.tierPages[dst].Add(1)
		s.demotions.Add(1)
		e.ns.demoted.Add(1)
	}
	s.unpinLocked(e)
}

// allocInLocked allocates in one tier, dropping that tier's least recently
// used unpinned pages while it is full.
func (s *Store) allocInLocked(tier int, size int64) (tiers.Extent, error) {
	for {
		ext, err := tryAlloc(s.cfg.Tiers[tier], size)
		if err == nil || !errors.Is(err, tiers.ErrFull) {
			return ext, err
		}
		victim := s.dropVictimLocked(tier)
		if victim == nil {
			return tiers.Extent{}, err
		}
		s.evictLocked(victim)
	}
}

// copyVerified copies a page between tiers: the source must match the
// page's checksum, and so must the destination read back. A durable
// destination seals the copy with meta (sealMetaLocked).
func (s *Store) copyVerified(e *entry, from int, src tiers.Extent, to int, dst tiers.Extent, meta tiers.PageMeta,
	bufs *[2][]byte) error {
	// Copies out of unmapped tiers go through two buffers the caller keeps
	// (the mover is one goroutine), not a fresh page-sized one per page.
	data, err := s.pageBytes(from, src, bufs[0])
	if err != nil {
		return fmt.Errorf("reading source: %w", err)
	}
	if _, mapped := s.cfg.Tiers[from].(tiers.Mapped); !mapped {
		bufs[0] = data
	}
	want := e.checksum()
	if !bytes.Equal(e.ns.Checksum.Sum(data), want) {
		return fmt.Errorf("source bytes do not match the page checksum")
	}
	dt := s.cfg.Tiers[to]
	if err := dt.WriteAt(dst, data, 0); err != nil {
		return fmt.Errorf("writing to %s: %w", dt.Kind(), err)
	}
	back, err := s.pageBytes(to, dst, bufs[1])
	if err != nil {
		return fmt.Errorf("reading back from %s: %w", dt.Kind(), err)
	}
	if _, mapped := dt.(tiers.Mapped); !mapped {
		bufs[1] = back
	}
	if !bytes.Equal(e.ns.Checksum.Sum(back), want) {
		return fmt.Errorf("copy on %s does not match the page checksum", dt.Kind())
	}
	if d, ok := dt.(tiers.Durable); ok {
		if err := d.Seal(dst, meta); err != nil {
			return fmt.Errorf("sealing on %s: %w", dt.Kind(), err)
		}
	}
	return nil
}

// sealMetaLocked is what a copy of the resident e into tier dst is sealed
// with when dst is durable (the zero PageMeta otherwise): taken under the
// lock, since the copy runs without it and e's parent link may change.
func (s *Store) sealMetaLocked(e *entry, dst int) tiers.PageMeta {
	if _, ok := s.cfg.Tiers[dst].(tiers.Durable); !ok {
		return tiers.PageMeta{}
	}
	parent, hasParent := s.parentKeyLocked(e)
	return tiers.PageMeta{Namespace: e.ns.ID, Key: e.key, Parent: parent, HasParent: hasParent,
		Depth: e.depth, Len: e.size(), ChecksumAlg: uint8(e.ns.Checksum), Checksum: e.checksum(),
		Created: s.timeOf(e.create), Cost: e.cost}
}
