package membership

import (
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

// TestNoGoroutineLeak runs a cluster through joins, a metadata update, a
// partition with its heal, a crash and a leave, closes everything, and
// checks that the goroutine count returns to where it was. It is not
// parallel: goroutines are counted process-wide (parallel tests are paused
// while it runs).
func TestNoGoroutineLeak(t *testing.T) {
	before := leaktest.Settle(t)
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
		waitFor(t, a, 10*time.Second, "probes into the partition declaring c dead", func(ms []Member) bool { return stateOf(ms, "c") == Dead })
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
	leaktest.Check(t, before)
}
