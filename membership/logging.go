package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newStdLogger returns the *log.Logger memberlist wants, forwarding each
// line to lg (with component=memberlist) at the level its "[LEVEL]" prefix
// names.
func newStdLogger(lg *slog.Logger) *log.Logger {
	return log.New(logWriter{lg: lg.With("component", "memberlist")}, "", 0)
}

// logWriter is an io.Writer for a *log.Logger with no flags: each Write is
// one line, "[LEVEL] memberlist: message\n".
type logWriter struct{ lg *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	level, msg := parseLogLine(p)
	if w.lg.Enabled(context.Background(), level) {
		w.lg.Log(context.Background(), level, string(msg))
	}
	return len(p), nil
}

// parseLogLine splits one of memberlist's log lines into a level and the
// message. memberlist's [ERR] lines are failures to reach a peer, which the
// protocol itself handles (that is what failure detection is for), so they
// are warnings for this process; lines without a known prefix are info.
func parseLogLine(p []byte) (slog.Level, []byte) {
	p = bytes.TrimRight(p, "\r\n")
	level := slog.LevelInfo
	if len(p) > 0 && p[0] == '[' {
		if end := bytes.IndexByte(p, ']'); end > 0 {
			switch string(p[1:end]) {
			case "TRACE", "DEBUG":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN", "ERR", "ERROR":
				level = slog.LevelWarn
			}
			p = bytes.TrimLeft(p[end+1:], " ")
		}
	}
	p = bytes.TrimPrefix(p, []byte("memberlist: "))
	return level, p
}
