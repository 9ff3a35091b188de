package store

import (
	"fmt"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// Granted slots (proto/frame SPEC.md §5b): a slot is a reservation made
// before its page is known, space of the namespace's page size in a mapped
// tier (the shared arena) set aside for a same-host writer, which copies a
// page into it and then has PutGranted publish the page there. The
// reservation moves ahead of the put, so a put costs one request.
//
// Invariants: a slot is an ordinary reservation (the tenant's reservation
// quota and its share of the tier count it; the janitor drops it at its
// deadline; Abort drops it) that Commit, Write and DirectWrite do not know
// (reservation.slot), so
// only PutGranted can publish a page in it, and only after Reserve's check
// (the key is not published) and Commit's (size and the checksum of the
// bytes in the tier). Nothing is evicted or demoted for a slot: with no
// page to weigh against a victim (admitLocked), a slot comes from free
// space only, and a writer short of slots reserves its pages instead.

// Granted is a slot Grant set aside.
type Granted struct {
	WriteID  uint64 // names the slot in PutGranted and Abort
	Deadline time.Time
	Ext      tiers.Extent // in the tier Grant was asked for
}

// Grant sets aside up to count slots of namespace id's page size in tier
// mapped, each until ttl from now (0: the configured default, capped as
// for Reserve). It grants fewer, possibly none, when mapped has no free
// extent or the tenant's quota or its reservation share of mapped is
// reached; err says why it stopped short.
// A mapped that is not one of the store's tiers grants nothing.
func (pub Publisher) Grant(id namespace.ID, count int, ttl time.Duration, mapped tiers.Tier) ([]Granted, error) {
	s := pub.s
	n, err := s.namespace(id)
	if err != nil {
		return nil, err
	}
	tier := -1
	for i, t := range s.cfg.Tiers {
		if t == mapped {
			tier = i
		}
	}
	if tier < 0 || count <= 0 {
		return nil, nil
	}
	deadline := time.Now().Add(clampTTL(ttl, s.cfg.ReserveTTL, s.cfg.MaxReserveTTL))
	size := n.PageBytes
	out := make([]Granted, 0, count)
	s.lock()
	defer s.unlock()
	for range count {
		if err := s.reserveQuotaLocked(n.Tenant, size); err != nil {
			return out, err
		}
		ext, over, err := s.allocInShareLocked(n, tier, size)
		if over {
			return out, s.shareErrLocked(n.Tenant, tier)
		}
		if err != nil {
			return out, fmt.Errorf("granting a slot in %s: %w", mapped.Kind(), err)
		}
		wid := s.newIDLocked()
		s.reservations[wid] = &reservation{ns: n, spec: PageSpec{Size: size}, tier: tier, ext: ext,
			deadline: deadline, slot: true, written: size}
		s.reservedLocked(n.Tenant, tier, size, ext, +1)
		out = append(out, Granted{WriteID: wid, Deadline: deadline, Ext: ext})
	}
	return out, nil
}

// PutGranted publishes the page spec, whose bytes the writer copied into
// slot writeID of namespace id, if they match sum. The result is a
// one-call Put's: Exists (Reserve Exists) when the key is published, and
// the slot stays open for another page; otherwise Reserved and the commit
// outcome, the slot used up whatever it is: CommitUnknownWrite for a write
// id that is not an open slot of the namespace (nothing changes),
// CommitExpired past its deadline, CommitSizeMismatch for a size other
// than the slot's, then Commit's (checksum, durability, a concurrent
// writer). The error is the namespace's (unknown, closed store).
func (pub Publisher) PutGranted(id namespace.ID, writeID uint64, spec PageSpec, sum []byte) (PutResult, error) {
	s := pub.s
	n, err := s.namespace(id)
	if err != nil {
		return PutResult{}, err
	}
	used := func(st CommitStatus) (PutResult, error) { return PutResult{Reserve: Reserved, Commit: st}, nil }
	s.lock()
	r := s.reservations[writeID]
	switch {
	case r == nil || r.ns != n || !r.slot:
		s.unlock()
		return used(CommitUnknownWrite)
	case time.Now().After(r.deadline):
		s.dropReservationLocked(writeID, r, CommitExpired)
		s.unlock()
		return used(CommitExpired)
	case spec.Size != r.spec.Size:
		s.dropReservationLocked(writeID, r, CommitSizeMismatch)
		s.unlock()
		return used(CommitSizeMismatch)
	case s.putAgainLocked(n, spec.Key):
		s.unlock()
		return PutResult{Reserve: Exists}, nil
	}
	r.mu.Lock()
	r.spec = spec
	r.mu.Unlock()
	r.slot, r.committing, r.done = false, true, make(chan struct{})
	s.unlock()
	return used(s.finishCommit(writeID, r, spec.Size, sum))
}
