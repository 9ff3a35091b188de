package store

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/namespace"
)

func TestDropNamespace(t *testing.T) {
	s, tier := newTestStore(t, 8, nil)
	put(t, s, key(0), pageData(0))
	put(t, s, key(1), pageData(1))
	res, _ := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, true, 0)
	reserve(t, s, key(2))
	n, err := s.Admin().DropNamespace(testNS.ID)
	if err != nil || n != 2 {
		t.Fatalf("dropped %d, %v", n, err)
	}
	if _, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, false, 0); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("lookup after drop: %v", err)
	}
	if tier.usedBytes() != pageSize {
		t.Fatalf("%d bytes used: want only the leased page's", tier.usedBytes())
	}
	if err := s.Reader().ReleaseLease(testNS.ID, res.Lease.ID); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("release after drop: %v", err)
	}
	// The lease still expires and returns the memory.
	s.expire(time.Now().Add(time.Hour))
	if tier.usedBytes() != 0 {
		t.Fatalf("%d bytes used after the lease ended", tier.usedBytes())
	}
}

func TestTTLRemovesIdlePages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newTestStore(t, 8, nil)
		put(t, s, key(0), pageData(0))
		put(t, s, key(1), pageData(1))
		if err := s.Admin().SetTTL(testNS.ID, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		for range 15 { // key 0 stays in use, key 1 goes idle
			advance(time.Second)
			s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, false, 0)
		}
		synctest.Wait()
		res, _ := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0), key(1)}, false, 0)
		if !res.Present[0] || res.Present[1] {
			t.Fatalf("present %v: want the used page kept and the idle one gone", res.Present)
		}
		if st, _ := s.Admin().NamespaceStats(testNS.ID); st.Expired != 1 {
			t.Fatalf("expired count %d", st.Expired)
		}
	})
}
