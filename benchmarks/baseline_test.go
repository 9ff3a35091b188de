package benchmarks

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"net"
	"testing"

	loadgen "github.com/stratakv/strata/benchmarks/load"
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
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		conns[i] = c
		if err := warmConn(c); err != nil {
			b.Fatal(err)
		}
	}
	bySize(b, pageSizes, func(b *testing.B, size int) {
		pages, bufs := workingSet/size, pageBuffers(size)
		byClients(b, "conns", size, func(b *testing.B, clients int) {
			load{clients: clients, op: func(_ context.Context, c, i int) error {
				return fetchPage(conns[c], uint32(i%pages), bufs[c])
			}}.run(b)
		})
	})
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

// startPageServer serves fetchPage requests from src on loopback
// (loadgen.PageServer) until tb ends.
func startPageServer(tb testing.TB, src []byte) *loadgen.PageServer {
	tb.Helper()
	s, err := loadgen.StartPageServer(src)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// fetchPage asks for page idx of len(buf) bytes and reads it into buf.
func fetchPage(conn net.Conn, idx uint32, buf []byte) error { return loadgen.FetchPage(conn, idx, buf) }

// BenchmarkMemcpy copies one page per operation, round-robin from a
// workingSet-byte source (as get reads the node) into a buffer each
// goroutine reuses: the cost of touching a page's bytes once.
func BenchmarkMemcpy(b *testing.B) {
	src := randomBytes(workingSet, 5)
	bySize(b, pageSizes, func(b *testing.B, size int) {
		pages, dsts := workingSet/size, pageBuffers(size)
		byClients(b, "threads", size, func(b *testing.B, threads int) {
			load{clients: threads, op: func(_ context.Context, c, i int) error {
				j := i % pages
				if copy(dsts[c], src[j*size:(j+1)*size]) != size {
					return errors.New("short copy")
				}
				return nil
			}}.run(b)
		})
	})
}

// BenchmarkAESGCM seals 16 KiB records with AES-128-GCM, as crypto/tls
// does on the raw plane and gRPC with TLS: the machine limit TLS's cost
// per page is compared with (a page is sealed by its sender and opened by
// its receiver, so twice this per page).
func BenchmarkAESGCM(b *testing.B) {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		b.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	nonce, record := make([]byte, aead.NonceSize()), randomBytes(16<<10, 9)
	out := make([]byte, 0, len(record)+aead.Overhead())
	b.SetBytes(int64(len(record)))
	for b.Loop() {
		out = aead.Seal(out[:0], nonce, record, nil)
	}
}
