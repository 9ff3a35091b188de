// Package dial is strata's one place that makes a gRPC client connection:
// the Go client, the operator CLI and the node-to-node hint sender all dial
// through GRPC with one Options, so that transport security, the bearer
// token, message limits and flow-control windows are set once. With TLS
// files (internal/certs) the connection is TLS, the server verified
// against the CA bundle, and a client certificate offered where given.
package dial

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/internal/certs"
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
	// CA, Cert and Key are PEM files (internal/certs, re-read when they
	// change): with any of them the connection is TLS, the node's
	// certificate verified against CA (default the system roots) and
	// ServerName, and Cert and Key offered to a node that verifies
	// clients (mTLS). Default none: plaintext.
	CA, Cert, Key string
	// ServerName is the name the node's certificate must carry. Default
	// the host of the address dialed.
	ServerName string
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
	creds := insecure.NewCredentials()
	if o.TLSEnabled() {
		cfg, err := TLSConfig(addr, o)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
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

// TLSEnabled reports whether o names a TLS file: connections are TLS.
func (o Options) TLSEnabled() bool { return o.CA != "" || o.Cert != "" || o.Key != "" }

// TLSConfig is the TLS configuration for dialing addr with o's files and
// server name, for gRPC and the raw data plane alike.
func TLSConfig(addr string, o Options) (*tls.Config, error) {
	name := o.ServerName
	if name == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dialing %s: %w", addr, err)
		}
		name = host
	}
	cfg, err := certs.Client(certs.Files{CA: o.CA, Cert: o.Cert, Key: o.Key}, name)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	return cfg, nil
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
