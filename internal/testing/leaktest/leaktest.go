// Package leaktest checks that goroutines have owners whose Close stops
// them (STYLE.md). Twice checks one component's lifecycle by counting
// goroutines process-wide, so tests that use it must not run in parallel
// with others. Main (as a package's TestMain) checks a whole package's
// run: every goroutine its tests started must be gone after the last one.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/stacks"
)

// Settle waits up to 5 s for the goroutine count to stop changing and
// returns it: the baseline to check against.
func Settle(t testing.TB) int {
	t.Helper()
	last := -1
	poll.Within(5*time.Second, 100*time.Millisecond, func() bool {
		n := runtime.NumGoroutine()
		still := n == last
		last = n
		return still
	})
	return runtime.NumGoroutine()
}

// Check waits up to 5 s for the goroutine count to drop to before, and
// fails the test with a dump of every goroutine if it does not.
func Check(t testing.TB, before int) {
	t.Helper()
	n := runtime.NumGoroutine()
	if !poll.Within(5*time.Second, 100*time.Millisecond, func() bool { n = runtime.NumGoroutine(); return n <= before }) {
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

// Baseline is the set of goroutines running before a package's tests.
type Baseline map[string]bool

// Snapshot records the goroutines running now.
func Snapshot() Baseline {
	b := Baseline{}
	for _, g := range stacks.All() {
		b[g.ID] = true
	}
	return b
}

// Main runs a package's tests and exits; the run fails if goroutines they
// started are still running 10 s after the last test (a package without a
// TestMain of its own uses it as its TestMain).
func Main(m *testing.M) {
	b := Snapshot()
	os.Exit(b.Verify(m.Run()))
}

// Verify returns code, or 1 when goroutines started since the snapshot
// (other than the process-wide ones of ignored) are still running after
// up to 10 s; it prints their stacks. A failed run's code is returned
// unchecked: its goroutines may be stuck because it failed.
func (b Baseline) Verify(code int) int {
	if code != 0 {
		return code
	}
	var left []stacks.G
	if poll.Within(10*time.Second, 100*time.Millisecond, func() bool {
		left = left[:0]
		for _, g := range stacks.All() {
			if !b[g.ID] && !processWide(g.Stack) {
				left = append(left, g)
			}
		}
		return len(left) == 0
	}) {
		return 0
	}
	fmt.Fprintf(os.Stderr, "leaktest: %d goroutines the tests started are still running:\n", len(left))
	for _, g := range left {
		fmt.Fprintf(os.Stderr, "\n%s\n", g.Stack)
	}
	return 1
}

// ignored are functions whose goroutines live as long as the process, by
// their library's design, once something has started them.
var ignored = []string{
	"testing.(*M).", // the test binary's own
	"testing.runTests",
	"os/signal.signal_recv", // started by the first signal.Notify
}

func processWide(stack string) bool {
	for _, f := range ignored {
		if strings.Contains(stack, f) {
			return true
		}
	}
	return false
}
