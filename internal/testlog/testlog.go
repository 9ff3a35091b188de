// Package testlog gives tests a logger that writes to the test's output
// and goes quiet when the test ends: libraries' timers (memberlist's
// suspicion timers, etcd's retries) may log after Close, and writing to a
// finished test panics.
package testlog

import (
	"io"
	"log/slog"
	"sync"
	"testing"
)

// New returns a text logger at level writing to t's output until t ends.
func New(t testing.TB, level slog.Level) *slog.Logger {
	w := &writer{w: t.Output()}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type writer struct {
	mu   sync.Mutex
	w    io.Writer
	done bool // guarded by mu
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.w.Write(p)
}

func (w *writer) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
