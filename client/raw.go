package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/internal/dial"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// The raw tcp data plane (the frame protocol, proto/frame/SPEC.md, over
// transport.NewStreamConn): for a node that
// advertises it (the frame.AddrHeader header of its OpenNamespace answer),
// Get and Put move page bytes over TCP connections (TLS ones with
// Options.CA/Cert/Key, as gRPC) in the shm framing instead of gRPC streams. A Get is one round trip whose answer
// carries each page inline, read from the socket straight into the
// caller's buffer and verified against its checksum. A Lookup is one
// frame each way. A Put of up to oneCallMaxPages pages of up to
// frame.MaxWriteChunk bytes is one round trip (a Put frame per page, in one
// write; putRawOneCall); a larger one
// is Reserve, then the bytes of the pages reserved and the Commit in one
// write, then the commit's answer.
//
// Shared memory, when it works, comes first; the raw plane serves the rest
// (other hosts, and pages of a shm node outside its host arena). gRPC stays
// the control path (Open, leases, Delete) and the fallback:
// Options.NoRaw keeps data on it, and a node that does not advertise the
// plane, a connection that cannot be made or a handshake that fails (then
// retried at most every retryAfter) leaves calls on gRPC silently. A
// connection that fails after a request was sent fails that call (its
// pages are reported not found, never partial bytes as found; a Lookup is
// asked again over gRPC) and is closed; the next call dials a new one.

// rawSession is the connections to one node's raw data plane.
type rawSession struct {
	addr   string
	token  string
	nodeID string
	tls    *tls.Config         // nil: plaintext
	poll   *transport.ReadPoll // the client's, for gets; nil: reads do not poll
	ids    atomic.Uint64
	// failed is when a dial last failed (unix nanoseconds); 0: never.
	failed atomic.Int64
	// version is the protocol version the node last welcomed us with (0:
	// none yet), the one the next dial says hello with (helloVersions).
	version atomic.Uint32
	// oneCall and twoPhase count put batches by how they went; lookups
	// counts the lookups answered on the plane.
	oneCall, twoPhase, lookups atomic.Int64

	pool connPool
}

// rawPoolIdle is how long a raw connection stays pooled: less than the
// node's idle timeout (2 minutes by default, server.RawConfig), so that a
// call does not find its connection closed under it.
const rawPoolIdle = 30 * time.Second

// rawAddr resolves an advertised address against the address the client
// dialed: an unspecified or missing host means the gRPC host.
func rawAddr(advertised, grpcAddr string) string {
	host, port, err := net.SplitHostPort(advertised)
	if err != nil || port == "" || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, _, err := net.SplitHostPort(grpcAddr); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// startRaw records the node's advertised raw address after an Open.
// Nothing is dialed until a call needs a connection.
func (c *nodeClient) startRaw(advertised []string, nodeID string) {
	if c.rawOverride != "" {
		advertised = []string{c.rawOverride}
	}
	if c.noRaw || len(advertised) == 0 {
		return
	}
	addr := rawAddr(advertised[0], c.addr)
	if addr == "" {
		return
	}
	var tc *tls.Config
	if c.dialOpts.TLSEnabled() {
		var err error
		if tc, err = dial.TLSConfig(addr, c.dialOpts); err != nil {
			return // the gRPC connection, made with the same files, carries the data
		}
	}
	c.rawMu.Lock()
	defer c.rawMu.Unlock()
	if s := c.raw.Load(); s != nil && s.addr == addr && s.nodeID == nodeID {
		return
	}
	if old := c.raw.Swap(&rawSession{addr: addr, token: c.token, nodeID: nodeID, tls: tc, poll: c.readPoll,
		pool: connPool{maxIdle: rawPoolIdle}}); old != nil {
		old.close()
	}
}

// interruptRaw interrupts the calls in flight on the raw session, if any
// (Client.Close).
func (c *nodeClient) interruptRaw() {
	if s := c.raw.Load(); s != nil {
		s.pool.interrupt()
	}
}

// closeRaw closes the session, if any.
func (c *nodeClient) closeRaw() {
	c.rawMu.Lock()
	s := c.raw.Swap(nil)
	c.rawMu.Unlock()
	if s != nil {
		s.close()
	}
}

// rawActive reports whether the node advertised the raw tcp data plane and
// the last attempt to connect to it did not fail (it tries one now).
func (c *nodeClient) rawActive() bool {
	s := c.raw.Load()
	if s == nil {
		return false
	}
	if s.usable() {
		c, err := s.acquire()
		if err == nil {
			s.finish(c, false)
		}
	}
	return s.usable()
}

func (s *rawSession) usable() bool {
	f := s.failed.Load()
	return f == 0 || time.Since(time.Unix(0, f)) >= retryAfter
}

// acquire returns an idle connection or dials one.
func (s *rawSession) acquire() (*transport.Conn, error) {
	c, open := s.pool.take()
	if !open {
		return nil, transport.ErrClosed
	}
	if c != nil {
		return c, nil
	}
	c, err := s.dial()
	if err != nil {
		s.failed.Store(time.Now().UnixNano())
		return nil, err
	}
	s.failed.Store(0)
	if !s.pool.lend(c) {
		return nil, transport.ErrClosed
	}
	return c, nil
}

// dial connects and authenticates one connection, in the newest version
// the node speaks; the Welcome must name the node the namespace was opened
// on.
func (s *rawSession) dial() (c *transport.Conn, err error) {
	err = helloVersions(&s.version, func(version uint16) error {
		c, err = s.dialVersion(version)
		return err
	})
	return c, err
}

// dialVersion connects and says hello with version.
func (s *rawSession) dialVersion(version uint16) (*transport.Conn, error) {
	nc, err := net.DialTimeout("tcp", s.addr, handshakeLimit)
	if err != nil {
		return nil, err
	}
	if s.tls != nil {
		tc := tls.Client(transport.UnderTLS(nc), s.tls)
		_ = tc.SetDeadline(time.Now().Add(handshakeLimit))
		if err := tc.Handshake(); err != nil {
			nc.Close()
			return nil, fmt.Errorf("raw tls handshake with %s: %w", s.addr, err)
		}
		nc = tc
	}
	c := transport.NewStreamConn(nc, 0)
	w, _, err := hello(c, nc, s.token, version, handshakeLimit, func() (frame.Message, []int, error) {
		_, m, err := c.Recv()
		return m, nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("raw handshake: %w", err)
	}
	if w.NodeID != s.nodeID {
		c.Close()
		return nil, fmt.Errorf("raw address %s serves node %q, not %q", s.addr, w.NodeID, s.nodeID)
	}
	if w.Version != version {
		c.Close()
		return nil, fmt.Errorf("raw handshake: welcome of protocol %d to a hello of %d: %w", w.Version, version, ErrProtocol)
	}
	return c, nil
}

// finish returns c to the pool, or closes it when it failed.
func (s *rawSession) finish(c *transport.Conn, failed bool) { s.pool.give(c, failed) }

// bound applies ctx to c: its deadline, and its cancellation (which
// interrupts a blocked read or write). The returned func undoes both.
//
// A ctx that can end gets no deadline on c: its deadline ends it, and the
// cancellation then interrupts c at that moment all the same, so c keeps
// the zero deadline (Conn.SetDeadline skips an unchanged one) instead of
// moving it, a runtime timer update, on every call.
//
// A node call's context (nodeCtx) puts its deadline on c and leaves Close
// to interrupt c itself (connPool.interrupt): only the caller's ctx, when
// it can be cancelled, costs an AfterFunc.
func bound(ctx context.Context, c *transport.Conn) (done func() bool) {
	if x, ok := ctx.(*nodeCtx); ok && x.lazy() {
		if x.c.ctx.Err() != nil {
			// Close interrupted the lent connections before c was lent.
			_ = c.SetDeadline(time.Unix(1, 0))
			return alwaysDone
		}
		if !x.callers {
			_ = c.SetDeadline(x.deadline)
			if x.parent.Done() == nil {
				return alwaysDone
			}
			return interruptOn(x.parent, c)
		}
		ctx = x.parent // the caller's deadline is the call's: its ctx ends the call
	}
	if ctx.Done() == nil {
		dl, _ := ctx.Deadline() // zero: none
		_ = c.SetDeadline(dl)
		return alwaysDone
	}
	_ = c.SetDeadline(time.Time{})
	return interruptOn(ctx, c)
}

// interruptOn interrupts c's blocked read or write when ctx ends. A
// connection whose deadline this spoils is closed, not reused.
func interruptOn(ctx context.Context, c *transport.Conn) (done func() bool) {
	nc := c.Net()
	return context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
}

func alwaysDone() bool { return true }

func (s *rawSession) close() { s.pool.close() }

// rawFor is the raw session for this namespace's node, or nil.
func (n *nodeNS) rawFor() *rawSession {
	s := n.c.raw.Load()
	if s == nil || s.nodeID != n.nodeID || !s.usable() {
		return nil
	}
	return s
}
