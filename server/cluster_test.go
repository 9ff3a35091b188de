package server_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// startHintServer serves the Cluster service of an open server (no
// tokens: every caller is admin) over st on loopback.
func startHintServer(t *testing.T, st *store.Store) pb.ClusterClient {
	t.Helper()
	srv, err := server.New(server.Config{NodeID: "node-hints", Store: st})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLoopback(t, srv)
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewClusterClient(cc)
}

// A parent-gone notice over the Hints RPC drops the children waiting for
// the gone key; a malformed hint fails the batch before anything is
// applied; notices for namespaces the node does not know are skipped.
func TestHintsParentGone(t *testing.T) {
	st := hostStore(t, 1<<20, store.Config{OrphanGrace: -1})
	ns := store.Namespace{ID: namespace.ID{1, 2, 3}, Tenant: "acme", PageBytes: 4096, Checksum: namespace.CRC32C}
	if err := st.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	parent, child := namespace.Key(key(1)), namespace.Key(key(2))
	data := make([]byte, ns.PageBytes)
	res, err := st.Publisher().Reserve(ns.ID, []store.PageSpec{{Key: child, Parent: parent, HasParent: true, Depth: 1, Size: ns.PageBytes}}, 0)
	if err != nil || res[0].Status != store.Reserved {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	if err := st.Publisher().Write(ns.ID, res[0].WriteID, 0, data); err != nil {
		t.Fatal(err)
	}
	if cs, err := st.Publisher().Commit(ns.ID, res[0].WriteID, ns.PageBytes, ns.Checksum.Sum(data)); cs != store.CommitCommitted {
		t.Fatalf("commit: %v %v", cs, err)
	}
	held := func() bool {
		_, ok, err := st.Admin().Stat(ns.ID, []namespace.Key{child})
		if err != nil {
			t.Fatal(err)
		}
		return ok[0]
	}
	c := startHintServer(t, st)
	gone := &pb.ChildHint{NamespaceId: ns.ID[:], ParentKey: parent[:], Gone: true}

	_, err = c.Hints(ctxT(t), &pb.HintsRequest{FromNode: "a", Hints: []*pb.ChildHint{gone,
		{NamespaceId: ns.ID[:], ParentKey: parent[:5], Gone: true}}})
	wantErr(t, "a short key", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	if !held() {
		t.Fatal("a rejected batch dropped the child")
	}

	other := namespace.ID{9}
	resp, err := c.Hints(ctxT(t), &pb.HintsRequest{FromNode: "a", Hints: []*pb.ChildHint{
		{NamespaceId: other[:], ParentKey: parent[:], Gone: true}, gone}})
	if err != nil || resp.GetApplied() != 2 {
		t.Fatalf("hints: %v, applied %d; want 2", err, resp.GetApplied())
	}
	if held() {
		t.Fatal("the child of a gone parent is still held")
	}
	if s, _ := st.Admin().NamespaceStats(ns.ID); s.Orphaned != 1 {
		t.Fatalf("orphaned %d, want 1", s.Orphaned)
	}
}

// hostStore is a store of cfg over a host tier of capacity bytes, closed
// (tier too) when the test ends.
func hostStore(t *testing.T, capacity int64, cfg store.Config) *store.Store {
	t.Helper()
	host, err := tiers.NewHost(tiers.HostConfig{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	cfg.Tiers = []tiers.Tier{host}
	st, err := store.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// serveLoopback serves srv's gRPC services on a free loopback port, on a
// gRPC server built with opts, and returns its address. On cleanup it
// stops the server.
func serveLoopback(t *testing.T, srv *server.Server, opts ...grpc.ServerOption) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	srv.Register(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		g.Stop()
		<-served
	})
	return l.Addr().String()
}
