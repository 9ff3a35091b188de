package client

import (
	"context"
	"sync"
	"time"
)

// A nodeCtx is the context of one node's part of a call (Namespace.call):
// the caller's ctx bounded by NodeTimeout and cut short by Close.
//
// It costs a call nothing until something asks for its Done channel: the
// frame planes never do. They apply its Deadline to their connection and
// the caller's own cancellation with one AfterFunc where the caller's ctx
// can be cancelled at all (bound), and Close interrupts the connections
// they have in use (connPool.interrupt). gRPC, and anything else that
// derives a context from it or waits on Done, gets a real context made at
// that moment with the same deadline and registered with Close (the first
// Done makes it; from then on it answers Done and Err).
type nodeCtx struct {
	parent   context.Context
	c        *Client
	deadline time.Time
	// callers: the deadline is the caller's own (it comes before
	// NodeTimeout), so the caller's ctx ends the call when it passes.
	// Nothing here then ends it earlier: had this timer fired first, the
	// call would end as a node's failure before the caller saw its
	// deadline pass.
	callers bool

	mu     sync.Mutex // guards made, cancel and cut
	made   context.Context
	cancel context.CancelFunc
	cut    uint64
}

var _ context.Context = (*nodeCtx)(nil)

// nodeContext returns the context of a node call under ctx; release ends it.
func (c *Client) nodeContext(ctx context.Context) *nodeCtx {
	x := &nodeCtx{parent: ctx, c: c, deadline: time.Now().Add(c.opts.NodeTimeout)}
	if d, ok := ctx.Deadline(); ok && !d.After(x.deadline) {
		x.deadline, x.callers = d, true
	}
	return x
}

func (x *nodeCtx) Deadline() (time.Time, bool) { return x.deadline, true }

func (x *nodeCtx) Value(key any) any { return x.parent.Value(key) }

// Done makes the real context, once.
func (x *nodeCtx) Done() <-chan struct{} { return x.real().Done() }

// Err is the real context's once made; before that, what it would say: the
// caller's ctx's error, Canceled once the client is closed, or
// DeadlineExceeded past the deadline.
func (x *nodeCtx) Err() error {
	x.mu.Lock()
	made := x.made
	x.mu.Unlock()
	switch {
	case made != nil:
		return made.Err()
	case x.parent.Err() != nil:
		return x.parent.Err()
	case x.c.ctx.Err() != nil:
		return context.Canceled
	case !x.callers && !time.Now().Before(x.deadline):
		return context.DeadlineExceeded
	}
	return nil
}

func (x *nodeCtx) real() context.Context {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.made == nil {
		if x.callers {
			x.made, x.cancel = context.WithCancel(x.parent)
		} else {
			x.made, x.cancel = context.WithDeadline(x.parent, x.deadline)
		}
		x.cut = x.c.cutOnClose(x.cancel)
	}
	return x.made
}

// lazy reports whether no real context was made yet: the frame planes'
// fast path (bound).
func (x *nodeCtx) lazy() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.made == nil
}

// release ends the call: the real context, if one was made, is cancelled
// and forgotten by Close.
func (x *nodeCtx) release() {
	x.mu.Lock()
	cancel, cut := x.cancel, x.cut
	x.mu.Unlock()
	if cancel != nil {
		cancel()
		x.c.uncut(cut)
	}
}
