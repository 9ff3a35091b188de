package membership

import (
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// TestNoGoroutineLeak runs a cluster through joins, a metadata update, a
// partition with its heal, a crash and a leave, closes everything, and
// checks that the goroutine count returns to where it was. It is not
// parallel: goroutines are counted process-wide (parallel tests are paused
// while it runs).
func TestNoGoroutineLeak(t *testing.T) {
	settle(t, -1)
	before := runtime.NumGoroutine()
	func() {
		nodes := startCluster(t, 3) // closed below too, before counting
		defer func() {
			for _, n := range nodes {
				if err := n.Close(); err != nil {
					t.Errorf("closing %s: %v", n.id, err)
				}
			}
		}()
		a, b, c := nodes[0], nodes[1], nodes[2]
		a.setMeta(func(m *Meta) { m.Tiers[0].Used = 1 })
		if err := a.UpdateMeta(ctxFor(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, b, 5*time.Second, "seeing a's update", func(ms []Member) bool { return ms[0].Meta.Tiers[0].Used == 1 })
		_, unsubscribe := b.Subscribe() // left subscribed: Close ends it
		defer unsubscribe()
		partition(c, a, b)
		time.Sleep(300 * time.Millisecond) // some probes run into the partition
		for _, n := range nodes {
			n.partition.Heal()
		}
		if err := c.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := b.Leave(2 * time.Second); err != nil {
			t.Fatal(err)
		}
		_, _ = b.Subscribe() // on a stopped Membership: closed at once
	}()
	settle(t, before)
}

// settle waits up to 5 s for the goroutine count to drop to want (or, with
// want < 0, to stop changing), then fails with a dump if it did not.
func settle(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	last := -1
	for {
		n := runtime.NumGoroutine()
		if (want >= 0 && n <= want) || (want < 0 && n == last) {
			return
		}
		if time.Now().After(deadline) {
			if want < 0 {
				return
			}
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			t.Fatalf("%d goroutines after close, %d before", n, want)
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
}
