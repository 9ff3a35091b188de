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
	if !Within(within, interval, cond) {
		tb.Fatalf("%s: not within %v", what, within)
	}
}

// Within checks cond every interval until it holds or within has passed,
// and says whether it held: for a caller that must undo something, or say
// more than Until does, before it fails, or that reports a timeout as a
// figure rather than a failure.
func Within(within, interval time.Duration, cond func() bool) bool {
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-timeout.C:
			return cond() // a last look, at the deadline
		case <-tick.C:
		}
	}
	return true
}

// NoError calls try every interval until it returns nil, and fails tb
// (saying what was awaited and try's last error) once within has passed
// without it.
func NoError(tb testing.TB, within, interval time.Duration, what string, try func() error) {
	tb.Helper()
	var err error
	if !Within(within, interval, func() bool { err = try(); return err == nil }) {
		tb.Fatalf("%s: not within %v: %v", what, within, err)
	}
}
