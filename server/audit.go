package server

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/peer"
)

// The audit log: every admin action (dropping a namespace, deleting
// pages, setting a TTL) is one record of Config.Audit saying who (the
// caller's tenant, or admin, and its address), what (the operation and its
// arguments, and whether it succeeded) and when (the record's time). The
// node writes tenant changes it reads from etcd there too.

// audit records an admin action of ctx's caller; err is its outcome.
func (s *Server) audit(ctx context.Context, op string, err error, attrs ...any) {
	who := "admin"
	if c, cerr := s.callerOf(ctx); cerr != nil {
		who = "unauthenticated"
	} else if !c.admin {
		who = "tenant:" + c.tenant
	}
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	outcome := "ok"
	if err != nil {
		outcome = err.Error()
	}
	s.cfg.Audit.LogAttrs(ctx, slog.LevelInfo, "audit", append([]slog.Attr{slog.String("who", who),
		slog.String("peer", addr), slog.String("op", op), slog.String("outcome", outcome)}, argsToAttrs(attrs)...)...)
}

func argsToAttrs(args []any) []slog.Attr {
	var out []slog.Attr
	for i := 0; i+1 < len(args); i += 2 {
		k, _ := args[i].(string)
		out = append(out, slog.Any(k, args[i+1]))
	}
	return out
}

// shortHex is a namespace id as the logs print it (its first 12 hex
// digits), whatever its length.
func shortHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 12)
	for _, c := range b[:min(len(b), 6)] {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
