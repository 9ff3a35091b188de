package benchmarks

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestSmoke runs one round of what the benchmarks do, on a small node, so
// that `go test ./benchmarks/` checks the harness: a put of fresh pages, a
// one-call put, a leased lookup of a prompt, gets with and without the
// lease, deletes, and one page through the loopback TCP page server.
func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	n := startNode(t, 64<<20)
	const size = 64 << 10
	nss := openAll(ctx, t, dialClients(t, n.Addr(), 2), descriptor(size))
	data := randomBytes(size, 1)

	if err := warm(ctx, nss[0], 4, data); err != nil {
		t.Fatal(err)
	}
	if err := putOne(ctx, nss[1], pageKey(nss[1].ID(), 7), data); err != nil {
		t.Fatal(err)
	}
	buf := [][]byte{make([]byte, size)}
	found, err := nss[0].Get(ctx, []namespace.Key{pageKey(nss[0].ID(), 7)}, buf, nil)
	if err != nil || !found[0] || !bytes.Equal(buf[0], data) {
		t.Fatalf("get of a put page: found %v, err %v, bytes equal %t", found, err, bytes.Equal(buf[0], data))
	}
	rpc := pb.NewStrataClient(dialRaw(t, n.Addr()))
	if err := putOneCall(ctx, rpc, nss[0], pageKey(nss[0].ID(), 8), data); err != nil {
		t.Fatalf("one-call put: %v", err)
	}
	if err := deleteRange(ctx, nss[0], 7, 9); err != nil {
		t.Fatal(err)
	}

	keys := promptKeys(ctx, t, nss[0], 8)
	lr, err := nss[1].Lookup(ctx, keys, true, 0)
	if err != nil || lr.HitPrefix != len(keys) || lr.Lease == nil {
		t.Fatalf("leased lookup: %+v, %v", lr, err)
	}
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	found, err = nss[1].Get(ctx, keys, bufs, lr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range found {
		if !f {
			t.Errorf("leased get: page %d not found", i)
		}
	}
	if err := releaseAll(ctx, []*client.Lease{lr.Lease}, 2); err != nil {
		t.Fatal(err)
	}

	srv := startPageServer(t, data)
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make([]byte, size/2)
	if err := fetchPage(conn, 1, got); err != nil || !bytes.Equal(got, data[size/2:]) {
		t.Fatalf("loopback page: err %v, bytes equal %t", err, bytes.Equal(got, data[size/2:]))
	}
}
