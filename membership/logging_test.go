package membership

import (
	"log/slog"
	"testing"
)

func TestParseLogLine(t *testing.T) {
	for _, tc := range []struct {
		line  string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n", slog.LevelDebug, "Stream connection from=127.0.0.1:1"},
		{"[INFO] memberlist: Marking b as failed\n", slog.LevelInfo, "Marking b as failed"},
		{"[WARN] memberlist: Refuting a suspect message\n", slog.LevelWarn, "Refuting a suspect message"},
		{"[ERR] memberlist: Failed to send gossip\n", slog.LevelWarn, "Failed to send gossip"},
		{"[ERR] Failed to shutdown transport\n", slog.LevelWarn, "Failed to shutdown transport"},
		{"no prefix at all", slog.LevelInfo, "no prefix at all"},
		{"[ODD] memberlist: x", slog.LevelInfo, "x"},
		{"", slog.LevelInfo, ""},
	} {
		level, msg := parseLogLine([]byte(tc.line))
		if level != tc.level || string(msg) != tc.msg {
			t.Errorf("parseLogLine(%q) = %v, %q; want %v, %q", tc.line, level, msg, tc.level, tc.msg)
		}
	}
}
