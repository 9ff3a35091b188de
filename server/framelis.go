package server

import (
	"net"
	"sync"
	"time"

	"github.com/stratakv/strata/transport"
)

// frameListener is what the shm and raw listeners share: an accept loop
// that serves each connection of the framed protocol on its own goroutine,
// and a close that stops accepting, closes every connection (which ends
// its leases and aborts its reservations) and waits for their goroutines.
type frameListener struct {
	s    *Server
	name string // "shm" or "raw", for logs
	lis  net.Listener
	wg   sync.WaitGroup

	mu     sync.Mutex
	conns  map[*transport.Conn]struct{} // guarded by mu
	closed bool                         // guarded by mu
}

// start accepts until close; open wraps an accepted connection and makes
// the handler that serves it.
func (l *frameListener) start(open func(net.Conn) (*transport.Conn, *frameConn)) {
	l.conns = make(map[*transport.Conn]struct{})
	l.wg.Add(1)
	go l.accept(open)
}

func (l *frameListener) accept(open func(net.Conn) (*transport.Conn, *frameConn)) {
	defer l.wg.Done()
	for {
		nc, err := l.lis.Accept()
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return
			}
			l.s.log.Warn(l.name+": accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c, sc := open(nc)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go func() {
			defer l.wg.Done()
			sc.serve()
			l.mu.Lock()
			delete(l.conns, c)
			l.mu.Unlock()
		}()
	}
}

// close stops accepting, closes every connection and waits; it reports
// false (and does nothing) when already closed.
func (l *frameListener) close() (bool, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false, nil
	}
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	err := l.lis.Close()
	l.wg.Wait()
	return true, err
}
