package testnode_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/internal/testing/leaktest"
	"github.com/stratakv/strata/internal/testing/testnode"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestMain checks that everything the harness starts stops with its test.
func TestMain(m *testing.M) { leaktest.Main(m) }

// fakeAdmin answers NodeInfo with a node ID of its own.
type fakeAdmin struct{ pb.UnimplementedAdminServer }

func (fakeAdmin) NodeInfo(context.Context, *pb.NodeInfoRequest) (*pb.NodeInfoResponse, error) {
	return &pb.NodeInfoResponse{NodeId: "node-fake"}, nil
}

// TestServeDial: Dial reaches what Serve serves.
func TestServeDial(t *testing.T) {
	addr := testnode.Serve(t, func(s *grpc.Server) { pb.RegisterAdminServer(s, fakeAdmin{}) })
	info, err := pb.NewAdminClient(testnode.Dial(t, addr)).NodeInfo(t.Context(), &pb.NodeInfoRequest{})
	if err != nil || info.GetNodeId() != "node-fake" {
		t.Fatalf("NodeInfo from the fake at %s: %v, %v", addr, info, err)
	}
}

// TestClosedAddr: nothing listens on a closed address.
func TestClosedAddr(t *testing.T) {
	addr := testnode.ClosedAddr(t)
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialing %s: %v, want connection refused", addr, err)
	}
}

// TestClusterGhost: a cluster's nodes see each other alive, and then the
// ghost alive too, though its gRPC address refuses connections.
func TestClusterGhost(t *testing.T) {
	c := testnode.StartCluster(t, 2, nil)
	a, b := c.Nodes[0], c.Nodes[1]
	conns := []*grpc.ClientConn{testnode.Dial(t, a.Addr()), testnode.Dial(t, b.Addr())}
	alive := map[string]string{a.ID(): "alive", b.ID(): "alive"}
	for _, cc := range conns {
		testnode.AwaitMembers(t, cc, alive)
	}
	_, deadAddr := testnode.StartGhost(t, a.GossipAddress())
	alive["node-ghost"] = "alive"
	for _, cc := range conns {
		testnode.AwaitMembers(t, cc, alive)
	}
	if c, err := net.Dial("tcp", deadAddr); err == nil {
		c.Close()
		t.Fatalf("the ghost's gRPC address %s accepts connections", deadAddr)
	}
}
