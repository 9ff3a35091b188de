// Package poll waits in tests for a condition that another goroutine or
// process brings about, failing the test when it does not come in time.
package poll

import (
	"testing"
	"time"
)

// Until checks cond every interval until it holds, and fails tb (saying
// what was awaited) once within has passed without it.
func Until(tb testing.TB, within, interval time.Duration, what string, cond func() bool) {
	tb.Helper()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-timeout.C:
			tb.Fatalf("%s: not within %v", what, within)
		case <-tick.C:
		}
	}
}
