package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transport"
)

// The raw listener is the data plane for clients on other hosts: the frame
// protocol (proto/frame, SPEC.md) over TCP, with page bytes inline, inside
// TLS when the node has a certificate (RawConfig.TLS; plaintext is then
// refused), and closed when idle (RawConfig.IdleTimeout). A
// connection authenticates with a tenant token exactly as gRPC calls do
// (the same authenticate; no peer check: it sees only what the token
// allows, never the arena). Its requests go through the same request layer
// as gRPC's (requests.go, frame_ops.go): Read answers each page with a
// frame whose bytes are written straight from the store's pinned view of
// the page; Reserve, Write (bytes inline) and Commit, or one Put, publish
// pages through the store, which verifies size and checksum at commit. gRPC stays the control and compatibility
// path; the node advertises this listener's address in a header of its
// OpenNamespace answers (Advertise).

// RawConfig configures the raw listener.
type RawConfig struct {
	// Listen is the TCP address to listen on ("127.0.0.1:0": a free
	// port). Required.
	Listen string
	// Advertise is the address clients are told. Default the listener's
	// address (an unspecified host, 0.0.0.0 or ::, tells clients to use
	// the host they reached gRPC at).
	Advertise string
	// MaxFrame bounds a request frame. Default frame.DefaultMaxFrame.
	MaxFrame int
	// HelloTimeout bounds the handshake. Default 5s.
	HelloTimeout time.Duration
	// WriteTimeout bounds writing the answer of one Read: a client that
	// stops reading loses its connection rather than keep pages pinned.
	// Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that sends no request for that
	// long (between half of it and all of it); clients dial again. Default
	// 2 minutes; negative: never.
	IdleTimeout time.Duration
	// TLS, if set, makes every connection TLS (the handshake bounded by
	// HelloTimeout): a client that speaks plaintext fails it and is
	// closed. Default nil: plaintext.
	TLS *tls.Config
}

// RawListener accepts raw data-plane connections until Close.
type RawListener struct {
	frameListener
	cfg RawConfig
}

// ListenRaw starts the raw data plane on cfg.Listen.
func (s *Server) ListenRaw(cfg RawConfig) (*RawListener, error) {
	if cfg.Listen == "" {
		return nil, errors.New("raw: Listen is required")
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = frame.DefaultMaxFrame
	}
	if cfg.HelloTimeout <= 0 {
		cfg.HelloTimeout = 5 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("raw: listening on %s: %w", cfg.Listen, err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = lis.Addr().String()
	}
	l := &RawListener{frameListener: frameListener{s: s, name: "raw", lis: lis}, cfg: cfg}
	l.start(func(nc net.Conn) (*transport.Conn, *frameConn) {
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if cfg.TLS != nil {
			nc = tls.Server(transport.UnderTLS(nc), cfg.TLS) // the handshake runs at the Hello's read, under its deadline
		}
		c := transport.NewStreamConn(nc, cfg.MaxFrame)
		return c, &frameConn{s: s, c: c, writes: map[uint64]heldWrite{},
			cfg: connConfig{plane: "raw", helloTimeout: cfg.HelloTimeout, writeTimeout: cfg.WriteTimeout, idleTimeout: max(cfg.IdleTimeout, 0)}}
	})
	return l, nil
}

// Addr is the listener's address.
func (l *RawListener) Addr() string { return l.lis.Addr().String() }

// Advertise is a gRPC unary interceptor that names the raw address in the
// frame.AddrHeader header of OpenNamespace answers. A nil listener
// advertises nothing, so a node can install it unconditionally.
func (l *RawListener) Advertise(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if l != nil && info.FullMethod == pb.Strata_OpenNamespace_FullMethodName {
		_ = grpc.SetHeader(ctx, metadata.Pairs(frame.AddrHeader, l.cfg.Advertise))
	}
	return h(ctx, req)
}

// Close stops accepting, closes every connection (aborting the
// reservations they hold) and waits for their goroutines.
func (l *RawListener) Close() error {
	_, err := l.close()
	return err
}
