package store

import (
	"fmt"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// Extents for same-host readers and writers (docs/design.md §4.3, §4.4): a client
// that maps a tier's memory reads a page, or fills a reservation, in place
// instead of streaming its bytes. A page's extent is reported as it is now;
// what keeps a reader from using reclaimed bytes is the extent generation it
// re-checks after copying (pages under the reader's lease are pinned, so
// for them the check never fails). A reservation's extent is handed out
// only while the reservation is open, and Commit still checks size and
// checksum over the tier's bytes before anything is published.

// PageExtent says where a page lies.
type PageExtent struct {
	// Found: the page is published and covered by the lease.
	Found bool
	// Mapped: the page lies in the tier the caller named, at Ext.
	Mapped   bool
	Ext      tiers.Extent
	Checksum []byte
}

// Extents reports where each published page among keys lies (every
// present key, not only the hit prefix; no lookup is counted); Mapped is
// set for pages in tier mapped. With callerLease non-zero that lease must
// be live, as for Read. Nothing is pinned beyond what callerLease covers: a
// page may be reclaimed once Extents returns, so a reader copying from the
// extent must re-check its generation afterwards and treat a change as a
// miss (tiers.Host's generation words make that check possible from
// another process).
func (r Reader) Extents(id namespace.ID, callerLease uint64, keys []namespace.Key, mapped tiers.Tier) ([]PageExtent, error) {
	s := r.s
	n, err := s.namespace(id)
	if err != nil {
		return nil, err
	}
	found := make([]*entry, len(keys))
	n.getAll(keys, found)
	out := make([]PageExtent, len(keys))
	s.lock()
	defer s.unlock()
	if callerLease != 0 {
		if _, err := s.liveLeaseLocked(n, callerLease); err != nil {
			return nil, err
		}
	}
	for i, e := range found {
		if e == nil || e.dead {
			continue
		}
		out[i] = PageExtent{Found: true, Mapped: s.cfg.Tiers[e.tier] == mapped, Ext: e.extent(), Checksum: e.checksum()}
	}
	return out, nil
}

// DirectWrite opens reservation writeID of namespace id for a writer that
// fills it in place: when the reservation lies in tier mapped it returns the
// extent and records the whole page as written (Commit verifies the bytes);
// otherwise ok is false and nothing changes (the writer sends the bytes with
// Write). It fails like Write for unknown, expired or closed reservations.
func (pub Publisher) DirectWrite(id namespace.ID, writeID uint64, mapped tiers.Tier) (ext tiers.Extent, ok bool, err error) {
	s := pub.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return tiers.Extent{}, false, err
	}
	r, err := s.openReservationLocked(n, writeID)
	s.unlock()
	if err != nil {
		return tiers.Extent{}, false, err
	}
	if s.cfg.Tiers[r.tier] != mapped {
		return tiers.Extent{}, false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return tiers.Extent{}, false, fmt.Errorf("write %d: %w", writeID, ErrWriteClosed)
	}
	r.written = r.spec.Size
	r.summed = -1 // written by the client, through its mapping
	return r.ext, true, nil
}
