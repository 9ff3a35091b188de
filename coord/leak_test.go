package coord

import (
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// TestNoGoroutineLeak runs a one-node coordination lifecycle (elected,
// publishing, applying) twice and checks that the second leaves no
// goroutine behind. It is not parallel: goroutines are counted
// process-wide.
func TestNoGoroutineLeak(t *testing.T) {
	e := startEtcd(t)
	lifecycle := func() {
		n := startNode(t, "solo", e.Endpoints(), nil, 1<<20, 10, 1<<20)
		allCoordinated(t, []*testNode{n}, 0)
		n.close()
	}
	lifecycle()
	settle(t, -1)
	before := runtime.NumGoroutine()
	lifecycle()
	settle(t, before)
}

// settle waits up to 5s for the goroutine count to drop to want (or, with
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
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			t.Fatalf("%d goroutines after close, %d before", n, want)
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
}
