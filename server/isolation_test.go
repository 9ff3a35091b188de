package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transport"
)

// Adversarial tests of tenant isolation over real gRPC on loopback: what a
// client that does not play by the rules can do to others' leases, pins
// and room.

// put publishes one page of f's namespace through Reserve, Write, Commit.
func (f *fixture) put(t *testing.T, k, data []byte) {
	t.Helper()
	wid := f.reserve(t, k, len(data))
	if err := f.write(t, wid, data); err != nil {
		t.Fatal(err)
	}
	if s := f.commit(t, wid, len(data), crc(data)); s != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
		t.Fatalf("commit: %v", s)
	}
}

// TestLeaseIDsUnguessable: a client of a namespace cannot renew or
// release another's lease by guessing ids near its own (ids were
// sequential: the next lease was its own id plus one).
func TestLeaseIDsUnguessable(t *testing.T) {
	f := setup(t, nil)
	f.put(t, key(1), make([]byte, f.page))
	lease := func() uint64 {
		r, err := f.rpc.Lookup(ctxT(t), &pb.LookupRequest{NamespaceId: f.ns, Keys: [][]byte{key(1)}, Lease: true})
		if err != nil || r.GetLease() == nil {
			t.Fatalf("lookup with lease: %v, %v", r, err)
		}
		return r.GetLease().GetId()
	}
	mine, theirs := lease(), lease()
	const span = 512
	for d := uint64(1); d <= span; d++ {
		for _, guess := range []uint64{mine + d, mine - d} {
			if guess == mine {
				continue
			}
			_, err := f.rpc.ReleaseLease(ctxT(t), &pb.ReleaseLeaseRequest{NamespaceId: f.ns, LeaseId: guess})
			if guess == theirs && err == nil {
				t.Fatalf("released the other client's lease %d by guessing %d past mine (%d)", theirs, d, mine)
			}
			if err == nil {
				t.Fatalf("released lease %d, which no one took", guess)
			}
			wantErr(t, "releasing a guessed lease", err, codes.NotFound, pb.ReasonLeaseNotFound)
		}
	}
	if _, err := f.rpc.RenewLease(ctxT(t), &pb.RenewLeaseRequest{NamespaceId: f.ns, LeaseId: theirs}); err != nil {
		t.Fatalf("the other client's lease was touched: %v", err)
	}
}

// bigKey is a key made of i's two bytes.
func bigKey(i int) []byte {
	k := make([]byte, 32)
	k[0], k[1], k[31] = byte(i), byte(i>>8), 0x5C
	return k
}

// stalledGet starts a Get of keys on a connection of its own with a 64
// KiB window (no automatic growth) that reads one message and then
// nothing; the test's end closes it.
func (f *fixture) stalledGet(t *testing.T, keys [][]byte) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := pb.NewStrataClient(conn).Get(ctxT(t), &pb.GetRequest{NamespaceId: f.ns, Keys: keys, MaxChunkBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestStalledGetPinsOnePage: a lease-less Get whose client stops reading
// keeps at most the page being sent from being reclaimed, not every page
// it names (they were all pinned up front, so a full tier refused every
// other put for as long as the stream stalled).
func TestStalledGetPinsOnePage(t *testing.T) {
	f := setup(t, func(c *node.Config) {
		c.HostBytes, c.NoCutoffFloor, c.ShmSocket = 4<<20, true, "off"
		c.ReserveShare = 1 // one Reserve of most of the tier, by one tenant: pins are the test, not the share
	})
	const pages = 200 // of 256 that fit
	data := make([]byte, f.page)
	var keys [][]byte
	for i := range pages {
		keys = append(keys, bigKey(i))
		f.put(t, bigKey(i), data)
	}
	f.stalledGet(t, keys)

	specs := make([]*pb.PageSpec, pages)
	for i := range specs {
		specs[i] = &pb.PageSpec{Key: bigKey(1000 + i), Size: uint64(f.page)}
	}
	r, err := f.rpc.Reserve(ctxT(t), &pb.ReserveRequest{NamespaceId: f.ns, Pages: specs})
	if err != nil {
		t.Fatal(err)
	}
	reserved := 0
	for _, res := range r.GetReservations() {
		if res.GetStatus() == pb.ReserveStatus_RESERVE_STATUS_RESERVED {
			reserved++
		}
	}
	// All but the few pages the stalled stream is sending fit.
	if reserved < pages-4 {
		t.Fatalf("with a stalled get of %d pages, %d of %d new pages found room", pages, reserved, pages)
	}
}

// TestStalledGetCut: a Get that cannot send a page for StallTimeout has
// its client's connection cut, so the stream and its pin end.
func TestStalledGetCut(t *testing.T) {
	f := setup(t, func(c *node.Config) { c.StallTimeout = 300 * time.Millisecond; c.ShmSocket = "off" })
	var keys [][]byte
	data := make([]byte, f.page)
	for i := range 64 {
		keys = append(keys, bigKey(i))
		f.put(t, bigKey(i), data)
	}
	conn := f.stalledGet(t, keys)
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	for conn.GetState() == connectivity.Ready {
		if !conn.WaitForStateChange(ctx, connectivity.Ready) {
			t.Fatal("the stalled stream's connection was not cut within 10s")
		}
	}
}

// TestStalledPutCut: a Put stream (and a Write stream) whose client sends
// half a page and then nothing more has its connection cut after
// StallTimeout; it used to hold its handler and connection until the
// client gave up (only its reservation ended, at its deadline).
func TestStalledPutCut(t *testing.T) {
	f := setup(t, func(c *node.Config) { c.StallTimeout = 300 * time.Millisecond; c.ShmSocket = "off" })
	for _, kind := range []string{"put", "write"} {
		conn, err := grpc.NewClient("passthrough:///"+f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		rpc := pb.NewStrataClient(conn)
		half := make([]byte, f.page/2)
		switch kind {
		case "put":
			stream, err := rpc.Put(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&pb.PutRequest{NamespaceId: f.ns, Header: &pb.PutHeader{
				Page: &pb.PageSpec{Key: bigKey(7), Size: uint64(f.page)}, Checksum: crc(make([]byte, f.page))}, Data: half}); err != nil {
				t.Fatal(err)
			}
		case "write":
			wid := f.reserve(t, bigKey(8), f.page)
			stream, err := rpc.Write(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&pb.WriteRequest{NamespaceId: f.ns, WriteId: wid, Data: half}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		for conn.GetState() != connectivity.Ready && conn.WaitForStateChange(ctx, conn.GetState()) {
		}
		for conn.GetState() == connectivity.Ready {
			if !conn.WaitForStateChange(ctx, connectivity.Ready) {
				t.Fatalf("%s: the stalled stream's connection was not cut within 10s", kind)
			}
		}
		cancel()
	}
}

// TestRawIdleClosed: a raw connection that finished its handshake and
// then sends nothing is closed after the idle timeout (it used to stay
// open for good).
func TestRawIdleClosed(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, ShmSocket: "off", RawIdleTimeout: 200 * time.Millisecond})
	nc, err := net.DialTimeout("tcp", n.RawAddr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := transport.NewStreamConn(nc, 0)
	if err := c.Send(1, &frame.Hello{Version: frame.ProtocolVersion}); err != nil {
		t.Fatal(err)
	}
	if _, m, err := c.Recv(); err != nil || m.Op() != frame.OpWelcome {
		t.Fatalf("hello: %v, %v", m, err)
	}
	start := time.Now()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := c.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle connection: %v after %v, want EOF (closed by the node)", err, time.Since(start))
	}
}
