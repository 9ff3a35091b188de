package transport

import (
	"sync/atomic"
	"time"
)

// ReadPoll lets the reads of a group of connections (one client's gets on
// the raw data plane) poll their socket for a while before they sleep in
// the runtime's poller.
//
// Why: a get on the raw plane sends its request and waits for the pages,
// which on loopback or a fast LAN start coming back within tens of
// microseconds. Asleep, the waiting thread must be woken by the kernel
// when they land: on a VM an inter-processor interrupt and a scheduler
// pass, which cost a one-worker 256 KiB get about a tenth of its rate
// here (benchmarks/README.md, "Polling for the answer"). Polling keeps the
// thread awake to find the answer itself. Between two polls the thread
// yields its CPU (sched_yield), so a node process on the same host that
// the scheduler put on this CPU still runs.
//
// Polling spends CPU that the read would have left to others, which pays
// only while the answers come quickly and the CPUs have room. So:
//   - only a read that is its group's only one waiting polls;
//   - a window that runs out without bytes (the answers are slow: many
//     callers, or many clients, on busy CPUs) halves how often the group's
//     reads poll, down to one in 2^maxPollLevel, and pollStreak windows in
//     a row that find their bytes double it again, up to every read. So a
//     group keeps polling only where most windows pay.
//
// A deadline is checked when a read sleeps, so a read that polls may end
// up to its window past it.
type ReadPoll struct {
	wait    time.Duration
	waiting atomic.Int32
	// level is the log2 of how many lone reads there are to a poll.
	level atomic.Int32
	// reads counts lone reads, to pick which poll at a level above 0.
	reads atomic.Uint32
	// streak counts the windows in a row that found their bytes.
	streak atomic.Int32
	found  atomic.Uint64 // windows that found their bytes
	spent  atomic.Uint64 // windows that ran out
}

const (
	// maxPollLevel bounds ReadPoll.level: while every window runs out, one
	// lone read in 64 still polls, to notice when answers come quickly
	// again.
	maxPollLevel = 6
	// pollStreak is how many windows in a row must find their bytes for
	// the group to poll twice as often.
	pollStreak = 4
)

// NewReadPoll is a group whose reads poll for up to wait; nil (no polling)
// when wait is not positive.
func NewReadPoll(wait time.Duration) *ReadPoll {
	if wait <= 0 {
		return nil
	}
	return &ReadPoll{wait: wait}
}

// begin counts a read as waiting and says how long it may poll: zero
// unless it is the only one and its turn has come at the group's level.
// end must follow.
func (p *ReadPoll) begin() time.Duration {
	if p.waiting.Add(1) != 1 {
		return 0
	}
	if l := p.level.Load(); l > 0 && p.reads.Add(1)&(1<<l-1) != 0 {
		return 0
	}
	return p.wait
}

// end counts a read begun as done.
func (p *ReadPoll) end() { p.waiting.Add(-1) }

// hit records a window that found its bytes: at pollStreak in a row the
// group polls twice as often (up to every lone read).
func (p *ReadPoll) hit() {
	p.found.Add(1)
	if p.streak.Add(1) < pollStreak {
		return
	}
	p.streak.Store(0)
	if l := p.level.Load(); l > 0 {
		p.level.CompareAndSwap(l, l-1)
	}
}

// miss records a window that ran out: the group polls half as often.
func (p *ReadPoll) miss() {
	p.spent.Add(1)
	p.streak.Store(0)
	if l := p.level.Load(); l < maxPollLevel {
		p.level.CompareAndSwap(l, l+1)
	}
}

// Windows is how many polling windows found their bytes and how many ran
// out.
func (p *ReadPoll) Windows() (found, spent uint64) { return p.found.Load(), p.spent.Load() }
