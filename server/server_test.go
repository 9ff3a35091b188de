package server_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// The node under test runs in-process with real gRPC over loopback and an
// embedded etcd; requests are hand-built protos, as a foreign client would
// send them.

type fixture struct {
	rpc   pb.StrataClient
	admin pb.AdminClient
	ns    []byte
	page  int
	addr  string
}

func setup(t *testing.T, mod func(*node.Config)) *fixture {
	t.Helper()
	cfg := node.Config{HostBytes: 16 << 20}
	if mod != nil {
		mod(&cfg)
	}
	n := testnode.Start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fixture{rpc: pb.NewStrataClient(conn), admin: pb.NewAdminClient(conn), addr: n.Addr()}
	resp, err := f.rpc.OpenNamespace(ctx, &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1,
		Descriptor_: &pb.Descriptor{Tenant: "acme", Model: "m", ModelRevision: "r1", Engine: "sglang", Dtype: "bf16",
			PageTokens: 16, NumLayers: 2, NumKvHeads: 2, HeadDim: 64}})
	if err != nil {
		t.Fatal(err)
	}
	f.ns, f.page = resp.GetNamespaceId(), int(resp.GetPageBytes())
	return f
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func key(i byte) []byte {
	k := make([]byte, 32)
	k[0], k[31] = i, 0xAA
	return k
}

func crc(p []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
}

func wantErr(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != code || pb.ReasonOf(err) != reason {
		t.Errorf("%s: got %v (reason %q), want %v %s", what, err, pb.ReasonOf(err), code, reason)
	}
}

func (f *fixture) hostUsed(t *testing.T) uint64 {
	t.Helper()
	info, err := f.admin.NodeInfo(ctxT(t), &pb.NodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return info.GetTiers()[0].GetUsedBytes()
}

func (f *fixture) reserve(t *testing.T, k []byte, size int) uint64 {
	t.Helper()
	r, err := f.rpc.Reserve(ctxT(t), &pb.ReserveRequest{NamespaceId: f.ns, Pages: []*pb.PageSpec{{Key: k, Size: uint64(size)}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetReservations()[0].GetStatus() != pb.ReserveStatus_RESERVE_STATUS_RESERVED {
		t.Fatalf("reserve: %v", r.GetReservations()[0])
	}
	return r.GetReservations()[0].GetWriteId()
}

func (f *fixture) write(t *testing.T, wid uint64, data []byte) error {
	t.Helper()
	s, err := f.rpc.Write(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.WriteRequest{NamespaceId: f.ns, WriteId: wid, Data: data}); err != nil {
		t.Fatal(err)
	}
	_, err = s.CloseAndRecv()
	return err
}

func (f *fixture) commit(t *testing.T, wid uint64, size int, sum []byte) pb.CommitStatus {
	t.Helper()
	r, err := f.rpc.Commit(ctxT(t), &pb.CommitRequest{NamespaceId: f.ns, Items: []*pb.CommitItem{{WriteId: wid, Size: uint64(size), Checksum: sum}}})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetResults()[0].GetStatus()
}

func (f *fixture) present(t *testing.T, k []byte) bool {
	t.Helper()
	r, err := f.rpc.Lookup(ctxT(t), &pb.LookupRequest{NamespaceId: f.ns, Keys: [][]byte{k}})
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(0) // the answer's size: the page size when present
	if r.GetPresent()[0] {
		want = uint64(f.page)
	}
	if got := r.GetSizes(); len(got) != 1 || got[0] != want {
		t.Fatalf("lookup of one key, present %v: sizes %v, want [%d]", r.GetPresent()[0], got, want)
	}
	return r.GetPresent()[0]
}

func TestCommitRefusedOverGRPC(t *testing.T) {
	f := setup(t, nil)
	data := make([]byte, f.page)
	for i := range data {
		data[i] = byte(i * 13)
	}
	before := f.hostUsed(t)
	cases := []struct {
		name  string
		write []byte
		size  int
		sum   []byte
		want  pb.CommitStatus
	}{
		{"wrong checksum", data, f.page, crc(data[1:]), pb.CommitStatus_COMMIT_STATUS_CHECKSUM_MISMATCH},
		{"wrong size", data, f.page + 1, crc(data), pb.CommitStatus_COMMIT_STATUS_SIZE_MISMATCH},
		{"truncated write stream", data[:f.page/3], f.page, crc(data), pb.CommitStatus_COMMIT_STATUS_INCOMPLETE},
	}
	for i, tc := range cases {
		k := key(byte(i + 1))
		wid := f.reserve(t, k, f.page)
		if err := f.write(t, wid, tc.write); err != nil {
			t.Fatal(err)
		}
		if got := f.commit(t, wid, tc.size, tc.sum); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if f.present(t, k) {
			t.Errorf("%s: page visible", tc.name)
		}
	}
	if got := f.commit(t, 424242, f.page, crc(data)); got != pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE {
		t.Errorf("unknown write id: %v", got)
	}
	wantErr(t, "write to unknown id", f.write(t, 424242, data[:10]), codes.NotFound, pb.ReasonWriteUnknown)
	if after := f.hostUsed(t); after != before {
		t.Fatalf("host usage %d after refused commits, %d before", after, before)
	}
	// Idempotent commit.
	wid := f.reserve(t, key(9), f.page)
	if err := f.write(t, wid, data); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := f.commit(t, wid, f.page, crc(data)); got != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
			t.Fatalf("commit: %v", got)
		}
	}
}

func TestExpiredWriteOverGRPC(t *testing.T) {
	f := setup(t, func(c *node.Config) { c.ReserveTTL = 100 * time.Millisecond })
	before := f.hostUsed(t)
	wid := f.reserve(t, key(1), f.page)
	poll.Until(t, 5*time.Second, 10*time.Millisecond, "the janitor reclaiming the reservation past its deadline", func() bool {
		return f.hostUsed(t) == before
	})
	wantErr(t, "write after deadline", f.write(t, wid, make([]byte, 8)), codes.FailedPrecondition, pb.ReasonWriteExpired)
	if got := f.commit(t, wid, f.page, crc(make([]byte, f.page))); got != pb.CommitStatus_COMMIT_STATUS_EXPIRED {
		t.Fatalf("commit after deadline: %v", got)
	}
	if f.hostUsed(t) != before {
		t.Fatal("expired reservation kept memory")
	}
}

func TestOneCallPut(t *testing.T) {
	f := setup(t, nil)
	data := make([]byte, f.page)
	for i := range data {
		data[i] = byte(i)
	}
	before := f.hostUsed(t)
	s, err := f.rpc.Put(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(k []byte, sum []byte) *pb.PutRequest {
		return &pb.PutRequest{NamespaceId: f.ns, Header: &pb.PutHeader{Page: &pb.PageSpec{Key: k, Size: uint64(f.page)}, Checksum: sum}}
	}
	// Page 1: good, in two chunks. Page 2: bad checksum. Page 3: truncated by the end of the stream.
	msgs := []*pb.PutRequest{hdr(key(1), crc(data)), {Data: data[:100]}, {Data: data[100:]},
		hdr(key(2), crc(data[1:])), {Data: data},
		hdr(key(3), crc(data)), {Data: data[:50]}}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := s.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	want := []pb.CommitStatus{pb.CommitStatus_COMMIT_STATUS_COMMITTED, pb.CommitStatus_COMMIT_STATUS_CHECKSUM_MISMATCH, pb.CommitStatus_COMMIT_STATUS_INCOMPLETE}
	if len(resp.GetResults()) != len(want) {
		t.Fatalf("results: %v", resp.GetResults())
	}
	for i, w := range want {
		if resp.GetResults()[i].GetStatus() != w {
			t.Errorf("page %d: %v, want %v", i+1, resp.GetResults()[i].GetStatus(), w)
		}
	}
	if !f.present(t, key(1)) || f.present(t, key(2)) || f.present(t, key(3)) {
		t.Fatal("visibility after one-call put is wrong")
	}
	info, err := f.admin.NodeInfo(ctxT(t), &pb.NodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetPages() != 1 || info.GetReservations() != 0 || f.hostUsed(t) <= before {
		t.Fatalf("after the put: %d pages, %d reservations", info.GetPages(), info.GetReservations())
	}
}

func TestMalformedRequests(t *testing.T) {
	f := setup(t, func(c *node.Config) { c.MaxBatch = 64 })
	ctx := ctxT(t)
	_, err := f.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: f.ns})
	wantErr(t, "no keys", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = f.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: f.ns, Keys: [][]byte{make([]byte, 31)}})
	wantErr(t, "short key", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	many := make([][]byte, 65)
	for i := range many {
		many[i] = key(byte(i))
	}
	_, err = f.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: f.ns, Keys: many})
	wantErr(t, "batch over the limit", err, codes.ResourceExhausted, pb.ReasonBatchTooLarge)
	_, err = f.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: make([]byte, 32), Keys: many[:1]})
	wantErr(t, "unknown namespace", err, codes.NotFound, pb.ReasonNamespaceNotFound)
	_, err = f.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: []byte{1, 2}, Keys: many[:1]})
	wantErr(t, "short namespace id", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = f.rpc.Reserve(ctx, &pb.ReserveRequest{NamespaceId: f.ns, Pages: []*pb.PageSpec{{Key: key(1), Size: 0}}})
	wantErr(t, "zero-size page", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = f.rpc.Reserve(ctx, &pb.ReserveRequest{NamespaceId: f.ns, Pages: []*pb.PageSpec{{Key: key(1), Size: uint64(f.page),
		Depth: 3, ChainDepth: 3 + 1<<20 + 1}}})
	wantErr(t, "chain depth far past the page", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = f.rpc.Reserve(ctx, &pb.ReserveRequest{NamespaceId: f.ns, Pages: []*pb.PageSpec{{Key: key(1), Size: uint64(f.page),
		ParentKey: key(1), Depth: 1}}})
	wantErr(t, "a page that is its own parent", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = f.rpc.Orphans(ctx, &pb.OrphansRequest{NamespaceId: f.ns, Keys: [][]byte{key(1)}, Counted: 2})
	wantErr(t, "orphans counted past their keys", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = f.rpc.Reserve(ctx, &pb.ReserveRequest{NamespaceId: f.ns, Pages: []*pb.PageSpec{{Key: key(1), Size: uint64(f.page),
		CostHint: math.NaN()}}})
	wantErr(t, "a cost hint that is not a number", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	r, err := f.rpc.Reserve(ctx, &pb.ReserveRequest{NamespaceId: f.ns, Pages: []*pb.PageSpec{{Key: key(1), Size: uint64(f.page + 1)}}})
	if err != nil || r.GetReservations()[0].GetStatus() != pb.ReserveStatus_RESERVE_STATUS_REJECTED {
		t.Errorf("wrong page size: %v %v", r, err)
	}
	_, err = f.rpc.OpenNamespace(ctx, &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1,
		Descriptor_: &pb.Descriptor{Model: "m"}})
	wantErr(t, "descriptor without tenant", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = f.rpc.OpenNamespace(ctx, &pb.OpenNamespaceRequest{Descriptor_: &pb.Descriptor{Tenant: "a", Model: "m"}})
	wantErr(t, "no protocol version", err, codes.FailedPrecondition, pb.ReasonVersionMismatch)
	gs, err := f.rpc.Get(ctx, &pb.GetRequest{NamespaceId: f.ns, Keys: many[:1], LeaseId: 77})
	if err == nil { // a stream's error arrives with the first Recv
		_, err = gs.Recv()
	}
	wantErr(t, "get under an unknown lease", err, codes.NotFound, pb.ReasonLeaseNotFound)

	// Oversized message: rejected by the transport, not a panic or a hang.
	s, err := f.rpc.Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&pb.PutRequest{NamespaceId: f.ns, Data: make([]byte, 8<<20)})
	_, err = s.CloseAndRecv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("oversized message: %v", err)
	}
	// Data before any header.
	s, _ = f.rpc.Put(ctx)
	s.Send(&pb.PutRequest{NamespaceId: f.ns, Data: []byte{1}})
	_, err = s.CloseAndRecv()
	wantErr(t, "put data without header", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	// The node still serves.
	if _, err := f.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: f.ns, Keys: many[:1]}); err != nil {
		t.Fatalf("node unwell after malformed requests: %v", err)
	}
}

func TestHealthAndReflection(t *testing.T) {
	ctx := ctxT(t)
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20})
	conn, err := grpc.NewClient("passthrough:///"+n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	s, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	if !slices.Contains(names, "strata.v1.Strata") || !slices.Contains(names, "strata.v1.Admin") {
		t.Fatalf("reflection lists %v", names)
	}
}
