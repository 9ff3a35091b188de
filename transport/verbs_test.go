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
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	arena, err := mapAnonForTest(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	local, err := mapAnonForTest(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Register(arena); err != nil {
		t.Fatal(err)
	}
	if err := peer.Register(local); err != nil {
		t.Fatal(err)
	}
	ne, err := node.Local()
	if err != nil {
		t.Fatal(err)
	}
	pe, err := peer.Local()
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Connect(pe); err != nil {
		t.Fatal(err)
	}
	if err := peer.Connect(ne); err != nil {
		t.Fatal(err)
	}
	page := bytes.Repeat([]byte{0xa5, 0x5a}, 32<<10)
	copy(local, page)
	ctx := context.Background()
	ext := frame.Extent{Off: 128 << 10, Len: int64(len(page))}
	if err := peer.Write(ctx, []Op{{Ext: ext, Buf: local[:len(page)]}}); err != nil {
		t.Fatal(err)
	}
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
