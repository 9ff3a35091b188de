package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
)

// TestPin: a transfer pin holds every page or none, is not among the
// tenant's leases, keeps a deleted page's bytes until released, and its
// release frees them.
func TestPin(t *testing.T) {
	s, mem := newTestStore(t, 8, func(c *Config) { c.MaxLeasesPerTenant = 1 })
	for i := range 3 {
		put(t, s, key(i), pageData(i))
	}
	r := s.Reader()
	if _, err := r.Pin(testNS.ID, []namespace.Key{key(0), key(1), key(5)}, time.Minute); !errors.Is(err, ErrNotPresent) {
		t.Fatalf("pin naming a page never put: %v, want ErrNotPresent", err)
	}
	if got := len(s.Admin().Leases()); got != 0 {
		t.Fatalf("a failed pin left %d leases", got)
	}
	pin, err := r.Pin(testNS.ID, []namespace.Key{key(0), key(1), key(2)}, time.Minute)
	if err != nil || pin.Pages != 3 {
		t.Fatalf("pin of 3 published pages: %+v, %v", pin, err)
	}
	// The tenant's one lease is still free for a lookup.
	res, err := r.Lookup(testNS.ID, []namespace.Key{key(0)}, true, time.Second)
	if err != nil || res.Lease == nil {
		t.Fatalf("a lookup lease beside a pin, with MaxLeasesPerTenant 1: %+v, %v", res, err)
	}
	if ls := s.Admin().Leases(); len(ls) != 2 || ls[0].Pin == ls[1].Pin {
		t.Fatalf("leases listed: %+v, want one pin and one lease", ls)
	}
	// A deleted pinned page keeps its bytes until the pin goes.
	used := mem.Stats().Used
	if n, err := s.Publisher().Delete(testNS.ID, []namespace.Key{key(2)}); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if got := mem.Stats().Used; got != used {
		t.Fatalf("a pinned page's bytes were freed on delete: %d -> %d", used, got)
	}
	if err := r.ReleaseLease(testNS.ID, pin.ID); err != nil {
		t.Fatal(err)
	}
	if got := mem.Stats().Used; got >= used {
		t.Fatalf("releasing the pin did not free the deleted page: %d -> %d", used, got)
	}
}
