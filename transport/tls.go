package transport

import (
	"crypto/tls"
	"net"
	"sync"
)

// # TLS records, written together
//
// crypto/tls writes each record it seals with a write of its own: a
// 256 KiB page is 16 records of 16 KiB, so 16 system calls, and as many
// wake-ups of the reader on the other end, where the page without TLS
// takes one. So the TCP connection under a TLS one
// (UnderTLS) can hold the records of one frame write (Conn.writev) and
// send them in writes of tlsFlushBytes: the reader still gets the first
// records while the rest are sealed, and a frame costs a few calls, not
// one per record: a 256 KiB get over TLS took 330 µs of CPU instead of
// 424-464 (benchmarks/README.md, "The raw plane against its limits").
// Outside a frame write (the handshake, alerts, a key update that a read
// answers) every write goes straight through.

// tlsFlushBytes is how many sealed bytes a held TLS connection gathers
// before it writes them.
const tlsFlushBytes = 64 << 10

// tlsBase is the TCP connection under a TLS one: it passes writes through
// unless a frame write holds it (hold), and then gathers them.
type tlsBase struct {
	net.Conn
	mu   sync.Mutex
	held bool
	buf  []byte
}

// UnderTLS wraps the TCP connection a TLS connection is made over, so that
// a Conn over the TLS connection writes its records together (TLS records,
// written together): tls.Server(UnderTLS(nc), cfg), tls.Client likewise.
func UnderTLS(nc net.Conn) net.Conn { return &tlsBase{Conn: nc} }

// Write sends p now, or gathers it while the connection is held.
func (b *tlsBase) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.held {
		return b.Conn.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= tlsFlushBytes {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// hold gathers writes until release.
func (b *tlsBase) hold() {
	b.mu.Lock()
	b.held = true
	b.mu.Unlock()
}

// release sends what was gathered and passes writes through again.
func (b *tlsBase) release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
	return b.flushLocked()
}

func (b *tlsBase) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// baseOf is the tlsBase under nc, if nc is a TLS connection made over one.
func baseOf(nc net.Conn) *tlsBase {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	b, _ := tc.NetConn().(*tlsBase)
	return b
}
