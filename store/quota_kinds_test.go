package store

import (
	"errors"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// TestQuotaKinds: each bound on what a tenant holds (quota.go) lets the
// tenant up to it and refuses the first thing past it with ErrQuota: the
// byte quota (published pages and open reservations together), the
// reservation quotas (bytes and count), the lease quota, and the
// reservation share of a tier, which applies without any quota.
func TestQuotaKinds(t *testing.T) {
	const tierPages = 16
	for _, c := range []struct {
		name  string
		quota Quota
		share float64 // ReserveShare; 0: the whole tier (1)
		// fill does what the bound allows (under: no error expected);
		// over does the one thing past it and returns its error.
		fill, over func(t *testing.T, s *Store) error
	}{
		{
			name:  "bytes",
			quota: Quota{Bytes: 3 * pageSize},
			fill: func(t *testing.T, s *Store) error {
				for i := range 2 { // published pages count
					if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
						t.Fatalf("put %d under the byte quota: %v", i, st)
					}
				}
				return reserveErr(s, specs(2, 1)) // and open reservations
			},
			over: func(t *testing.T, s *Store) error { return reserveErr(s, specs(3, 1)) },
		},
		{
			name:  "reserve bytes",
			quota: Quota{ReserveBytes: 2 * pageSize},
			fill:  func(t *testing.T, s *Store) error { return reserveErr(s, specs(0, 2)) },
			over:  func(t *testing.T, s *Store) error { return reserveErr(s, specs(2, 1)) },
		},
		{
			name:  "reservations",
			quota: Quota{Reservations: 3},
			fill:  func(t *testing.T, s *Store) error { return reserveErr(s, specs(0, 3)) },
			over:  func(t *testing.T, s *Store) error { return reserveErr(s, specs(3, 1)) },
		},
		{
			name:  "leases",
			quota: Quota{Leases: 2},
			fill: func(t *testing.T, s *Store) error {
				put(t, s, key(0), pageData(0))
				for range 2 {
					if err := leaseErr(s); err != nil {
						return err
					}
				}
				return nil
			},
			over: func(t *testing.T, s *Store) error { return leaseErr(s) },
		},
		{
			name:  "reservation share",
			share: 0.25, // 4 pages of 16
			fill:  func(t *testing.T, s *Store) error { return reserveErr(s, specs(0, 4)) },
			over:  func(t *testing.T, s *Store) error { return reserveErr(s, specs(4, 1)) },
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newTestStore(t, tierPages, func(cfg *Config) {
				cfg.ReserveShare = 1
				if c.share > 0 {
					cfg.ReserveShare = c.share
				}
			})
			if c.quota != (Quota{}) {
				s.Admin().SetQuotas(map[string]Quota{testNS.Tenant: c.quota})
			}
			if err := c.fill(t, s); err != nil {
				t.Fatalf("up to the bound: %v", err)
			}
			err := c.over(t, s)
			if !errors.Is(err, ErrQuota) {
				t.Fatalf("past the bound: %v, want ErrQuota", err)
			}
			t.Logf("past the bound: %v", err)
		})
	}
}

// reserveErr reserves pages of testNS and returns the first page's error:
// the call's, or a rejection's (nil when all are reserved).
func reserveErr(s *Store, pages []PageSpec) error {
	res, err := s.Publisher().Reserve(testNS.ID, pages, 0)
	if err != nil {
		return err
	}
	if reserved, _, why := statuses(res); reserved != len(pages) {
		if why == nil {
			why = errors.New("pages neither reserved nor rejected")
		}
		return why
	}
	return nil
}

// leaseErr takes a lease on testNS's page key(0).
func leaseErr(s *Store) error {
	res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, true, 0)
	if err == nil && res.Lease == nil {
		err = errors.New("no lease on a present page")
	}
	return err
}
