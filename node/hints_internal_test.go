package node

import (
	"log/slog"
	"testing"

	"github.com/stratakv/strata/store"
)

// TestHintQueueBounded: hints beyond the queue's bound are dropped and
// counted, and a full batch wakes the sender.
func TestHintQueueBounded(t *testing.T) {
	h := newHintSender("self", "", slog.New(slog.DiscardHandler))
	defer h.close()
	h.add(make([]store.ChildHint, hintBatch-1))
	select {
	case <-h.wake:
		t.Fatal("woken before a batch was full")
	default:
	}
	h.add(make([]store.ChildHint, hintQueueMax))
	select {
	case <-h.wake:
	default:
		t.Fatal("a full batch did not wake the sender")
	}
	if got, want := h.stats().Dropped, int64(hintBatch-1); got != want {
		t.Fatalf("dropped %d hints, want %d", got, want)
	}
	if len(h.pending) != hintQueueMax {
		t.Fatalf("%d hints queued, want the bound %d", len(h.pending), hintQueueMax)
	}
}
