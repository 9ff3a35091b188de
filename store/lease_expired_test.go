package store

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/namespace"
)

// TestGetExpiredLeaseNoJanitor: a read under a lease past its expiry fails
// with ErrLeaseExpired by the read path's own check (liveLeaseLocked), not
// because the janitor happened to drop the lease first: the janitor runs
// once an hour here, and the test checks that the lease is still held
// when the read comes. Time is synctest's, so the lease expires at once.
func TestGetExpiredLeaseNoJanitor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newTestStore(t, 4, func(c *Config) { c.JanitorInterval = time.Hour })
		put(t, s, key(0), pageData(0))
		res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, true, time.Second)
		if err != nil || res.Lease == nil {
			t.Fatalf("lookup with a lease: %+v, %v", res, err)
		}
		if _, err := read(t, s, res.Lease.ID, key(0)); err != nil {
			t.Fatalf("read under a live lease: %v", err)
		}
		advance(2 * time.Second)
		s.lock()
		_, held := s.leases[res.Lease.ID]
		s.unlock()
		if !held {
			t.Fatal("the janitor dropped the lease: the read path's check is not what is tested")
		}
		got, err := read(t, s, res.Lease.ID, key(0))
		if !errors.Is(err, ErrLeaseExpired) || got[0] != nil {
			t.Fatalf("read under an expired lease: page %v, err %v; want nothing and ErrLeaseExpired", got[0] != nil, err)
		}
	})
}
