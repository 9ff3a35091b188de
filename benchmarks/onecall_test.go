package benchmarks

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// oneCallChunk is the data chunk of a one-call put: the node's default
// MaxChunk, which the client's Write stream uses too.
const oneCallChunk = 1 << 20

// BenchmarkPutOneCall is BenchmarkPut over the wire protocol's one-call Put
// (one client-streaming RPC per page: header, bytes, result), which the node
// serves but the Go client does not use. It drives the generated stub over
// connections dialed with the client's own options, so the difference from
// BenchmarkPut is the two extra round trips of the two-phase put.
func BenchmarkPutOneCall(b *testing.B) {
	benchPut(b, func(b *testing.B, addr string, nss []*client.Namespace) putFunc {
		rpcs := make([]pb.StrataClient, len(nss))
		for i := range rpcs {
			rpcs[i] = pb.NewStrataClient(dialRaw(b, addr))
		}
		return func(ctx context.Context, c int, key namespace.Key, data []byte) error {
			return putOneCall(ctx, rpcs[c], nss[c], key, data)
		}
	})
}

// dialRaw opens a gRPC connection to addr with the options client.Dial
// uses.
func dialRaw(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	const maxMsg = 8 << 20
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithInitialWindowSize(8<<20),
		grpc.WithInitialConnWindowSize(32<<20),
		grpc.WithReadBufferSize(256<<10),
		grpc.WithWriteBufferSize(256<<10))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// putOneCall publishes one page with the one-call Put and fails unless it
// is committed.
func putOneCall(ctx context.Context, rpc pb.StrataClient, ns *client.Namespace, key namespace.Key, data []byte) error {
	stream, err := rpc.Put(ctx)
	if err != nil {
		return err
	}
	id := ns.ID()
	msg := &pb.PutRequest{NamespaceId: id[:], Header: &pb.PutHeader{
		Page:     &pb.PageSpec{Key: key[:], Size: uint64(len(data))},
		Checksum: ns.Descriptor().Checksum.Sum(data)}}
	for off := 0; off < len(data); off += oneCallChunk {
		msg.Data = data[off:min(len(data), off+oneCallChunk)]
		if err := stream.Send(msg); err != nil {
			_, err = stream.CloseAndRecv()
			return err
		}
		msg.NamespaceId, msg.Header = nil, nil
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return err
	}
	if len(resp.GetResults()) != 1 || resp.GetResults()[0].GetStatus() != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
		return fmt.Errorf("page %x: %v", key[:6], resp.GetResults())
	}
	return nil
}
