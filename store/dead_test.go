package store

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// Delete takes a page out of the index at once, leased or not
// (removeLocked); what stays is its entry, marked dead, for the holders of
// a pointer to it that found it before the delete: a lookup that read the
// index and waits for Store.mu, a read that is handing out an earlier page.
// These tests delete a page between those two steps. The page is held by
// an earlier lease, so that its extent (and bytes) stay: a dead page seen
// as live would then read and verify as if it were still published.

// putLeased puts keys (key i with pageData(i)), leases them all and
// returns the lease id.
func putLeased(t *testing.T, s *Store, keys ...namespace.Key) uint64 {
	t.Helper()
	for i, k := range keys {
		put(t, s, k, pageData(i))
	}
	res, err := s.Reader().Lookup(testNS.ID, keys, true, 0)
	if err != nil || res.Lease == nil || res.HitPrefix != len(keys) {
		t.Fatalf("lease %d keys: %+v, %v", len(keys), res, err)
	}
	return res.Lease.ID
}

// TestLookupSkipsPageDeletedMeanwhile: a lookup whose index read found a
// page that is deleted before it takes Store.mu treats the page as a miss:
// it is not present, ends the hit prefix and is not leased.
func TestLookupSkipsPageDeletedMeanwhile(t *testing.T) {
	s, tier := newTestStore(t, 4, nil)
	keys := []namespace.Key{key(0), key(1)}
	held := putLeased(t, s, keys...)
	n := testNSState(t, s)

	// Hold Store.mu so that the lookup stops between its index read
	// (getAll, under shard locks alone) and its section under Store.mu.
	// It counts itself in lookups after the index read, so once the count
	// moves the lookup holds the entries and waits for the lock.
	before := n.lookups.Load()
	s.lock()
	type answer struct {
		res LookupResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.Reader().Lookup(testNS.ID, keys, true, 0)
		done <- answer{res, err}
	}()
	for n.lookups.Load() == before {
		runtime.Gosched()
	}
	e := n.shard(keys[1]).get(keys[1])
	s.removeLocked(e, false) // what Delete does, under the lock the test holds
	s.unlock()
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.res.HitPrefix != 1 || !a.res.Present[0] || a.res.Present[1] {
		t.Fatalf("lookup racing the delete: hit prefix %d, present %v; want 1, [true false]", a.res.HitPrefix, a.res.Present)
	}
	if a.res.Lease == nil || a.res.Lease.Pages != 1 {
		t.Fatalf("lease %+v covers the deleted page", a.res.Lease)
	}
	if err := s.Reader().ReleaseLease(testNS.ID, a.res.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Reader().ReleaseLease(testNS.ID, held); err != nil {
		t.Fatal(err)
	}
	if tier.usedBytes() != pageSize {
		t.Fatalf("%d bytes used after the leases ended, want the live page's %d", tier.usedBytes(), pageSize)
	}
}

// TestReadSkipsPageDeletedMeanwhile: a page deleted while a read hands out
// an earlier page of the same batch is passed as not found, though its
// bytes are still there for the lease that holds it; later lookups and
// reads, with or without that lease, do not see it either.
func TestReadSkipsPageDeletedMeanwhile(t *testing.T) {
	s, tier := newTestStore(t, 4, nil)
	keys := []namespace.Key{key(0), key(1)}
	held := putLeased(t, s, keys...)

	var found []bool
	err := s.Reader().Read(testNS.ID, 0, keys, func(i int, p PageView) error {
		if i == 0 {
			// The read found both pages in the index before it began.
			if n, err := s.Publisher().Delete(testNS.ID, keys[1:]); err != nil || n != 1 {
				t.Errorf("delete: %d, %v", n, err)
			}
		}
		if p.Found && !bytes.Equal(p.Data, pageData(i)) {
			t.Errorf("page %d: wrong bytes", i)
		}
		found = append(found, p.Found)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || !found[0] || found[1] {
		t.Fatalf("read racing the delete found %v, want [true false]", found)
	}
	if tier.usedBytes() != 2*pageSize {
		t.Fatal("the leased page's memory was freed before its lease ended")
	}
	if r, err := s.Reader().Lookup(testNS.ID, keys, false, 0); err != nil || r.HitPrefix != 1 || r.Present[1] {
		t.Fatalf("lookup after the delete: %+v, %v", r, err)
	}
	for _, lease := range []uint64{0, held} {
		got, err := read(t, s, lease, keys...)
		if err != nil || !bytes.Equal(got[0], pageData(0)) || got[1] != nil {
			t.Fatalf("read (lease %d) after the delete: page 1 found %v, err %v", lease, got[1] != nil, err)
		}
	}
	if err := s.Reader().ReleaseLease(testNS.ID, held); err != nil {
		t.Fatal(err)
	}
	if tier.usedBytes() != pageSize {
		t.Fatalf("%d bytes used after the lease ended, want the live page's %d", tier.usedBytes(), pageSize)
	}
}
