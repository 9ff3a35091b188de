package store

import (
	"slices"
	"time"

	"github.com/stratakv/strata/namespace"
)

// DropNamespace removes every page of a namespace and forgets it: lookups
// then answer ErrNamespaceNotFound. Leased pages disappear from lookups at
// once; their memory returns when their leases end. It returns how many
// pages it removed.
func (a Admin) DropNamespace(id namespace.ID) (int, error) {
	s := a.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return 0, err
	}
	defer s.unlock()
	n.dropping = true // the namespace goes: no notices for its pages
	removed := 0
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.RLock()
		entries := make([]*entry, 0, sh.m.len())
		for e := range sh.m.all() {
			entries = append(entries, e)
		}
		sh.mu.RUnlock()
		for _, e := range entries {
			s.removeLocked(e, false)
			n.deleted.Add(1)
			removed++
		}
	}
	for wid, r := range s.reservations {
		if r.ns == n {
			s.dropReservationLocked(wid, r, CommitAborted)
		}
	}
	s.clearedLocked(n)
	s.policy.remoteWaiting -= len(n.remoteWaiting)
	s.nsMu.Lock()
	delete(s.ns, id)
	s.nsMu.Unlock()
	return removed, nil
}

// SetTTL makes the janitor remove a namespace's pages that no lookup has
// used for ttl (0: never). Leased pages are kept until their leases end.
func (a Admin) SetTTL(id namespace.ID, ttl time.Duration) error {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return err
	}
	n.ttl.Store(int64(ttl))
	return nil
}

// sweepIdleLocked removes the pages of namespaces with a TTL that have been
// idle longer than it.
func (s *Store) sweepIdleLocked(now time.Time) {
	s.nsMu.RLock()
	var withTTL []*nsState
	for _, n := range s.ns {
		if n.ttl.Load() > 0 {
			withTTL = append(withTTL, n)
		}
	}
	s.nsMu.RUnlock()
	for _, n := range withTTL {
		cutoff := s.clock(now.Add(-time.Duration(n.ttl.Load())))
		for i := range n.shards {
			sh := &n.shards[i]
			sh.mu.RLock()
			var idle []*entry
			for e := range sh.m.all() {
				if e.access < cutoff && e.pins == 0 {
					idle = append(idle, e)
				}
			}
			sh.mu.RUnlock()
			for _, e := range idle {
				s.removeLocked(e, false)
				n.expired.Add(1)
			}
		}
	}
}

// LeaseInfo describes an active lease.
type LeaseInfo struct {
	ID        uint64
	Namespace namespace.ID
	Tenant    string
	Pages     int
	Expires   time.Time
	Pin       bool // a transfer pin (Reader.Pin), not a lookup's lease
}

// Leases lists the active leases, soonest expiry first.
func (a Admin) Leases() []LeaseInfo {
	s := a.s
	s.lock()
	out := make([]LeaseInfo, 0, len(s.leases))
	for id, l := range s.leases {
		out = append(out, LeaseInfo{ID: id, Namespace: l.ns.ID, Tenant: l.ns.Tenant, Pages: len(l.entries), Expires: l.expires, Pin: l.pin})
	}
	s.unlock()
	slices.SortFunc(out, func(a, b LeaseInfo) int { return a.Expires.Compare(b.Expires) })
	return out
}
