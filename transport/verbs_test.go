//go:build linux

package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stratakv/strata/proto/frame"
)

// TestVerbsLoopback connects two queue pairs on one device and moves a
// page each way with RDMA WRITE and READ. It skips, saying why, in builds
// without the rdma tag and on machines without an RDMA device.
func TestVerbsLoopback(t *testing.T) {
	node, err := OpenVerbs(VerbsConfig{})
	if errors.Is(err, ErrNoVerbs) {
		t.Skipf("skipping: %v (build with -tags rdma on a machine with an RDMA device)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	peer, err := OpenVerbs(VerbsConfig{})
	must(t, err)
	defer peer.Close()
	arena, err := mapAnonForTest(1 << 20)
	must(t, err)
	local, err := mapAnonForTest(1 << 20)
	must(t, err)
	must(t, node.Register(arena))
	must(t, peer.Register(local))
	ne, err := node.Local()
	must(t, err)
	pe, err := peer.Local()
	must(t, err)
	must(t, node.Connect(pe))
	must(t, peer.Connect(ne))
	page := bytes.Repeat([]byte{0xa5, 0x5a}, 32<<10)
	copy(local, page)
	ctx := context.Background()
	ext := frame.Extent{Off: 128 << 10, Len: int64(len(page))}
	must(t, peer.Write(ctx, []Op{{Ext: ext, Buf: local[:len(page)]}}))
	if !bytes.Equal(arena[ext.Off:ext.Off+ext.Len], page) {
		t.Fatal("RDMA WRITE did not land in the arena")
	}
	clear(local)
	ops := []Op{{Ext: ext, Buf: local[4096 : 4096+len(page)]}}
	if err := peer.Read(ctx, ops); err != nil || !ops[0].OK {
		t.Fatal(err)
	}
	if !bytes.Equal(local[4096:4096+len(page)], page) {
		t.Fatal("RDMA READ returned other bytes")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
