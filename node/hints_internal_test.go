package node

import (
	"log/slog"
	"testing"

	"github.com/stratakv/strata/store"
)

// TestHintQueueBounded: hints beyond the queue's bound are dropped and
// counted, and any queued hint wakes the sender (no timed batching).
func TestHintQueueBounded(t *testing.T) {
	h := newHintSender("self", "", slog.New(slog.DiscardHandler))
	defer h.close()
	h.add(nil)
	select {
	case <-h.wake:
		t.Fatal("woken with nothing queued")
	default:
	}
	h.add(make([]store.ChildHint, 1))
	select {
	case <-h.wake:
	default:
		t.Fatal("a queued hint did not wake the sender")
	}
	h.add(make([]store.ChildHint, hintQueueMax))
	if got, want := h.stats().Dropped, int64(1); got != want {
		t.Fatalf("dropped %d hints, want %d", got, want)
	}
	if len(h.pending) != hintQueueMax {
		t.Fatalf("%d hints queued, want the bound %d", len(h.pending), hintQueueMax)
	}
}
