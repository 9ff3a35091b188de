//go:build linux

package store

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// wholeTiers lets one tenant's slots fill a tier, for tests of the tier's
// limits (share_test.go tests the tenant's share).
func wholeTiers(c *Config) { c.ReserveShare = 1 }

// grant grants k slots in h and fails unless all are.
func grant(t *testing.T, s *Store, h *tiers.Host, k int) []Granted {
	t.Helper()
	g, err := s.Publisher().Grant(testNS.ID, k, 0, h)
	if err != nil || len(g) != k {
		t.Fatalf("granting %d slots: %d, %v", k, len(g), err)
	}
	return g
}

// TestGrantedSlots: a page copied into a granted slot is published by
// PutGranted only with the right size and checksum; every outcome but
// Exists uses the slot up (its space returns, a second PutGranted of it is
// an unknown write); Exists leaves it open for another page; a slot is no
// reservation to Commit or Write, and a reservation is no slot.
func TestGrantedSlots(t *testing.T) {
	s, h, _ := newHostStoreWith(t, 8, wholeTiers)
	slots := grant(t, s, h, 5)
	if st := s.Admin().Stats(); st.Reservations != 5 {
		t.Fatalf("%d reservations after granting 5 slots", st.Reservations)
	}
	fill := func(g Granted, i int) []byte {
		copy(h.Bytes(g.Ext), pageData(i))
		return testNS.Checksum.Sum(pageData(i))
	}
	spec := func(i int) PageSpec { return PageSpec{Key: key(i), Size: pageSize} }

	// A slot is invisible to Commit and Write: its page would be a zero key.
	fill(slots[0], 1)
	if st, err := s.Publisher().Commit(testNS.ID, slots[0].WriteID, pageSize, testNS.Checksum.Sum(pageData(1))); err != nil || st != CommitUnknownWrite {
		t.Fatalf("Commit of a slot: %v %v", st, err)
	}
	if err := s.Publisher().Write(testNS.ID, slots[0].WriteID, 0, pageData(1)); !errors.Is(err, ErrUnknownWrite) {
		t.Fatalf("Write to a slot: %v", err)
	}
	if _, _, err := s.Publisher().DirectWrite(testNS.ID, slots[0].WriteID, h); !errors.Is(err, ErrUnknownWrite) {
		t.Fatalf("DirectWrite of a slot: %v", err)
	}

	// Published in its slot, in place.
	sum := fill(slots[0], 1)
	if res, err := s.Publisher().PutGranted(testNS.ID, slots[0].WriteID, spec(1), sum); err != nil || !res.Committed() {
		t.Fatalf("PutGranted: %+v %v", res, err)
	}
	if got, err := read(t, s, 0, key(1)); err != nil || !bytes.Equal(got[0], pageData(1)) {
		t.Fatalf("read back: %v", err)
	}
	locs, err := s.Reader().Extents(testNS.ID, 0, []namespace.Key{key(1)}, h)
	if err != nil || !locs[0].Mapped || locs[0].Ext != slots[0].Ext {
		t.Fatalf("the page is at %+v, its slot was %+v (%v)", locs[0].Ext, slots[0].Ext, err)
	}
	// Used up.
	if res, _ := s.Publisher().PutGranted(testNS.ID, slots[0].WriteID, spec(2), sum); res.Commit != CommitUnknownWrite {
		t.Fatalf("a used slot again: %+v", res)
	}

	// A published key: Exists, and the slot stays for another page.
	fill(slots[1], 1)
	if res, _ := s.Publisher().PutGranted(testNS.ID, slots[1].WriteID, spec(1), sum); res.Reserve != Exists {
		t.Fatalf("a published key: %+v", res)
	}
	if res, _ := s.Publisher().PutGranted(testNS.ID, slots[1].WriteID, spec(2), fill(slots[1], 2)); !res.Committed() {
		t.Fatalf("the slot after Exists: %+v", res)
	}

	// A wrong checksum or size publishes nothing and returns the space.
	fill(slots[2], 3)
	if res, _ := s.Publisher().PutGranted(testNS.ID, slots[2].WriteID, spec(3), testNS.Checksum.Sum(pageData(4))); res.Commit != CommitChecksumMismatch {
		t.Fatalf("a wrong checksum: %+v", res)
	}
	if h.Generation(slots[2].Ext) == slots[2].Ext.Gen {
		t.Fatal("a refused slot kept its extent")
	}
	if res, _ := s.Publisher().PutGranted(testNS.ID, slots[3].WriteID, PageSpec{Key: key(3), Size: pageSize / 2}, fill(slots[3], 3)); res.Commit != CommitSizeMismatch {
		t.Fatalf("a wrong size: %+v", res)
	}
	if got, _ := read(t, s, 0, key(3)); got[0] != nil {
		t.Fatal("a refused page was published")
	}

	// A reservation is no slot; an aborted slot is gone.
	wid := reserve(t, s, key(5))
	if res, _ := s.Publisher().PutGranted(testNS.ID, wid, spec(5), sum); res.Commit != CommitUnknownWrite {
		t.Fatalf("PutGranted of a reservation: %+v", res)
	}
	if k, err := s.Publisher().Abort(testNS.ID, []uint64{wid, slots[4].WriteID}); err != nil || k != 2 {
		t.Fatalf("abort: %d %v", k, err)
	}
	if res, _ := s.Publisher().PutGranted(testNS.ID, slots[4].WriteID, spec(6), fill(slots[4], 6)); res.Commit != CommitUnknownWrite {
		t.Fatalf("an aborted slot: %+v", res)
	}
	if st := s.Admin().Stats(); st.Reservations != 0 || st.Pages != 2 {
		t.Fatalf("at the end: %d reservations, %d pages; want 0, 2", st.Reservations, st.Pages)
	}
}

// TestGrantLimits: slots come from the mapped tier's free space only (no
// page is evicted for one, none lands in another tier), the tenant's
// quota counts them, and the janitor takes back a slot past its deadline.
func TestGrantLimits(t *testing.T) {
	s, h, mem := newHostStoreWith(t, 3, wholeTiers)
	for i := range 2 {
		if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
			t.Fatal(st)
		}
	}
	g, err := s.Publisher().Grant(testNS.ID, 3, 0, h)
	if len(g) != 1 || !errors.Is(err, tiers.ErrFull) {
		t.Fatalf("3 slots asked of a tier with room for 1: %d, %v", len(g), err)
	}
	if st := s.Admin().Stats(); st.Pages != 2 {
		t.Fatalf("granting evicted pages: %d left", st.Pages)
	}
	if m, err := s.Publisher().Grant(testNS.ID, 1, 0, mem); len(m) != 1 || err != nil || m[0].Ext.Len != pageSize {
		t.Fatalf("a slot in the memory tier: %v %v", m, err)
	} else if k, err := s.Publisher().Abort(testNS.ID, []uint64{m[0].WriteID, g[0].WriteID}); k != 2 || err != nil {
		t.Fatal(k, err)
	}

	s.Admin().SetQuotas(map[string]Quota{testNS.Tenant: {Reservations: 1}})
	got, err := s.Publisher().Grant(testNS.ID, 3, 0, h)
	if len(got) != 1 || !errors.Is(err, ErrQuota) {
		t.Fatalf("3 slots for a tenant of 1 reservation: %d, %v", len(got), err)
	}
	s.Admin().SetQuotas(nil)
	if _, err := s.Publisher().Abort(testNS.ID, []uint64{got[0].WriteID}); err != nil {
		t.Fatal(err)
	}

	// Past its deadline a slot is refused (and taken back), and the
	// janitor takes back one no put named.
	short := grant(t, s, h, 1)[0]
	s.lock()
	s.reservations[short.WriteID].deadline = time.Now().Add(-time.Second)
	s.unlock()
	if res, _ := s.Publisher().PutGranted(testNS.ID, short.WriteID, PageSpec{Key: key(7), Size: pageSize}, nil); res.Commit != CommitExpired {
		t.Fatalf("an expired slot: %+v", res)
	}
	idle := grant(t, s, h, 1)[0]
	s.expire(time.Now().Add(time.Hour))
	if st := s.Admin().Stats(); st.Reservations != 0 {
		t.Fatalf("%d reservations after the deadline", st.Reservations)
	}
	if res, _ := s.Publisher().PutGranted(testNS.ID, idle.WriteID, PageSpec{Key: key(7), Size: pageSize}, nil); res.Commit != CommitUnknownWrite {
		t.Fatalf("a slot the janitor took back: %+v", res)
	}
}

// TestPutInPlace: a one-call put's fill writes straight into the
// reservation's memory in a mapped tier, into a buffer the store writes
// elsewhere, and publishes with Put's checks and outcomes.
func TestPutInPlace(t *testing.T) {
	s, h, _ := newHostStore(t, 1)
	var where []byte
	fill := func(i int) func([]byte) error {
		return func(dst []byte) error {
			where = dst
			copy(dst, pageData(i))
			return nil
		}
	}
	sum := func(i int) []byte { return testNS.Checksum.Sum(pageData(i)) }
	spec := func(i int) PageSpec { return PageSpec{Key: key(i), Size: pageSize} }
	if res, err := s.Publisher().PutInPlace(testNS.ID, spec(1), sum(2), 0, fill(1)); err != nil || res.Commit != CommitChecksumMismatch {
		t.Fatalf("a wrong checksum: %+v %v", res, err)
	}
	res, err := s.Publisher().PutInPlace(testNS.ID, spec(1), sum(1), 0, fill(1))
	if err != nil || !res.Committed() {
		t.Fatalf("put: %+v %v", res, err)
	}
	locs, err := s.Reader().Extents(testNS.ID, 0, []namespace.Key{key(1)}, h)
	if err != nil || !locs[0].Mapped || &h.Bytes(locs[0].Ext)[0] != &where[0] {
		t.Fatalf("the page was not filled in place: %+v %v", locs[0], err)
	}
	// The host tier is full: the next page lands in the memory tier
	// (through a buffer), or in the host tier once the mover demoted the
	// first.
	if res, err := s.Publisher().PutInPlace(testNS.ID, spec(2), sum(2), 0, fill(2)); err != nil || !res.Committed() {
		t.Fatalf("put into the memory tier: %+v %v", res, err)
	}
	if got, err := read(t, s, 0, key(1), key(2)); err != nil || !bytes.Equal(got[0], pageData(1)) || !bytes.Equal(got[1], pageData(2)) {
		t.Fatalf("read back: %v", err)
	}
	if res, _ := s.Publisher().PutInPlace(testNS.ID, spec(1), sum(1), 0, fill(1)); res.Reserve != Exists {
		t.Fatalf("again: %+v", res)
	}
	broken := errors.New("stream broke")
	if res, err := s.Publisher().PutInPlace(testNS.ID, spec(3), sum(3), 0, func([]byte) error { return broken }); !errors.Is(err, broken) || res.Commit != CommitAborted {
		t.Fatalf("a failed fill: %+v %v", res, err)
	}
	if st := s.Admin().Stats(); st.Reservations != 0 || st.Pages != 2 {
		t.Fatalf("at the end: %d reservations, %d pages", st.Reservations, st.Pages)
	}
}
