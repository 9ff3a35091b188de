// Package dial is strata's one place that makes a gRPC client connection:
// the Go client, the operator CLI and the node-to-node hint sender all dial
// through GRPC with one Options, so that transport security, the bearer
// token, message limits and flow-control windows are set once (TLS goes
// here too).
package dial

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Options configures a connection. Zero fields take their defaults.
type Options struct {
	// Token is the tenant (or admin) token sent as "authorization: Bearer
	// <token>" with every call. Default none.
	Token string
	// MaxMessageBytes bounds a message in either direction. Default 8 MiB.
	MaxMessageBytes int
	// Bulk sizes the HTTP/2 windows and socket buffers for page traffic
	// (8 MiB stream and 32 MiB connection windows, 256 KiB buffers);
	// default off: gRPC's defaults, right for small control calls.
	Bulk bool
	// WaitForReady makes a call on a connection that is not ready wait for
	// it (until the call's deadline). Default off: such a call fails at
	// once, so an unreachable node costs one attempt, not a deadline.
	WaitForReady bool
	// Extra are appended to the options GRPC builds (tests, interceptors).
	Extra []grpc.DialOption
}

// DefaultMaxMessageBytes is Options.MaxMessageBytes's default.
const DefaultMaxMessageBytes = 8 << 20

// GRPC prepares a connection to addr (host:port); nothing is sent until the
// first call, whose context bounds the connection attempt.
func GRPC(addr string, o Options) (*grpc.ClientConn, error) {
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.MaxMessageBytes), grpc.MaxCallSendMsgSize(o.MaxMessageBytes),
			grpc.WaitForReady(o.WaitForReady)),
	}
	if o.Bulk {
		opts = append(opts,
			grpc.WithInitialWindowSize(8<<20),
			grpc.WithInitialConnWindowSize(32<<20),
			grpc.WithReadBufferSize(256<<10),
			grpc.WithWriteBufferSize(256<<10))
	}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(Bearer(o.Token)))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, append(opts, o.Extra...)...)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	return conn, nil
}

// Bearer is per-call credentials carrying a token as the authorization
// header, the one place that header is built.
type Bearer string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: tokens
// are sent on plaintext connections too until TLS is configured.
func (Bearer) RequireTransportSecurity() bool { return false }
