// Package testlog gives tests a logger that writes to the test's output
// and goes quiet when the test ends: libraries' timers (memberlist's
// suspicion timers, etcd's retries) may log after Close, and writing to a
// finished test panics. Buffer collects log output that a test inspects.
package testlog

import (
	"bytes"
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

// Buffer collects log output for a test's assertions or for printing when
// it fails; goroutines may write while the test reads. The zero Buffer is
// ready to use.
type Buffer struct {
	// Limit, when not 0, is the size past which further writes are dropped.
	Limit int

	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Limit > 0 && b.buf.Len() > b.Limit {
		return len(p), nil
	}
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger is a text logger at debug level writing into b.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
