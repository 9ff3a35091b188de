// Package stacks lists a test binary's goroutines from their stacks:
// a test waits with it until a call it started is blocked where the test
// means it to be before acting (a sleep only hopes so), and leaktest finds
// with it the goroutines a package's tests left running.
package stacks

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
)

// G is one goroutine as runtime.Stack prints it.
type G struct {
	ID    string // "12"
	State string // "running", "IO wait", "select", "chan receive", ...
	Stack string // the whole block, header line included
}

// Blocked reports whether a goroutine other than the caller's is waiting
// (on I/O, a channel, a lock, a timer: neither running nor runnable) with
// each of fns in its stack. fns are function names as a stack prints them,
// such as "transport.(*RawSocket).Read", or the name of the test whose
// goroutine it is (the stack names the function that started it).
func Blocked(fns ...string) bool {
	for _, g := range Find(fns...) {
		if g.State != "running" && g.State != "runnable" {
			return true
		}
	}
	return false
}

// Interrupt runs call in a goroutine and waits until it is blocked with
// each of fns in its stack, or has returned (what names the wait in a
// failure); then it runs interrupt and returns call's error, failing tb
// when call has not returned within limit. fns are as Blocked's: the
// function call waits in, and the test that defines call (whose name its
// closure's holds).
func Interrupt(tb testing.TB, what string, limit time.Duration, call func() error, interrupt func(), fns ...string) error {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	poll.Until(tb, 5*time.Second, time.Millisecond, what, func() bool { return len(done) > 0 || Blocked(fns...) })
	interrupt()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		tb.Fatalf("%s: still waiting %v after the interrupt", what, limit)
		return nil
	}
}

// Find lists the goroutines but the caller's with each of fns in their
// stack, whatever their state.
func Find(fns ...string) []G {
	var out []G
	for _, g := range All() {
		if holdsAll(g.Stack, fns) {
			out = append(out, g)
		}
	}
	return out
}

func holdsAll(stack string, fns []string) bool {
	for _, f := range fns {
		if !strings.Contains(stack, f) {
			return false
		}
	}
	return true
}

// All lists the running goroutines but the caller's.
func All() []G {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []G
	for i, block := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(block, "\n") // goroutine 12 [IO wait, 2 minutes]:
		id, rest, ok := strings.Cut(strings.TrimPrefix(header, "goroutine "), " [")
		if i == 0 || !ok || !strings.HasPrefix(header, "goroutine ") {
			continue // the first is the caller's
		}
		state, _, _ := strings.Cut(strings.TrimSuffix(rest, "]:"), ",")
		out = append(out, G{ID: id, State: state, Stack: block})
	}
	return out
}
