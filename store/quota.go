package store

import (
	"fmt"
	"time"
)

// Quota bounds what one tenant holds on a node, so that no tenant can deny
// service to another: a put past it is Rejected with ErrQuota (REJECTED,
// reason QUOTA on the wire), and lease requests past it fail with
// ErrQuota. Zero fields: no bound.
type Quota struct {
	// Bytes bounds the tenant's published pages plus its open
	// reservations, over every tier of the node.
	Bytes int64
	// ReserveBytes and Reservations bound its open reservations (bytes
	// and count): a reservation holds room until it is committed, aborted
	// or its deadline passes.
	ReserveBytes int64
	Reservations int
	// Leases bounds its active leases (Config.MaxLeasesPerTenant applies
	// besides); MaxLeaseTTL caps the length of each.
	Leases      int
	MaxLeaseTTL time.Duration
}

// Usage is what a tenant holds on a node.
type Usage struct {
	// Bytes is its published pages' bytes, over every tier.
	Bytes int64
	// ReserveBytes and Reservations are its open reservations.
	ReserveBytes int64
	Reservations int
	// Leases is its active leases.
	Leases int
}

// SetQuotas replaces every tenant's quota: tenants not in q have none.
// What a tenant already holds past a lowered quota stays; only new
// reservations and leases are refused.
func (s *Store) SetQuotas(q map[string]Quota) {
	c := make(map[string]Quota, len(q))
	for t, v := range q {
		c[t] = v
	}
	s.lock()
	s.quotas = c
	s.unlock()
}

// Usage reports what each tenant with pages, reservations or leases holds.
func (s *Store) Usage() map[string]Usage {
	s.lock()
	defer s.unlock()
	out := make(map[string]Usage, len(s.usage))
	for t, u := range s.usage {
		u.Leases = s.tenantLeases[t]
		out[t] = *u
	}
	for t, l := range s.tenantLeases {
		if _, ok := out[t]; !ok && l > 0 {
			out[t] = Usage{Leases: l}
		}
	}
	return out
}

// usageLocked is tenant's usage record, made when first needed.
func (s *Store) usageLocked(tenant string) *Usage {
	u := s.usage[tenant]
	if u == nil {
		u = &Usage{}
		s.usage[tenant] = u
	}
	return u
}

// reserveQuotaLocked checks that tenant may open one more reservation of
// size bytes.
func (s *Store) reserveQuotaLocked(tenant string, size int64) error {
	q, ok := s.quotas[tenant]
	if !ok {
		return nil
	}
	u := s.usageLocked(tenant)
	switch {
	case q.Bytes > 0 && u.Bytes+u.ReserveBytes+size > q.Bytes:
		return fmt.Errorf("tenant %q holds %d bytes of its %d: %w", tenant, u.Bytes+u.ReserveBytes, q.Bytes, ErrQuota)
	case q.ReserveBytes > 0 && u.ReserveBytes+size > q.ReserveBytes:
		return fmt.Errorf("tenant %q has %d bytes reserved of its %d: %w", tenant, u.ReserveBytes, q.ReserveBytes, ErrQuota)
	case q.Reservations > 0 && u.Reservations >= q.Reservations:
		return fmt.Errorf("tenant %q has %d reservations open, its quota: %w", tenant, u.Reservations, ErrQuota)
	}
	return nil
}

// reservedLocked counts a reservation of size bytes opening (+1) or
// closing (-1) against tenant.
func (s *Store) reservedLocked(tenant string, size int64, sign int) {
	u := s.usageLocked(tenant)
	u.ReserveBytes += int64(sign) * size
	u.Reservations += sign
}

// leaseQuotaLocked checks that tenant may take one more lease and returns
// the longest TTL it may have (0: the store's cap).
func (s *Store) leaseQuotaLocked(tenant string) (time.Duration, error) {
	q, ok := s.quotas[tenant]
	if !ok {
		return 0, nil
	}
	if q.Leases > 0 && s.tenantLeases[tenant] >= q.Leases {
		return 0, fmt.Errorf("tenant %q holds %d leases, its quota: %w", tenant, s.tenantLeases[tenant], ErrQuota)
	}
	return q.MaxLeaseTTL, nil
}
