//go:build linux

package rdma

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestVerbsLoopback connects two queue pairs on one device and moves a
// page each way with RDMA WRITE and READ, then checks the books: every
// region deregistered once, every pair closed. It skips, saying why, in
// builds without the rdma tag and on machines without an RDMA device
// (scripts/rdma-check.sh runs it where one exists).
func TestVerbsLoopback(t *testing.T) {
	dev, err := Open(Config{})
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	must(t, err)
	node, err := dev.Pair()
	must(t, err)
	peer, err := dev.Pair()
	must(t, err)
	arena, local := mapAnon(t, 1<<20), mapAnon(t, 1<<20)
	arenaRegion, err := dev.Register(arena)
	must(t, err)
	localRegion, err := dev.Register(local)
	must(t, err)
	ne, err := node.Local(arenaRegion)
	must(t, err)
	pe, err := peer.Local(nil)
	must(t, err)
	must(t, node.Connect(pe))
	must(t, peer.Connect(ne))

	page := bytes.Repeat([]byte{0xa5, 0x5a}, 32<<10)
	copy(local, page)
	ctx := context.Background()
	const off = 128 << 10
	must(t, peer.Write(ctx, localRegion, []Op{{Off: off, Buf: local[:len(page)]}}))
	if !bytes.Equal(arena[off:off+len(page)], page) {
		t.Fatal("RDMA WRITE did not land in the arena")
	}
	clear(local)
	ops := []Op{{Off: off, Buf: local[4096 : 4096+len(page)]}}
	if err := peer.Read(ctx, localRegion, ops); err != nil || !ops[0].OK {
		t.Fatalf("read: %v, ok %v", err, ops[0].OK)
	}
	if !bytes.Equal(local[4096:4096+len(page)], page) {
		t.Fatal("RDMA READ returned other bytes")
	}
	// An op past the peer's memory is refused before anything is posted,
	// and the pair stays usable.
	if err := peer.Read(ctx, localRegion, []Op{{Off: 1<<20 - 100, Buf: local[:4096]}}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read past the arena: %v, want ErrOutOfRange", err)
	}
	must(t, peer.Read(ctx, localRegion, ops))

	if err := dev.Close(); !errors.Is(err, ErrLeaked) {
		t.Fatalf("closing the device with pairs open: %v, want ErrLeaked", err)
	}
	must(t, node.Close())
	must(t, peer.Close())
	must(t, arenaRegion.Deregister())
	must(t, localRegion.Deregister())
	must(t, dev.Close())
	if reg, dereg := dev.Memory().Counts(); reg != 2 || dereg != 2 {
		t.Fatalf("%d regions registered, %d deregistered; want 2, 2", reg, dereg)
	}
}

// mapAnon returns n bytes outside the Go heap, as registration needs;
// the test's cleanup unmaps them.
func mapAnon(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
