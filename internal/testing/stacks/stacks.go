// Package stacks lists a test binary's goroutines from their stacks:
// a test waits with it until a call it started is blocked where the test
// means it to be before acting (a sleep only hopes so), and leaktest finds
// with it the goroutines a package's tests left running.
package stacks

import (
	"runtime"
	"strings"
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
