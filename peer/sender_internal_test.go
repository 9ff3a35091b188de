package peer

import (
	"log/slog"
	"testing"

	"github.com/stratakv/strata/internal/dial"
	"github.com/stratakv/strata/store"
)

// TestHintQueueBounded: hints beyond the queue's bound are dropped and
// counted, and any queued hint wakes the sender (no timed batching).
func TestHintQueueBounded(t *testing.T) {
	h := New("self", dial.Options{}, slog.New(slog.DiscardHandler))
	defer h.Close()
	h.Add(nil)
	select {
	case <-h.wake:
		t.Fatal("woken with nothing queued")
	default:
	}
	h.Add(make([]store.ChildHint, 1))
	select {
	case <-h.wake:
	default:
		t.Fatal("a queued hint did not wake the sender")
	}
	h.Add(make([]store.ChildHint, queueMax))
	if got, want := h.Stats().Dropped, int64(1); got != want {
		t.Fatalf("dropped %d hints, want %d", got, want)
	}
	if len(h.pending) != queueMax {
		t.Fatalf("%d hints queued, want the bound %d", len(h.pending), queueMax)
	}
}
