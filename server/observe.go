package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/metrics"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
)

// requestIDKey carries a request's id in its context.
type requestIDKey struct{}

// requestID takes the caller's x-request-id, or makes one, so that one
// request's log lines can be found together.
func requestID(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-request-id"); len(v) > 0 && len(v[0]) <= 64 {
			return v[0]
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logger returns the server's logger carrying the request id of ctx.
func (s *Server) logger(ctx context.Context) *slog.Logger {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		return s.log.With("request_id", id)
	}
	return s.log
}

// finish records a call's latency and logs it: failures at warn (client
// mistakes) or error (Internal), the rest at debug.
func (s *Server) finish(ctx context.Context, method string, start time.Time, err error) {
	d := time.Since(start)
	st := status.Convert(err)
	s.metrics.RPC(method, st.Code().String(), d)
	lg := s.logger(ctx)
	switch {
	case err == nil:
		lg.Debug("rpc", "method", method, "duration", d)
	case st.Code().String() == "Internal":
		lg.Error("rpc failed", "method", method, "code", st.Code().String(), "err", st.Message(), "duration", d)
	default:
		lg.Warn("rpc refused", "method", method, "code", st.Code().String(), "err", st.Message(), "duration", d)
	}
}

// UnaryInterceptor gives each call a request id, and records and logs it.
func (s *Server) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx = context.WithValue(ctx, requestIDKey{}, requestID(ctx))
	start := time.Now()
	resp, err := h(ctx, req)
	s.finish(ctx, info.FullMethod, start, err)
	return resp, err
}

// StreamInterceptor does for streams what UnaryInterceptor does for calls.
func (s *Server) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx := context.WithValue(ss.Context(), requestIDKey{}, requestID(ss.Context()))
	start := time.Now()
	err := h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	s.finish(ctx, info.FullMethod, start, err)
	return err
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *ctxStream) Context() context.Context { return c.ctx }

// Metrics is the server's metrics registry, for the node's admin HTTP
// server.
func (s *Server) Metrics() *metrics.Registry { return s.metrics }

// describe labels a namespace for metrics.
func (s *Server) describe(id namespace.ID) (metrics.Labels, bool) {
	d, ok := s.descriptor(id)
	if !ok {
		return metrics.Labels{}, false
	}
	return metrics.Labels{Tenant: d.Tenant, Model: d.Model, PageTokens: int(d.PageTokens)}, true
}

// recordHits counts a lookup's hit prefix in tokens and prefill FLOPs.
//
// The store prices each page of the prefix at its depth, so the nodes of a
// cluster, each answering for its own pages of one prompt, add up to the
// prefill of the whole prefix.
func (s *Server) recordHits(id namespace.ID, res store.LookupResult) {
	if res.HitPrefix == 0 {
		return
	}
	d, ok := s.descriptor(id)
	if !ok {
		return
	}
	s.metrics.Saved(id, metrics.Labels{Tenant: d.Tenant, Model: d.Model}, res.HitTokens, res.SavedFLOPs)
}

// recordRetracted counts the hits of earlier lookups that a cluster client
// reported past another node's miss (Orphans), taken back from the store's
// counters (store.Uncount).
func (s *Server) recordRetracted(id namespace.ID, tokens int, flops float64) {
	if tokens == 0 && flops == 0 {
		return
	}
	d, ok := s.descriptor(id)
	if !ok {
		return
	}
	s.metrics.Retracted(id, metrics.Labels{Tenant: d.Tenant, Model: d.Model}, tokens, flops)
}
