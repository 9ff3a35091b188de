//go:build linux

package store

import (
	"testing"
)

// TestOpenReservationsSplitsSlots: slots granted ahead and reservations
// for known pages are told apart, per tenant and in the node's total, and
// the slots' bytes per tier are the part of the tier's use they hold;
// the quotas' usage counts both, as before.
func TestOpenReservationsSplitsSlots(t *testing.T) {
	s, h, _ := newHostStore(t, 8)
	slots := grant(t, s, h, 3)
	reserve(t, s, key(1))
	reserve(t, s, key(2))

	want := OpenCounts{Reservations: 2, ReserveBytes: 2 * pageSize, Slots: 3, SlotBytes: 3 * pageSize}
	st := s.Admin().OpenReservations()
	if st.OpenCounts != want || len(st.Tenants) != 1 || st.Tenants[testNS.Tenant] != want {
		t.Fatalf("3 slots and 2 reservations: %+v", st)
	}
	if used := h.Stats().Used; st.TierSlotBytes[0] < 3*pageSize || st.TierSlotBytes[0] >= used || st.TierSlotBytes[1] != 0 {
		t.Fatalf("slot bytes per tier %v, host tier using %d for 3 slots and 2 reservations", st.TierSlotBytes, used)
	}
	if u := s.Admin().Usage()[testNS.Tenant]; u.Reservations != 5 || u.ReserveBytes != 5*pageSize {
		t.Fatalf("the quota's usage %+v, want both kinds counted", u)
	}

	// A slot a page was published in is a slot no more, nor a reservation.
	copy(h.Bytes(slots[0].Ext), pageData(3))
	if res, err := s.Publisher().PutGranted(testNS.ID, slots[0].WriteID, PageSpec{Key: key(3), Size: pageSize},
		testNS.Checksum.Sum(pageData(3))); err != nil || !res.Committed() {
		t.Fatalf("PutGranted: %+v %v", res, err)
	}
	if st := s.Admin().OpenReservations(); st.Slots != 2 || st.Reservations != 2 {
		t.Fatalf("after a slot put: %+v", st.OpenCounts)
	}

	var all []uint64
	s.lock()
	for wid := range s.reservations {
		all = append(all, wid)
	}
	s.unlock()
	if _, err := s.Publisher().Abort(testNS.ID, all); err != nil {
		t.Fatal(err)
	}
	if st := s.Admin().OpenReservations(); st.OpenCounts != (OpenCounts{}) || len(st.Tenants) != 0 || st.TierSlotBytes[0] != 0 {
		t.Fatalf("after aborting all: %+v", st)
	}
}
