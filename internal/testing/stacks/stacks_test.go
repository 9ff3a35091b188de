package stacks

import (
	"errors"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
)

// TestBlocked: a goroutine waiting on a channel is found blocked, by its
// own function's name and its test's, and not once it has returned.
func TestBlocked(t *testing.T) {
	if Blocked("stacks.waitOn") {
		t.Fatal("blocked before the goroutine started")
	}
	release, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		waitOn(release)
	}()
	poll.Until(t, 5*time.Second, time.Millisecond, "the goroutine blocked", func() bool {
		return Blocked("stacks.waitOn", "stacks.TestBlocked")
	})
	if g := Find("stacks.waitOn"); len(g) != 1 || g[0].State != "chan receive" {
		t.Fatalf("Find: %+v, want one goroutine in chan receive", g)
	}
	if Blocked("stacks.waitOn", "stacks.TestSomethingElse") {
		t.Fatal("blocked, by a test that did not start it")
	}
	close(release)
	<-done
	poll.Until(t, 5*time.Second, time.Millisecond, "the goroutine gone", func() bool { return len(Find("stacks.waitOn")) == 0 })
}

// TestInterrupt: the interrupt runs once the call is blocked where named,
// and the call's error comes back.
func TestInterrupt(t *testing.T) {
	release := make(chan struct{})
	var blocked bool
	err := Interrupt(t, "the call waiting", 5*time.Second, func() error {
		waitOn(release)
		return errors.New("released")
	}, func() {
		blocked = Blocked("stacks.waitOn", "stacks.TestInterrupt")
		close(release)
	}, "stacks.waitOn", "stacks.TestInterrupt")
	if !blocked || err == nil || err.Error() != "released" {
		t.Fatalf("blocked at the interrupt %t, error %v; want true, released", blocked, err)
	}
}

//go:noinline
func waitOn(c chan struct{}) { <-c }
