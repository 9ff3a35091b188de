package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
)

// TestErrorsAreStatusesBeforeInterceptors: a handler's error reaches the
// client, and every interceptor on the way, as its gRPC status and reason,
// for calls and streams, with and without interceptors.
func TestErrorsAreStatusesBeforeInterceptors(t *testing.T) {
	srv, err := server.New(server.Config{NodeID: "n", Store: hostStore(t, 1<<20, store.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan codes.Code, 4)
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		seen <- status.Code(err)
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		err := h(srv, ss)
		seen <- status.Code(err)
		return err
	}
	for _, opts := range [][]grpc.ServerOption{nil, {grpc.ChainUnaryInterceptor(srv.UnaryInterceptor, unary),
		grpc.ChainStreamInterceptor(srv.StreamInterceptor, stream)}} {
		cc, err := grpc.NewClient("passthrough:///"+serveLoopback(t, srv, opts...), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		rpc := pb.NewStrataClient(cc)
		ns := make([]byte, 32)
		_, err = rpc.Lookup(context.Background(), &pb.LookupRequest{NamespaceId: ns, Keys: [][]byte{make([]byte, 32)}})
		wantErr(t, "lookup", err, codes.NotFound, pb.ReasonNamespaceNotFound)
		gs, err := rpc.Get(context.Background(), &pb.GetRequest{NamespaceId: ns[:3]})
		if err == nil {
			_, err = gs.Recv()
		}
		wantErr(t, "get", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
		cc.Close()
		if opts != nil {
			for _, want := range []codes.Code{codes.NotFound, codes.InvalidArgument} {
				select {
				case got := <-seen:
					if got != want {
						t.Errorf("interceptor saw %v, want %v", got, want)
					}
				default: // the calls have returned: the interceptors ran
					t.Errorf("the interceptor did not see the %v call", want)
				}
			}
		}
	}
}
