package node_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/eviction/hints"
	"github.com/stratakv/strata/internal/poll"
	"github.com/stratakv/strata/internal/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestHandoff: pages put on a node that does not own them (as a client
// does while their owner is unreachable) go back to their owner once it is
// alive: the owner then holds them, the other node no longer does, and a
// client's lookup, which asks the owner, finds them. A page whose parent
// lies on the node that hands it back keeps its place in the sequence.
func TestHandoff(t *testing.T) {
	cluster := startCluster(t, 2, func(c *node.Config) {
		c.Handoff = hints.HandoffConfig{Every: 100 * time.Millisecond, Settle: 300 * time.Millisecond}
	})
	defer cluster.Close()
	a, b := cluster.Nodes[0], cluster.Nodes[1]
	view := viewOf(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range cluster.Nodes {
		seesMembers(t, ctx, n, 2)
	}
	parent, child := ownedBy(view, a.ID(), 1), ownedBy(view, b.ID(), 2) // a sequence: a's page, then b's

	// Both pages put on a, over gRPC straight to it.
	conn, err := grpc.NewClient("passthrough:///"+a.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := pb.NewStrataClient(conn)
	open, err := rpc.OpenNamespace(ctx, &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1,
		Descriptor_: pbconv.DescriptorProto(desc)})
	if err != nil {
		t.Fatal(err)
	}
	size := int(open.GetPageBytes())
	stream, err := rpc.Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []namespace.Key{parent, child} {
		data := pageOf(k, size)
		spec := &pb.PageSpec{Key: k[:], Depth: uint32(i), Size: uint64(size)}
		if i == 1 {
			spec.ParentKey = parent[:]
		}
		msg := &pb.PutRequest{Header: &pb.PutHeader{Page: spec, Checksum: desc.Checksum.Sum(data)}, Data: data}
		if i == 0 {
			msg.NamespaceId = open.GetNamespaceId()
		}
		if err := stream.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.GetResults() {
		if r.GetStatus() != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
			t.Fatalf("put on a: %v", resp.GetResults())
		}
	}

	holds := func(n *testnode.Node, k namespace.Key) bool {
		t.Helper()
		c, err := grpc.NewClient("passthrough:///"+n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		info, err := pb.NewAdminClient(c).StatKeys(ctx, &pb.StatKeysRequest{NamespaceId: open.GetNamespaceId(), Keys: [][]byte{k[:]}})
		if err != nil {
			t.Fatal(err)
		}
		return len(info.GetKeys()[0].GetKey()) > 0
	}
	poll.Until(t, 15*time.Second, 50*time.Millisecond, "b's page handed back to b", func() bool {
		return holds(b, child) && !holds(a, child)
	})
	if !holds(a, parent) {
		t.Fatal("a gave away the page it owns")
	}
	if st := a.HandoffStats(); st.Moved != 1 || st.Refused != 0 {
		t.Fatalf("a's handoff: %+v, want 1 page moved", st)
	}
	// A client finds the whole sequence: the child on its owner.
	_, ns := openNS(t, a.Addr(), client.Options{}, desc)
	lr, err := ns.Lookup(ctx, []namespace.Key{parent, child}, false, 0)
	if err != nil || lr.HitPrefix != 2 {
		t.Fatalf("lookup after the handoff: %+v, %v", lr, err)
	}
	bufs := [][]byte{make([]byte, size), make([]byte, size)}
	found, err := ns.Get(ctx, []namespace.Key{parent, child}, bufs, nil)
	if err != nil || !found[0] || !found[1] || string(bufs[1]) != string(pageOf(child, size)) {
		t.Fatalf("get after the handoff: %v, %v", found, err)
	}
}
