package registry

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdLogLevel is the lowest zap level forwarded from etcd's server and
// client to strata's logger. Below it etcd is far too chatty for a node's
// log (every election, every compaction, every retried RPC).
const etcdLogLevel = zapcore.ErrorLevel

// newZapLogger returns a zap logger that forwards entries at min or above to
// lg, so that etcd's logs end up in the node's structured log with
// component=etcd. While quiet (if not nil) returns true, entries are
// demoted to debug: etcd logs its own orderly shutdown as errors ("server
// closed", "use of closed network connection"). A nil lg discards
// everything.
func newZapLogger(lg *slog.Logger, min zapcore.Level, quiet func() bool) *zap.Logger {
	if lg == nil {
		return zap.NewNop()
	}
	h := lg.Handler().WithAttrs([]slog.Attr{slog.String("component", "etcd")})
	return zap.New(&slogCore{h: h, min: min, quiet: quiet})
}

// slogCore is a zapcore.Core writing to a slog.Handler.
type slogCore struct {
	h     slog.Handler
	min   zapcore.Level
	quiet func() bool
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return l >= c.min && c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h.WithAttrs(attrs(fields)), min: c.min, quiet: c.quiet}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(e.Level) {
		return ce
	}
	if c.quiet != nil && e.Level < zapcore.DPanicLevel && c.quiet() {
		if !c.h.Enabled(context.Background(), slog.LevelDebug) {
			return ce
		}
		e.Level = zapcore.DebugLevel
	}
	return ce.AddCore(e, c)
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// attrs converts zap fields through zap's map encoder, which knows every
// field type (errors, durations, arrays, objects).
func attrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		out = append(out, slog.Any(k, enc.Fields[k]))
	}
	return out
}
