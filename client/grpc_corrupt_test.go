package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/node"
)

// TestGRPCGetCorruptByte: a page whose bytes change on the way from the
// node over gRPC fails the client's checksum check (pageReader.next): it
// is not found and the get reports ErrChecksum, while the pages around it
// arrive intact. The client is kept off shm and the raw plane, and its gRPC
// connections go through a dialer that flips one byte of the middle
// page's data in the node-to-client stream.
func TestGRPCGetCorruptByte(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, func(c *node.Config) { c.ShmSocket = "off" })
	ns := open(t, dial(t, n.Addr(), ""))
	keys := ns.PageKeys(tokens(16*3, 46))
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys, data), client.Committed, "put")

	// Page 1's data is its key's first 8 bytes repeated; two repeats name
	// it in the stream and nothing else (keys are sent client to node).
	flip := &byteFlipper{marker: bytes.Repeat(keys[1][:8], 2)}
	c := dialWith(t, n.Addr(), client.Options{NoShm: true, NoRaw: true,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(flip.dial)}})
	if c.RawActive() {
		t.Fatal("raw plane in use with NoRaw")
	}
	got := open(t, c)
	bufs := pageBufs(got, 3)
	found, err := got.Get(ctx, keys, bufs, nil)
	if !flip.done() {
		t.Fatal("the dialer never saw page 1's bytes: the get did not go over gRPC")
	}
	if !errors.Is(err, client.ErrChecksum) || len(found) != 3 || !found[0] || found[1] || !found[2] {
		t.Fatalf("get with a flipped byte: found %v, err %v; want [true false true] and ErrChecksum", found, err)
	}
	if n := c.ChecksumFailures(); n != 1 {
		t.Fatalf("checksum failures counted: %d, want 1", n)
	}
	if !bytes.Equal(bufs[0], data[0]) || !bytes.Equal(bufs[2], data[2]) {
		t.Fatal("intact pages differ")
	}
}

// byteFlipper dials plain tcp and flips one byte of the first occurrence of
// marker in what the far end sends, once over all its connections.
type byteFlipper struct {
	marker []byte

	mu      sync.Mutex // guards flipped
	flipped bool
}

func (f *byteFlipper) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &flipConn{Conn: c, f: f}, nil
}

func (f *byteFlipper) done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flipped
}

// flipConn is a connection whose reads pass through its byteFlipper. tail
// keeps the last len(marker)-1 bytes read, for a marker split across reads;
// gRPC reads a connection from one goroutine.
type flipConn struct {
	net.Conn
	f    *byteFlipper
	tail []byte
}

func (c *flipConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if c.f.flipped {
		return n, err
	}
	seen := append(c.tail, p[:n]...)
	if i := bytes.Index(seen, c.f.marker); i >= 0 {
		at := i + len(c.f.marker) - 1 // the marker's last byte is in p
		p[at-len(c.tail)] ^= 0xff
		c.f.flipped = true
		return n, err
	}
	keep := min(len(seen), len(c.f.marker)-1)
	c.tail = append(c.tail[:0], seen[len(seen)-keep:]...)
	return n, err
}
