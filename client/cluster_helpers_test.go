package client_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// clusterNode is a real node of a test cluster that a test may stop early
// (Close; the test's cleanup closes it otherwise).
type clusterNode = testnode.Node

// startCluster runs n real nodes in-process that gossip with each other:
// the first hosts an embedded etcd, the others register there and find
// their seeds in it. Close nodes other than the first: it holds the etcd.
func startCluster(t testing.TB, n int) []*clusterNode {
	t.Helper()
	var nodes []*clusterNode
	for range n {
		nodes = append(nodes, addNode(t, nodes))
	}
	waitNodeView(t, nodes[0], n)
	return nodes
}

// addNode starts one more node of the cluster of nodes (a first one when
// nodes is empty).
func addNode(t testing.TB, nodes []*clusterNode) *clusterNode { return addNodeWith(t, nodes, nil) }

// addNodeWith is addNode with mod applied to the node's config.
func addNodeWith(t testing.TB, nodes []*clusterNode, mod func(*node.Config)) *clusterNode {
	t.Helper()
	cfg := node.Config{HostBytes: 64 << 20}
	if len(nodes) > 0 {
		cfg.EtcdEndpoints = nodes[0].EtcdEndpoints()
	}
	if mod != nil {
		mod(&cfg)
	}
	return testnode.Start(t, cfg)
}

// waitNodeView waits until nd reports want alive members.
func waitNodeView(t testing.TB, nd *clusterNode, want int) {
	t.Helper()
	conn := rawConn(t, nd.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := awaitAlive(ctx, conn, want); err != nil {
		t.Fatalf("waiting for %d alive members: %v", want, err)
	}
}

// awaitAlive watches the members conn's node reports until want of them
// are alive.
func awaitAlive(ctx context.Context, conn *grpc.ClientConn, want int) error {
	stream, err := pb.NewClusterClient(conn).WatchMembers(ctx, &pb.MembersRequest{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if alivePB(resp.GetMembers()) == want {
			return nil
		}
	}
}

func alivePB(ms []*pb.Member) int {
	n := 0
	for _, m := range ms {
		if m.GetState() == pb.MemberState_MEMBER_STATE_ALIVE {
			n++
		}
	}
	return n
}

func rawConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// nodePages is how many pages a node holds, from its Admin NodeInfo.
func nodePages(t testing.TB, addr string) int {
	t.Helper()
	info, err := pb.NewAdminClient(rawConn(t, addr)).NodeInfo(ctxT(t), &pb.NodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return int(info.GetPages())
}

// waitMembers waits until the client's view satisfies ok.
func waitMembers(t testing.TB, c *client.Client, what string, ok func([]client.Member) bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		changed := c.ViewChanged()
		if ok(c.Members()) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("view never got %s: %+v", what, c.Members())
		}
	}
}

func alive(n int) func([]client.Member) bool {
	return func(ms []client.Member) bool {
		a := 0
		for _, m := range ms {
			if m.State == client.MemberAlive {
				a++
			}
		}
		return a == n
	}
}

// pageData is the bytes of the page of key k: its key repeated, so that a
// page read for the wrong key is caught.
func pageData(k namespace.Key, size int) []byte { return bytes.Repeat(k[:8], size/8) }

// owners names the node that owns each key in c's current view.
func owners(c *client.Client, keys []namespace.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = c.Owner(k)
	}
	return out
}

func putAll(t testing.TB, ns *client.Namespace, keys []namespace.Key) {
	t.Helper()
	res, err := ns.Put(ctxT(t), client.ChainPages(keys, pagesFor(ns, keys)))
	mustStore(t, "put", res, err)
}

func buffers(n, size int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	return bufs
}

// checkBytes fails the test if a page reported found holds other bytes
// than its own.
func checkBytes(t testing.TB, ns *client.Namespace, keys []namespace.Key, bufs [][]byte, found []bool) int {
	t.Helper()
	n := 0
	for i, ok := range found {
		if !ok {
			continue
		}
		n++
		if !bytes.Equal(bufs[i][:ns.PageBytes()], pageData(keys[i], ns.PageBytes())) {
			t.Errorf("page %d found with wrong bytes", i)
		}
	}
	return n
}

// fakeCluster is an in-test Cluster service whose view the test sets.
type fakeCluster struct {
	pb.UnimplementedClusterServer
	id string

	mu      sync.Mutex
	view    *pb.MembersResponse
	changed chan struct{}
}

func member(id, addr string, state pb.MemberState) *pb.Member {
	return &pb.Member{NodeId: id, GrpcAddress: addr, State: state, Weight: 1}
}

// serveFake runs a fake Cluster service on a loopback port; stop ends it
// (the test's cleanup does otherwise).
func serveFake(t testing.TB, id string) (f *fakeCluster, addr string, stop func()) {
	t.Helper()
	f = &fakeCluster{id: id, view: &pb.MembersResponse{NodeId: id}, changed: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterClusterServer(srv, f)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Stop()
			<-served
		})
	}
	t.Cleanup(stop)
	return f, lis.Addr().String(), stop
}

func (f *fakeCluster) set(members ...*pb.Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view = &pb.MembersResponse{NodeId: f.id, Members: members}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeCluster) now() (*pb.MembersResponse, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return proto.Clone(f.view).(*pb.MembersResponse), f.changed
}

func (f *fakeCluster) Members(context.Context, *pb.MembersRequest) (*pb.MembersResponse, error) {
	v, _ := f.now()
	return v, nil
}

func (f *fakeCluster) WatchMembers(_ *pb.MembersRequest, stream pb.Cluster_WatchMembersServer) error {
	for {
		v, changed := f.now()
		if err := stream.Send(v); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

// hungListener accepts connections and never reads or answers: a node that
// hangs. It closes with the test.
func hungListener(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		lis.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return lis.Addr().String()
}

// within fails the test if fn takes longer than d.
func within(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	if took := time.Since(start); took > d {
		t.Errorf("%s took %v, more than %v", what, took, d)
	}
}
