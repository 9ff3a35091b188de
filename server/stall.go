package server

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/peer"
)

// Stalled streams. A gRPC Get whose client stops reading blocks in
// SendMsg once the stream's flow-control window is full, and nothing but
// the end of the stream's context unblocks it; a handler cannot end its
// own stream's context. So the server tracks the connections it accepted
// (Track) and a Get that has not finished sending one page within
// Config.StallTimeout closes its client's connection: the stream ends,
// the handler returns and the page it held pinned is released. The client
// (a well-behaved one reads as fast as pages come) dials again. A Put or
// Write stream whose client sends nothing for Config.StallTimeout is cut
// the same way (a receive blocks as a send does).

// Track wraps l so that the server can cut the connections it accepts; the
// gRPC server should Serve the returned listener.
func (s *Server) Track(l net.Listener) net.Listener {
	return &trackedListener{Listener: l, conns: &s.conns}
}

// connSet is the accepted connections, by remote address.
type connSet struct {
	mu sync.Mutex
	m  map[string]net.Conn // guarded by mu
}

type trackedListener struct {
	net.Listener
	conns *connSet
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, conns: l.conns, key: c.RemoteAddr().String()}
	l.conns.mu.Lock()
	if l.conns.m == nil {
		l.conns.m = map[string]net.Conn{}
	}
	l.conns.m[tc.key] = tc
	l.conns.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	conns *connSet
	key   string
	once  sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.conns.mu.Lock()
		if c.conns.m[c.key] == c {
			delete(c.conns.m, c.key)
		}
		c.conns.mu.Unlock()
	})
	return c.Conn.Close()
}

// cut closes the connection of ctx's peer, if the server tracks it.
func (s *Server) cut(ctx context.Context) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return
	}
	s.conns.mu.Lock()
	c := s.conns.m[p.Addr.String()]
	s.conns.mu.Unlock()
	if c != nil {
		s.log.Warn("cutting a stalled stream's connection", "peer", p.Addr.String(), "after", s.cfg.StallTimeout)
		_ = c.Close()
	}
}

// stallGuard arms a timer per page sent (or message received): one not
// sent (received) within StallTimeout after arm cuts the stream's
// connection. done stops the timer; arm starts it again.
func (s *Server) stallGuard(ctx context.Context) (arm func(), done func()) {
	d := s.cfg.StallTimeout
	if d <= 0 {
		return func() {}, func() {}
	}
	t := time.AfterFunc(time.Hour, func() { s.cut(ctx) })
	t.Stop()
	return func() { t.Reset(d) }, func() { t.Stop() }
}
