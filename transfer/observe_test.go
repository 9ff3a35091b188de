package transfer

import (
	"testing"
	"time"
)

// TestAckedObserved: Config.Acked sees each attempt a consumer's Ack ends
// loaded, once, with its publish-to-loaded time, and Stats counts its
// bytes; an Ack that ends a drain (an abort) or repeats one is not a load.
// The hook runs without the rooms' lock: it may read the rooms.
func TestAckedObserved(t *testing.T) {
	var seen []Status
	var f fixture
	f = newFixture(t, Config{Acked: func(s Status) {
		if !f.mu.TryLock() { // nothing else runs: only the caller can hold it
			t.Error("Acked is called with the rooms' lock held")
		} else {
			f.mu.Unlock()
		}
		seen = append(seen, s)
	}})

	a := f.openPublish(t, "loaded", 3)
	f.take(t, "loaded", a)
	f.clk.add(1500 * time.Millisecond)
	if err := f.Ack("acme", "loaded", a); err != nil {
		t.Fatal(err)
	}
	if err := f.Ack("acme", "loaded", a); err != nil { // a duplicate: a no-op
		t.Fatal(err)
	}
	b := f.openPublish(t, "aborted", 2)
	f.take(t, "aborted", b)
	if _, err := f.Abort("acme", "aborted", b, ConsumerFailure, "cancelled"); err != nil {
		t.Fatal(err)
	}
	if err := f.Ack("acme", "aborted", b); err != nil { // ends the drain
		t.Fatal(err)
	}

	if len(seen) != 1 {
		t.Fatalf("Acked saw %d attempts, want the one loaded: %+v", len(seen), seen)
	}
	s := seen[0]
	if s.Room != "loaded" || s.Attempt != a || s.State != Acked || s.Bytes != 3*1024 || s.Done.Sub(s.Published) != 1500*time.Millisecond {
		t.Errorf("Acked saw %+v, want room loaded acked, 3 KiB, 1.5s from publish to ack", s)
	}
	if st := f.Stats(); st.Acked != 1 || st.AckedBytes != 3*1024 {
		t.Errorf("stats: %d acked, %d bytes; want 1 and %d", st.Acked, st.AckedBytes, 3*1024)
	}
}
