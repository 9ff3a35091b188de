package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
)

// TestDataPathWithGRPCOptions runs puts (one-call and two-phase) and gets
// of pages larger than a chunk through a gRPC server built with
// Server.GRPCOptions, so page bytes go out by reference and come in without
// the protobuf copy.
func TestDataPathWithGRPCOptions(t *testing.T) {
	srv, err := server.New(server.Config{NodeID: "n1", Store: hostStore(t, 64<<20, store.Config{}), MaxChunk: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLoopback(t, srv, append(srv.GRPCOptions(), grpc.MaxRecvMsgSize(srv.MaxRecvMsgSize()))...)
	c, err := client.Dial(t.Context(), addr, client.Options{NoShm: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const size = 200 << 10 // four chunks, the last one short
	ns, err := c.Open(ctx, namespace.Descriptor{Tenant: "t", Model: "m", ModelRevision: "r", Engine: "e",
		DType: "bf16", PageTokens: 16, PageBytes: size})
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]uint32, 16*40)
	for i := range tokens {
		tokens[i] = uint32(i * 7)
	}
	keys := ns.PageKeys(tokens)
	data := make([][]byte, len(keys))
	for i := range data {
		data[i] = bytes.Repeat([]byte{byte(i), byte(i >> 3), 0x5A}, size/3+1)[:size]
	}
	// 3 pages go through the one-call Put, the other 37 through the
	// two-phase Reserve, Write, Commit.
	for _, batch := range [][2]int{{0, 3}, {3, len(keys)}} {
		res, err := ns.Put(ctx, client.ChainPages(keys[batch[0]:batch[1]], data[batch[0]:batch[1]]))
		if err != nil {
			t.Fatalf("put %v: %v", batch, err)
		}
		for i, r := range res {
			if r.Status != client.Committed {
				t.Fatalf("put %v page %d: %v %s", batch, i, r.Status, r.Reason)
			}
		}
	}
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !found[i] || !bytes.Equal(bufs[i], data[i]) {
			t.Fatalf("page %d: found %t, bytes equal %t", i, found[i], bytes.Equal(bufs[i], data[i]))
		}
	}
}
