package store

import (
	"fmt"
	"time"

	"github.com/stratakv/strata/namespace"
)

// Pin holds every page of keys against eviction for ttl (0: the default
// lease TTL), for a transfer room (package transfer): every key published,
// or nothing is pinned and the error (ErrNotPresent) names the first
// missing page. A pin is a lease the transfer rooms account for: it is not
// among the tenant's leases (Config.MaxLeasesPerTenant, the Leases quota)
// and its TTL is the rooms' pin TTL, not MaxLeaseTTL, since the rooms
// bound pins by bytes per tenant and per node instead. ReleaseLease ends
// it; a pin past its TTL ends as an expired lease does.
func (r Reader) Pin(id namespace.ID, keys []namespace.Key, ttl time.Duration) (Lease, error) {
	s := r.s
	n, err := s.namespace(id)
	if err != nil {
		return Lease{}, err
	}
	if len(keys) == 0 {
		return Lease{}, fmt.Errorf("pin of no pages: %w", ErrNotPresent)
	}
	found := getEntries(len(keys))
	defer putEntries(found)
	n.getAll(keys, found)
	if ttl <= 0 {
		ttl = s.cfg.DefaultLeaseTTL
	}
	s.lock()
	defer s.unlock()
	for i, e := range found {
		if e == nil || e.dead {
			return Lease{}, fmt.Errorf("page %d of %d (%x): %w", i, len(keys), keys[i][:8], ErrNotPresent)
		}
	}
	l := &lease{ns: n, entries: append([]*entry(nil), found...), expires: time.Now().Add(ttl), pin: true}
	for _, e := range l.entries {
		s.pinLocked(e)
		e.leases++
	}
	leaseID := s.newIDLocked()
	s.leases[leaseID] = l
	n.pins.Add(1)
	return Lease{ID: leaseID, Expires: l.expires, Pages: len(l.entries)}, nil
}
