package testnode

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// AwaitViewTimeout bounds each wait for a membership view to settle.
const AwaitViewTimeout = 20 * time.Second

// Dial connects to the gRPC address addr without TLS, with opts besides;
// the test's cleanup closes the connection.
func Dial(tb testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// Serve serves a gRPC server on a free loopback port, with the services
// register adds (fakes of a node that behaves in a way a real one does
// not), and returns its address; the test's cleanup stops it.
func Serve(tb testing.TB, register func(*grpc.Server)) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	tb.Cleanup(func() {
		s.Stop()
		<-served
	})
	return l.Addr().String()
}

// AwaitMembers waits, up to AwaitViewTimeout, until the membership view
// of the node at cc is want: node ID → state ("alive", "suspect", "dead",
// "left"), or states as "dead|left". It follows WatchMembers, which sends
// the view after every change.
func AwaitMembers(tb testing.TB, cc *grpc.ClientConn, want map[string]string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), AwaitViewTimeout)
	defer cancel()
	stream, err := pb.NewClusterClient(cc).WatchMembers(ctx, &pb.MembersRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	var got map[string]string
	for {
		view, err := stream.Recv()
		if err != nil {
			tb.Fatalf("node at %s sees %v, want %v: %v", strings.TrimPrefix(cc.Target(), "passthrough:///"), got, want, err)
		}
		got = map[string]string{}
		for _, m := range view.GetMembers() {
			got[m.GetNodeId()] = strings.ToLower(strings.TrimPrefix(m.GetState().String(), "MEMBER_STATE_"))
		}
		if maps.EqualFunc(got, want, func(state, states string) bool {
			return slices.Contains(strings.Split(states, "|"), state)
		}) {
			return
		}
	}
}

// StartGhost starts a member named "node-ghost" that joins the gossip
// cluster of the member at seed (a gossip address) but whose gRPC address,
// deadAddr, answers nothing; the test's cleanup closes it, unless the test
// shut it down before.
func StartGhost(tb testing.TB, seed string) (ghost *membership.Membership, deadAddr string) {
	tb.Helper()
	deadAddr = ClosedAddr(tb)
	ghost, err := membership.Start(tb.Context(), membership.Config{NodeID: "node-ghost", Seeds: []string{seed},
		Meta: func() membership.Meta { return membership.Meta{GRPCAddress: deadAddr} }})
	if err != nil {
		tb.Fatalf("starting the ghost member: %v", err)
	}
	tb.Cleanup(func() { ghost.Close() })
	return ghost, deadAddr
}

// PutOn puts the pages of keys, a chain (each the parent of the next), in
// namespace d on the node at addr over gRPC, straight to it as a client
// does while their owner is away, with page(k, size) as each page's bytes;
// every page must commit. It returns the namespace's ID and page size.
func PutOn(tb testing.TB, ctx context.Context, addr string, d namespace.Descriptor, keys []namespace.Key,
	page func(k namespace.Key, size int) []byte) ([]byte, int) {
	tb.Helper()
	rpc := pb.NewStrataClient(Dial(tb, addr))
	open, err := rpc.OpenNamespace(ctx, &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1,
		Descriptor_: pbconv.DescriptorProto(d)})
	if err != nil {
		tb.Fatal(err)
	}
	size := int(open.GetPageBytes())
	stream, err := rpc.Put(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	sum := d.Normalize().Checksum
	for i, k := range keys {
		data := page(k, size)
		spec := &pb.PageSpec{Key: k[:], Depth: uint32(i), Size: uint64(size)}
		if i > 0 {
			spec.ParentKey = keys[i-1][:]
		}
		msg := &pb.PutRequest{Header: &pb.PutHeader{Page: spec, Checksum: sum.Sum(data)}, Data: data}
		if i == 0 {
			msg.NamespaceId = open.GetNamespaceId()
		}
		if err := stream.Send(msg); err != nil {
			tb.Fatal(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range resp.GetResults() {
		if r.GetStatus() != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
			tb.Fatalf("put on %s: %v", addr, resp.GetResults())
		}
	}
	return open.GetNamespaceId(), size
}
