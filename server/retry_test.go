//go:build linux

package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transport"
)

// remembered is how many ended reservations a node remembers the
// outcomes of (store.Config.RecentOutcomes's default, which the node
// keeps).
const remembered = 65536

// planeConn is one tenant's connection on one plane, driven as a client
// drives it: the gRPC service, a raw tcp connection, or an shm connection
// with the arena mapped.
type planeConn interface {
	// reserve reserves a page of key k, size bytes, living ttlMs (0: the
	// node's default).
	reserve(t *testing.T, ns namespace.ID, k namespace.Key, size int64, ttlMs uint32) uint64
	// write writes data into reservation wid from its start.
	write(t *testing.T, ns namespace.ID, wid uint64, data []byte)
	// commit commits one write; err is the node's refusal of the request.
	commit(t *testing.T, ns namespace.ID, wid uint64, size int64, sum []byte) (pb.CommitStatus, error)
	abort(t *testing.T, ns namespace.ID, wid uint64)
}

// TestRepeatedCommitEveryPlane: the retry contract (SPEC.md §2, Repeated
// commits; strata.proto, rpc Commit) holds alike on gRPC, the raw plane
// and the shm socket. For each first outcome, made on each plane that can
// make it, a repeated commit answers the first outcome on every plane
// (the maker's connection and the other planes' connections of the
// tenant); a frame connection's commit of another's open reservation
// answers UNKNOWN_WRITE and leaves it to its maker; another tenant learns
// nothing (UNKNOWN_WRITE in its namespace, DENIED in the write's). Once
// the node has forgotten the writes (more reservations ended since than
// it remembers), every repeat answers UNKNOWN_WRITE everywhere.
func TestRepeatedCommitEveryPlane(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	n := testnode.Start(t, node.Config{HostBytes: 64 << 20, ShmSocket: sock,
		TenantTokens: map[string]string{"token-a": "acme", "token-b": "other"}, ShmTenants: []string{"acme", "other"}})
	ctx := ctxT(t)
	planes := []string{"grpc", "raw", "shm"}
	dial := func(token, tenant string) (map[string]planeConn, namespace.ID, int64) {
		g := dialGRPC(t, n.Addr(), token)
		ns, size := g.open(t, tenant)
		return map[string]planeConn{"grpc": g, "raw": dialRaw(t, n.RawAddr(), token), "shm": dialShm(t, sock, token)}, ns, size
	}
	a, ns, size := dial("token-a", "acme")
	b, nsB, _ := dial("token-b", "other")

	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := namespace.CRC32C.Sum(data)
	keys := 0
	nextKey := func() namespace.Key {
		keys++
		var k namespace.Key
		binary.LittleEndian.PutUint64(k[:], uint64(keys))
		k[31] = 0x7e
		return k
	}
	// written reserves a page on p and writes data into it.
	written := func(t *testing.T, p planeConn, k namespace.Key, ttlMs uint32, data []byte) uint64 {
		wid := p.reserve(t, ns, k, size, ttlMs)
		p.write(t, ns, wid, data)
		return wid
	}

	type write struct {
		wid  uint64
		size int64
		sum  []byte
	}
	cases := []struct {
		name   string
		planes []string // the planes that can make it; nil: every one
		open   bool     // the reservation is open until its first commit
		make   func(t *testing.T, p planeConn, k namespace.Key) write
		want   pb.CommitStatus
	}{
		{name: "committed", open: true, want: pb.CommitStatus_COMMIT_STATUS_COMMITTED,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				return write{written(t, p, k, 0, data), size, sum}
			}},
		{name: "checksum mismatch", open: true, want: pb.CommitStatus_COMMIT_STATUS_CHECKSUM_MISMATCH,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				return write{written(t, p, k, 0, data), size, namespace.CRC32C.Sum(data[1:])}
			}},
		{name: "size mismatch", open: true, want: pb.CommitStatus_COMMIT_STATUS_SIZE_MISMATCH,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				return write{written(t, p, k, 0, data), size - 1, sum}
			}},
		// Over shm the client writes the arena itself: the node counts the
		// whole page written.
		{name: "incomplete", planes: []string{"grpc", "raw"}, open: true, want: pb.CommitStatus_COMMIT_STATUS_INCOMPLETE,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				return write{written(t, p, k, 0, data[:size/2]), size, sum}
			}},
		{name: "exists", open: true, want: pb.CommitStatus_COMMIT_STATUS_EXISTS,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				rival, wid := written(t, p, k, 0, data), written(t, p, k, 0, data)
				if st, err := p.commit(t, ns, rival, size, sum); err != nil || st != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
					t.Fatalf("the rival's commit: %v, %v", st, err)
				}
				return write{wid, size, sum}
			}},
		{name: "aborted", want: pb.CommitStatus_COMMIT_STATUS_ABORTED,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				wid := written(t, p, k, 0, data)
				p.abort(t, ns, wid)
				return write{wid, size, sum}
			}},
		{name: "expired", want: pb.CommitStatus_COMMIT_STATUS_EXPIRED,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				// Reserved, not written: a write after a 1 ms deadline is
				// refused as expired, which a loaded machine made happen
				// (the commit's outcome does not depend on the bytes).
				wid := p.reserve(t, ns, k, size, 1)
				time.Sleep(20 * time.Millisecond) // the deadline is the subject: only the clock passes it
				return write{wid, size, sum}
			}},
		{name: "never issued", want: pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE,
			make: func(*testing.T, planeConn, namespace.Key) write { return write{424242, size, sum} }},
		// A SlotPut is the first commit of a slot; a Commit of its write
		// id repeats it.
		{name: "slot put", planes: []string{"shm"}, want: pb.CommitStatus_COMMIT_STATUS_COMMITTED,
			make: func(t *testing.T, p planeConn, k namespace.Key) write {
				wid, res := p.(*frameClient).slotPut(t, ns, k, data, sum)
				if res.Reserve != frame.SlotReserved || pb.CommitStatus(res.Commit) != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
					t.Fatalf("slot put: %+v", res)
				}
				return write{wid, size, sum}
			}},
	}

	var made []write
	for _, tc := range cases {
		for _, first := range planes {
			if tc.planes != nil && !slices.Contains(tc.planes, first) {
				continue
			}
			t.Run(tc.name+"/"+first, func(t *testing.T) {
				w := tc.make(t, a[first], nextKey())
				made = append(made, w)
				want := func(p planeConn, ns namespace.ID, what string, st pb.CommitStatus) {
					t.Helper()
					if got, err := p.commit(t, ns, w.wid, w.size, w.sum); err != nil || got != st {
						t.Fatalf("%s: %v, %v; want %v", what, got, err, st)
					}
				}
				for _, other := range planes {
					if tc.open && other != first && other != "grpc" {
						want(a[other], ns, "a commit of another's open reservation over "+other, pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE)
					}
				}
				want(a[first], ns, "first commit", tc.want)
				for _, again := range planes {
					want(a[again], ns, "repeated over "+again, tc.want)
				}
				for _, other := range planes {
					want(b[other], nsB, "another tenant's repeat in its namespace over "+other, pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE)
					if _, err := b[other].commit(t, ns, w.wid, w.size, w.sum); !denied(err) {
						t.Fatalf("another tenant's repeat in the write's namespace over %s: %v, want DENIED", other, err)
					}
				}
			})
		}
	}

	t.Run("forgotten", func(t *testing.T) {
		if len(made) == 0 {
			t.Skip("no write was made: the cases did not run")
		}
		forget(ctx, t, a["grpc"].(*grpcConn), ns, size, nextKey)
		for _, w := range made {
			for _, p := range planes {
				if got, err := a[p].commit(t, ns, w.wid, w.size, w.sum); err != nil || got != pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE {
					t.Fatalf("write %d repeated over %s once forgotten: %v, %v", w.wid, p, got, err)
				}
			}
		}
	})
}

// forget ends more reservations than the node remembers (reserved and
// aborted, in batches), so it forgets every write that ended before.
func forget(ctx context.Context, t *testing.T, g *grpcConn, ns namespace.ID, size int64, nextKey func() namespace.Key) {
	t.Helper()
	const batch = 512
	for ended := 0; ended < remembered; {
		specs := make([]*pb.PageSpec, batch)
		for i := range specs {
			k := nextKey()
			specs[i] = &pb.PageSpec{Key: k[:], Size: uint64(size)}
		}
		r, err := g.rpc.Reserve(g.auth(ctx), &pb.ReserveRequest{NamespaceId: ns[:], Pages: specs})
		if err != nil {
			t.Fatal(err)
		}
		var wids []uint64
		for _, res := range r.GetReservations() {
			if res.GetStatus() == pb.ReserveStatus_RESERVE_STATUS_RESERVED {
				wids = append(wids, res.GetWriteId())
			}
		}
		ab, err := g.rpc.Abort(g.auth(ctx), &pb.AbortRequest{NamespaceId: ns[:], WriteIds: wids})
		if err != nil || ab.GetAborted() == 0 {
			t.Fatalf("abort of %d reservations: %v, %v", len(wids), ab, err)
		}
		ended += int(ab.GetAborted())
	}
}

// denied reports whether err is the node's refusal of a namespace the
// tenant may not use, on any plane.
func denied(err error) bool {
	if fe := (*frame.Error)(nil); errors.As(err, &fe) {
		return fe.Code == frame.CodeDenied
	}
	return pb.ReasonOf(err) == pb.ReasonTenantDenied
}

// grpcConn is a tenant's gRPC connection.
type grpcConn struct {
	rpc   pb.StrataClient
	token string
}

func dialGRPC(t *testing.T, addr, token string) *grpcConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &grpcConn{rpc: pb.NewStrataClient(cc), token: token}
}

// auth is ctx carrying the tenant's token.
func (g *grpcConn) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.token)
}

// open opens the tenant's namespace of 4 KiB pages.
func (g *grpcConn) open(t *testing.T, tenant string) (namespace.ID, int64) {
	t.Helper()
	resp, err := g.rpc.OpenNamespace(g.auth(ctxT(t)), &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1,
		Descriptor_: &pb.Descriptor{Tenant: tenant, Model: "m",
			ModelRevision: "r1", Engine: "sglang", Dtype: "bf16", PageTokens: 16, NumLayers: 1, NumKvHeads: 1, HeadDim: 64}})
	if err != nil {
		t.Fatal(err)
	}
	return namespace.ID(resp.GetNamespaceId()), int64(resp.GetPageBytes())
}

func (g *grpcConn) reserve(t *testing.T, ns namespace.ID, k namespace.Key, size int64, ttlMs uint32) uint64 {
	t.Helper()
	r, err := g.rpc.Reserve(g.auth(ctxT(t)), &pb.ReserveRequest{NamespaceId: ns[:], DeadlineMs: ttlMs,
		Pages: []*pb.PageSpec{{Key: k[:], Size: uint64(size)}}})
	if err != nil || r.GetReservations()[0].GetStatus() != pb.ReserveStatus_RESERVE_STATUS_RESERVED {
		t.Fatalf("reserve: %v, %v", r, err)
	}
	return r.GetReservations()[0].GetWriteId()
}

func (g *grpcConn) write(t *testing.T, ns namespace.ID, wid uint64, data []byte) {
	t.Helper()
	s, err := g.rpc.Write(g.auth(ctxT(t)))
	if err == nil {
		err = s.Send(&pb.WriteRequest{NamespaceId: ns[:], WriteId: wid, Data: data})
	}
	if err == nil {
		_, err = s.CloseAndRecv()
	}
	if err != nil {
		t.Fatalf("write: %v", err)
	}
}

func (g *grpcConn) commit(t *testing.T, ns namespace.ID, wid uint64, size int64, sum []byte) (pb.CommitStatus, error) {
	t.Helper()
	r, err := g.rpc.Commit(g.auth(ctxT(t)), &pb.CommitRequest{NamespaceId: ns[:],
		Items: []*pb.CommitItem{{WriteId: wid, Size: uint64(size), Checksum: sum}}})
	if err != nil {
		return 0, err
	}
	return r.GetResults()[0].GetStatus(), nil
}

func (g *grpcConn) abort(t *testing.T, ns namespace.ID, wid uint64) {
	t.Helper()
	if r, err := g.rpc.Abort(g.auth(ctxT(t)), &pb.AbortRequest{NamespaceId: ns[:], WriteIds: []uint64{wid}}); err != nil || r.GetAborted() != 1 {
		t.Fatalf("abort: %v, %v", r, err)
	}
}

// frameClient is a tenant's connection on the raw plane, or on the shm
// socket with the arena mapped (arena set).
type frameClient struct {
	c     *transport.Conn
	arena *transport.Shm
	exts  map[uint64]frame.Extent // over shm, where each reservation lies in the arena
	id    uint64                  // the last request id
}

func dialRaw(t *testing.T, addr, token string) *frameClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := &frameClient{c: transport.NewStreamConn(nc, 0)}
	t.Cleanup(func() { f.c.Close() })
	if m := f.call(t, &frame.Hello{Version: frame.ProtocolVersion, Token: token}); m.Op() != frame.OpWelcome {
		t.Fatalf("raw hello: %#v", m)
	}
	return f
}

func dialShm(t *testing.T, sock, token string) *frameClient {
	t.Helper()
	uc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &frameClient{c: transport.NewConn(uc.(*net.UnixConn), 0), exts: make(map[uint64]frame.Extent)}
	t.Cleanup(func() { f.c.Close() })
	f.id++
	if err := f.c.Send(f.id, &frame.Hello{Version: frame.ProtocolVersion, Token: token}); err != nil {
		t.Fatal(err)
	}
	_, m, fds, err := f.c.RecvFDs(2)
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	w, ok := m.(*frame.Welcome)
	if err != nil || !ok || len(fds) != 2 {
		t.Fatalf("shm hello: %#v, %d fds, %v", m, len(fds), err)
	}
	if f.arena, err = transport.MapShm(fds[0], w.ArenaSize, fds[1], w.GenWords); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.arena.Close() })
	return f
}

// call sends m and returns its answer.
func (f *frameClient) call(t *testing.T, m frame.Message) frame.Message {
	t.Helper()
	f.id++
	if err := f.c.Send(f.id, m); err != nil {
		t.Fatal(err)
	}
	id, ans, err := f.c.Recv()
	if err != nil || id != f.id {
		t.Fatalf("answer %d to request %d: %v", id, f.id, err)
	}
	return ans
}

func (f *frameClient) reserve(t *testing.T, ns namespace.ID, k namespace.Key, size int64, ttlMs uint32) uint64 {
	t.Helper()
	r, ok := f.call(t, &frame.Reserve{NS: ns, TTLms: ttlMs, Pages: []frame.PageSpec{{Key: k, Size: size}}}).(*frame.ReserveOK)
	if !ok || r.Slots[0].Status != frame.SlotReserved || (f.arena != nil && !r.Slots[0].Mapped) {
		t.Fatalf("reserve: %#v", r)
	}
	if f.arena != nil {
		f.exts[r.Slots[0].WriteID] = r.Slots[0].Ext
	}
	return r.Slots[0].WriteID
}

func (f *frameClient) write(t *testing.T, ns namespace.ID, wid uint64, data []byte) {
	t.Helper()
	if f.arena != nil {
		if err := f.arena.Write(ctxT(t), []transport.Op{{Ext: f.exts[wid], Buf: data}}); err != nil {
			t.Fatal(err)
		}
		return
	}
	f.id++ // one-way: no answer
	if err := f.c.Send(f.id, &frame.Write{NS: ns, WriteID: wid, Data: data}); err != nil {
		t.Fatal(err)
	}
}

func (f *frameClient) commit(t *testing.T, ns namespace.ID, wid uint64, size int64, sum []byte) (pb.CommitStatus, error) {
	t.Helper()
	switch m := f.call(t, &frame.Commit{NS: ns, Items: []frame.CommitItem{{WriteID: wid, Size: size, Checksum: sum}}}).(type) {
	case *frame.CommitOK:
		return pb.CommitStatus(m.Statuses[0]), nil // the frame's numbers are gRPC's (SPEC.md §3)
	case *frame.Error:
		return 0, m
	default:
		t.Fatalf("commit: %#v", m)
		return 0, nil
	}
}

func (f *frameClient) abort(t *testing.T, ns namespace.ID, wid uint64) {
	t.Helper()
	if r, ok := f.call(t, &frame.Abort{NS: ns, WriteIDs: []uint64{wid}}).(*frame.AbortOK); !ok || r.Aborted != 1 {
		t.Fatalf("abort: %#v", r)
	}
}

// slotPut puts a page into a slot the node grants for it (shm only): the
// slot's write id and the SlotPut's result.
func (f *frameClient) slotPut(t *testing.T, ns namespace.ID, k namespace.Key, data, sum []byte) (uint64, frame.PutOK) {
	t.Helper()
	g, ok := f.call(t, &frame.SlotPut{NS: ns, Want: 1}).(*frame.SlotPutOK)
	if !ok || len(g.Slots) != 1 {
		t.Fatalf("granting a slot: %#v", g)
	}
	slot := g.Slots[0]
	if err := f.arena.Write(ctxT(t), []transport.Op{{Ext: slot.Ext, Buf: data}}); err != nil {
		t.Fatal(err)
	}
	r, ok := f.call(t, &frame.SlotPut{NS: ns, Pages: []frame.SlotPage{{WriteID: slot.WriteID,
		Page: frame.PageSpec{Key: k, Size: int64(len(data))}, Checksum: sum}}}).(*frame.SlotPutOK)
	if !ok || len(r.Results) != 1 {
		t.Fatalf("slot put: %#v", r)
	}
	return slot.WriteID, r.Results[0]
}
