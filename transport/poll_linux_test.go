package transport

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/stacks"
)

// TestReadPollLoneRead: only a read that is its group's only one waiting
// may poll; once it ends, the next lone read may again.
func TestReadPollLoneRead(t *testing.T) {
	if p := NewReadPoll(0); p != nil {
		t.Fatalf("NewReadPoll(0) = %v, want nil (no polling)", p)
	}
	p := NewReadPoll(time.Millisecond)
	if got := p.begin(); got != time.Millisecond {
		t.Fatalf("a lone read may poll %v, want 1ms", got)
	}
	if got := p.begin(); got != 0 {
		t.Fatalf("a second read waiting may poll %v, want 0", got)
	}
	p.end()
	p.end()
	if got := p.begin(); got != time.Millisecond {
		t.Fatalf("a lone read after both ended may poll %v, want 1ms", got)
	}
	p.end()
}

// TestReadPollBacksOff: windows that run out make the group's lone reads
// poll less often, to one in 64; streaks of windows that find their bytes
// bring it back to every read.
func TestReadPollBacksOff(t *testing.T) {
	p := NewReadPoll(time.Millisecond)
	polls := func(reads int) int {
		n := 0
		for range reads {
			if p.begin() > 0 {
				n++
			}
			p.end()
		}
		return n
	}
	if n := polls(64); n != 64 {
		t.Fatalf("%d of 64 lone reads polled before any window ran out, want 64", n)
	}
	for range 10 {
		p.miss()
	}
	if n := polls(640); n != 10 {
		t.Fatalf("%d of 640 lone reads polled after 10 windows ran out, want 10 (one in 64)", n)
	}
	for range pollStreak - 1 {
		p.hit()
	}
	if n := polls(640); n != 10 {
		t.Fatalf("%d of 640 lone reads polled after %d windows in a row found their bytes, want 10 (one in 64)",
			n, pollStreak-1)
	}
	p.hit()
	if n := polls(320); n != 10 {
		t.Fatalf("%d of 320 lone reads polled a level down, want 10 (one in 32)", n)
	}
	p.miss()
	for range pollStreak*maxPollLevel - 1 {
		p.hit()
	}
	if n := polls(64); n == 64 {
		t.Fatal("every lone read polled with a streak one window short of the last level")
	}
	p.hit()
	if n := polls(64); n != 64 {
		t.Fatalf("%d of 64 lone reads polled after windows found their bytes, want 64", n)
	}
}

// TestRawIOPolledRead: a read that polls finds bytes that arrive within
// its window (counted by Found); bytes that arrive after the window are
// still read (the read sleeps in the poller once the window is over); and
// a passed deadline still ends a read with os.ErrDeadlineExceeded.
func TestRawIOPolledRead(t *testing.T) {
	a, b := streamPair(t)
	p := NewReadPoll(2 * time.Second)
	b.SetReadPoll(p)
	go func() { // once the read polls
		poll.Within(5*time.Second, time.Millisecond, func() bool {
			return len(stacks.Find("transport.(*RawSocket).Read.func1", "transport.TestRawIOPolledRead")) > 0
		})
		_ = a.raw.Writev([]byte("within"))
	}()
	buf := make([]byte, 6)
	if n, err := b.raw.Read(buf); err != nil || string(buf[:n]) != "within" {
		t.Fatalf("read within the window: %q, %v", buf[:n], err)
	}
	if found, spent := p.Windows(); found != 1 || spent != 0 {
		t.Fatalf("Windows() = %d found, %d spent after a read answered while polling, want 1, 0", found, spent)
	}

	a2, b2 := streamPair(t)
	p2 := NewReadPoll(time.Millisecond)
	b2.SetReadPoll(p2)
	go func() { // once the read's window has run out
		poll.Within(5*time.Second, time.Millisecond, func() bool { _, spent := p2.Windows(); return spent > 0 })
		_ = a2.raw.Writev([]byte("after"))
	}()
	start := time.Now()
	if n, err := b2.raw.Read(buf); err != nil || string(buf[:n]) != "after" {
		t.Fatalf("read after the window: %q, %v", buf[:n], err)
	}
	if found, spent := p2.Windows(); found != 0 || spent != 1 {
		t.Fatalf("Windows() = %d found, %d spent for bytes that came %v after a 1ms window, want 0, 1",
			found, spent, time.Since(start))
	}

	if err := b2.SetDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.raw.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("polled read past the deadline: %v, want %v", err, os.ErrDeadlineExceeded)
	}
}
