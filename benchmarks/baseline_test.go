package benchmarks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// BenchmarkLoopbackTCP is the machine limit a get is compared with: per
// operation a client sends an 8-byte request naming a page and reads the
// page's bytes back over its own TCP connection to 127.0.0.1, the server
// writing them straight from a workingSet-byte buffer (round-robin, as the
// get benchmark reads the node). Client and server share the process, as
// they do in BenchmarkGet.
func BenchmarkLoopbackTCP(b *testing.B) {
	srv := startPageServer(b, randomBytes(workingSet, 4))
	conns := make([]net.Conn, maxClients)
	for i := range conns {
		c, err := net.Dial("tcp", srv.addr())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		conns[i] = c
		if err := warmConn(c); err != nil {
			b.Fatal(err)
		}
	}
	for _, size := range pageSizes {
		pages := workingSet / size
		bufs := make([][]byte, maxClients)
		for c := range bufs {
			bufs[c] = make([]byte, size)
		}
		for _, clients := range clientCounts {
			b.Run(fmt.Sprintf("page=%s/conns=%d", sizeLabel(size), clients), func(b *testing.B) {
				b.SetBytes(int64(size))
				load{clients: clients, op: func(_ context.Context, c, i int) error {
					return fetchPage(conns[c], uint32(i%pages), bufs[c])
				}}.run(b)
			})
		}
	}
}

// warmConn moves warmBytes over a fresh connection, so that the kernel's
// buffer autotuning has settled before the clock starts, as it has on the
// node's connections after the get benchmark publishes its pages.
func warmConn(c net.Conn) error {
	const warmBytes = 64 << 20
	buf := make([]byte, 2<<20)
	for i := range warmBytes / len(buf) {
		if err := fetchPage(c, uint32(i%(workingSet/len(buf))), buf); err != nil {
			return err
		}
	}
	return nil
}

// fetchPage asks for page idx of len(buf) bytes and reads it into buf.
func fetchPage(conn net.Conn, idx uint32, buf []byte) error {
	var req [8]byte
	binary.LittleEndian.PutUint32(req[:4], idx)
	binary.LittleEndian.PutUint32(req[4:], uint32(len(buf)))
	if _, err := conn.Write(req[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(conn, buf)
	return err
}

// pageServer answers fetchPage requests from src. Its owner is the
// benchmark: cleanup closes the listener and every connection and waits
// for the goroutines.
type pageServer struct {
	ln  net.Listener
	src []byte
	wg  sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn // guarded by mu
}

func startPageServer(tb testing.TB, src []byte) *pageServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &pageServer{ln: ln, src: src}
	s.wg.Go(s.accept)
	tb.Cleanup(s.close)
	return s
}

func (s *pageServer) addr() string { return s.ln.Addr().String() }

func (s *pageServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(c) })
	}
}

// serve answers requests on c until it closes. A request past the end of
// src closes the connection.
func (s *pageServer) serve(c net.Conn) {
	var req [8]byte
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		idx, n := int(binary.LittleEndian.Uint32(req[:4])), int(binary.LittleEndian.Uint32(req[4:]))
		if (idx+1)*n > len(s.src) {
			c.Close()
			return
		}
		if _, err := c.Write(s.src[idx*n : (idx+1)*n]); err != nil {
			return
		}
	}
}

func (s *pageServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// BenchmarkMemcpy copies one page per operation, round-robin from a
// workingSet-byte source (as get reads the node) into a buffer each
// goroutine reuses: the cost of touching a page's bytes once.
func BenchmarkMemcpy(b *testing.B) {
	src := randomBytes(workingSet, 5)
	for _, size := range pageSizes {
		pages := workingSet / size
		dsts := make([][]byte, maxClients)
		for c := range dsts {
			dsts[c] = make([]byte, size)
		}
		for _, threads := range clientCounts {
			b.Run(fmt.Sprintf("page=%s/threads=%d", sizeLabel(size), threads), func(b *testing.B) {
				b.SetBytes(int64(size))
				load{clients: threads, op: func(_ context.Context, c, i int) error {
					j := i % pages
					if copy(dsts[c], src[j*size:(j+1)*size]) != size {
						return errors.New("short copy")
					}
					return nil
				}}.run(b)
			})
		}
	}
}
