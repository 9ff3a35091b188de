package client

import (
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/internal/testing/stacks"
	"github.com/stratakv/strata/transport"
)

func testClient(timeout time.Duration) *Client {
	c := &Client{opts: Options{NodeTimeout: timeout}, cuts: map[uint64]func(){}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// TestNodeCtx: the node call's context is bounded by NodeTimeout or the
// caller's shorter deadline, says so through Err before anything made a
// real context, ends with Close, and its real context is registered with
// Close only while the call runs. Time is synctest's: the deadlines pass
// at once.
func TestNodeCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testClient(50 * time.Millisecond)
		defer c.cancel()

		x := c.nodeContext(context.Background())
		dl, ok := x.Deadline()
		if !ok || x.callers || time.Until(dl) > 50*time.Millisecond {
			t.Fatalf("deadline %v (%v), callers %v", dl, ok, x.callers)
		}
		if err := x.Err(); err != nil || !x.lazy() {
			t.Fatalf("a fresh call: %v, lazy %v", err, x.lazy())
		}
		// Past NodeTimeout: synctest's clock runs on while the bubble waits.
		passed, stop := context.WithDeadline(context.Background(), dl)
		<-passed.Done()
		stop()
		if err := x.Err(); !errors.Is(err, context.DeadlineExceeded) || !x.lazy() {
			t.Fatalf("past NodeTimeout: %v, lazy %v", err, x.lazy())
		}
		select {
		case <-x.Done(): // made now, already past its deadline
		case <-time.After(time.Second):
			t.Fatal("Done of a call past its deadline did not close")
		}
		if x.lazy() || len(c.cuts) != 1 {
			t.Fatalf("after Done: lazy %v, %d cuts", x.lazy(), len(c.cuts))
		}
		x.release()
		if len(c.cuts) != 0 {
			t.Fatalf("%d cuts after release", len(c.cuts))
		}

		// The caller's deadline first: it is the call's, and only the
		// caller's ctx says it passed.
		pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer pcancel()
		y := c.nodeContext(pctx)
		if pdl, _ := pctx.Deadline(); !y.callers || !y.deadline.Equal(pdl) {
			t.Fatalf("callers %v, deadline %v, caller's %v", y.callers, y.deadline, pdl)
		}
		<-pctx.Done()
		if err := y.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("past the caller's deadline: %v", err)
		}
		y.release()

		// Close: a call that made no real context sees Canceled; one made
		// afterwards is cut at once.
		z := c.nodeContext(context.Background())
		c.cancel()
		if err := z.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("after Close: %v", err)
		}
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		select {
		case <-z.Done():
		case <-time.After(time.Second):
			t.Fatal("Done after Close did not close")
		}
		z.release()
	})
}

// TestConnPoolInterrupt: Close's interrupt makes a blocked read on a lent
// raw connection fail at once, and leaves idle ones alone.
func TestConnPoolInterrupt(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for range 2 {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			accepted <- nc // never answers
		}
	}()
	var p connPool
	conns := make([]*transport.Conn, 2)
	for i := range conns {
		nc, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { (<-accepted).Close() }()
		conns[i] = transport.NewStreamConn(nc, 0)
		if !p.lend(conns[i]) {
			t.Fatal("lend to an open pool failed")
		}
	}
	p.give(conns[1], false) // idle
	err = stacks.Interrupt(t, "the read waiting, then interrupted", 2*time.Second, func() error {
		_, _, err := conns[0].Recv()
		return err
	}, p.interrupt, "transport.(*Conn).Recv", "client.TestConnPoolInterrupt")
	if err == nil {
		t.Fatal("an interrupted read succeeded")
	}
	p.give(conns[0], true)
	if c, open := p.take(); c != conns[1] || !open {
		t.Fatalf("the idle connection: %v, open %v", c, open)
	}
	p.give(conns[1], false)
	p.close()
	if p.lend(conns[0]) {
		t.Fatal("lend to a closed pool succeeded")
	}
}
