package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/stratakv/strata/tiers"
)

// The reservation share. A reservation holds room in a tier that nothing
// else may use until it is committed, aborted or past its deadline (up to
// Config.MaxReserveTTL), and a tier full of reservations evicts nothing:
// they are not pages. So one tenant's single Reserve of a whole tier used
// to refuse every other tenant's puts ("no space") for as long as it
// chose, unless etcd gave it a reservation quota. Config.ReserveShare
// bounds every tenant's open reservations in each tier instead, whatever
// its quota and wherever its token comes from (the --tenant-token flags,
// etcd, an open node's tenants named by their descriptors), so that the
// default is fair.
//
// Invariants: for each tenant and tier, tenantUse.tierReserved is what
// the tenant's open reservations (slots included) take of that tier, the
// size classes of their extents (checkLineage checks it), and a
// reservation is only opened in a tier where it keeps
// that sum within Store.reserveCap, or where the tenant holds none (so
// that a tier whose share is less than a page is not closed to every
// tenant: a tenant holds at most one page there). A page the share
// keeps out of a tier goes to the next tier that has room within it (as
// it would past a full tier, and evicting nothing in the tier it skips);
// one it keeps out of every tier is Rejected with ErrQuota, like a page
// past the tenant's Quota. The share bounds open reservations only:
// published pages are the quotas' (Quota.Bytes) and eviction's.

// DefaultReserveShare is Config.ReserveShare's default: one tenant's open
// reservations may hold half of each tier. A share s leaves every other
// tenant 1−s of the tier however long the holder's deadlines, and a half
// is the largest share for which that is never less than what the holder
// itself has (1−s ≥ s). A smaller one would guard against several tenants
// filling a tier together (k tenants hold k·s) at the cost of a tenant
// alone on a node: a put over shared memory reserves its whole batch (up
// to the batch limit's pages) at once, and pages past the share are
// refused. Nodes with many untrusted tenants lower it (stratad
// --reserve-share), or give tenants reservation quotas in etcd.
const DefaultReserveShare = 0.5

// Quota bounds what one tenant holds on a node, so that no tenant can deny
// service to another: a put past it is Rejected with ErrQuota (REJECTED,
// reason QUOTA on the wire), and lease requests past it fail with
// ErrQuota. Zero fields: no bound. Config.ReserveShare bounds every
// tenant's open reservations besides: a quota may lower what a tenant
// may reserve, not raise it past the share.
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
func (a Admin) SetQuotas(q map[string]Quota) {
	s := a.s
	c := make(map[string]Quota, len(q))
	for t, v := range q {
		c[t] = v
	}
	s.lock()
	s.quotas = c
	s.unlock()
}

// tenantUse is the store's record of what a tenant holds: its Usage, and
// its open reservations' bytes in each tier, which Config.ReserveShare
// bounds.
type tenantUse struct {
	Usage
	tierReserved [MaxTiers]int64
}

// Usage reports what each tenant with pages, reservations or leases holds.
func (a Admin) Usage() map[string]Usage {
	s := a.s
	s.lock()
	defer s.unlock()
	out := make(map[string]Usage, len(s.usage))
	for t, u := range s.usage {
		v := u.Usage
		v.Leases = s.tenantLeases[t]
		out[t] = v
	}
	for t, l := range s.tenantLeases {
		if _, ok := out[t]; !ok && l > 0 {
			out[t] = Usage{Leases: l}
		}
	}
	return out
}

// usageLocked is tenant's usage record, made when first needed.
func (s *Store) usageLocked(tenant string) *tenantUse {
	u := s.usage[tenant]
	if u == nil {
		u = &tenantUse{}
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

// reservedLocked counts a reservation of size bytes in extent ext of
// tier opening (+1) or closing (-1) against tenant.
func (s *Store) reservedLocked(tenant string, tier int, size int64, ext tiers.Extent, sign int) {
	u := s.usageLocked(tenant)
	u.ReserveBytes += int64(sign) * size
	u.Reservations += sign
	u.tierReserved[tier] += int64(sign) * heldBytes(ext)
}

// heldBytes is what an extent takes of its tier: the size class the
// allocator set aside, at least the bytes asked for.
func heldBytes(ext tiers.Extent) int64 { return max(ext.Cap, ext.Len) }

// allocInShareLocked allocates an extent for one of n's pages (size
// bytes) in tier i when the tenant's share of the tier has room for it, or
// the tenant holds nothing reserved there; over: neither, and nothing is
// allocated. An extent whose size class takes the tenant past its share
// is given back at once, and the class remembered, so that the next page
// is refused before allocating.
func (s *Store) allocInShareLocked(n *nsState, i int, size int64) (ext tiers.Extent, over bool, err error) {
	held := s.usageLocked(n.Tenant).tierReserved[i]
	fits := func(take int64) bool { return held == 0 || held+take <= s.reserveCap[i] }
	if !fits(max(size, n.extCap[i])) {
		return tiers.Extent{}, true, nil
	}
	t := s.cfg.Tiers[i]
	if ext, err = tryAlloc(t, size); err != nil {
		return tiers.Extent{}, false, err
	}
	n.extCap[i] = heldBytes(ext)
	if !fits(n.extCap[i]) {
		t.Free(ext)
		return tiers.Extent{}, true, nil
	}
	return ext, false, nil
}

// shareErrLocked is the error for a page that tenant's share keeps out of
// the tiers named (every tier when none is).
func (s *Store) shareErrLocked(tenant string, which ...int) error {
	if len(which) == 0 {
		for i := range s.cfg.Tiers {
			which = append(which, i)
		}
	}
	held := s.usageLocked(tenant).tierReserved
	each := make([]string, len(which))
	for j, i := range which {
		each[j] = fmt.Sprintf("%s %d of %d bytes", s.cfg.Tiers[i].Kind(), held[i], s.reserveCap[i])
	}
	return fmt.Errorf("tenant %q holds its reservation share (%v of each tier) in open reservations (%s): %w",
		tenant, s.cfg.ReserveShare, strings.Join(each, ", "), ErrQuota)
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
