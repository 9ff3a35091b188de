// Package leaktest checks that a component's lifecycle leaves no goroutine
// behind: every goroutine has an owner whose Close stops it (STYLE.md).
// Goroutines are counted process-wide, so tests that use it must not run
// in parallel with others.
package leaktest

import (
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// Settle waits up to 5 s for the goroutine count to stop changing and
// returns it: the baseline to check against.
func Settle(t testing.TB) int {
	t.Helper()
	last := -1
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n := runtime.NumGoroutine()
		if n == last {
			return n
		}
		last = n
	}
	return runtime.NumGoroutine()
}

// Check waits up to 5 s for the goroutine count to drop to before, and
// fails the test with a dump of every goroutine if it does not.
func Check(t testing.TB, before int) {
	t.Helper()
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(100 * time.Millisecond)
	}
	if n > before {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatalf("%d goroutines after close, %d before", n, before)
	}
}

// Twice runs lifecycle, lets the process settle, runs it again and checks
// that the second run left no goroutine behind (the first warms up
// process-wide goroutines, such as gRPC's).
func Twice(t testing.TB, lifecycle func()) {
	t.Helper()
	lifecycle()
	before := Settle(t)
	lifecycle()
	Check(t, before)
}
