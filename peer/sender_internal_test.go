package peer

import (
	"log/slog"
	"slices"
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

// TestCoalesce: a parent's value hints become one with the largest worth,
// where the last of them was; added, removed and gone hints keep their
// places and are never merged, nor are value hints of other parents or of
// the same key in another namespace.
func TestCoalesce(t *testing.T) {
	ns1, ns2 := [32]byte{1}, [32]byte{2}
	p, q := [32]byte{0xa}, [32]byte{0xb}
	in := []store.ChildHint{
		{NS: ns1, Parent: p, Worth: 3},
		{NS: ns1, Parent: p, Added: true},
		{NS: ns1, Parent: q, Worth: 1},
		{NS: ns1, Parent: p, Worth: 7},
		{NS: ns2, Parent: p, Worth: 2},
		{NS: ns1, Parent: p},
		{NS: ns1, Parent: p, Worth: 5},
		{NS: ns1, Parent: q, Gone: true},
		{NS: ns1, Parent: q, Added: true},
	}
	want := []store.ChildHint{
		{NS: ns1, Parent: p, Added: true},
		{NS: ns1, Parent: q, Worth: 1},
		{NS: ns2, Parent: p, Worth: 2},
		{NS: ns1, Parent: p},
		{NS: ns1, Parent: p, Worth: 7},
		{NS: ns1, Parent: q, Gone: true},
		{NS: ns1, Parent: q, Added: true},
	}
	got := Coalesce(append([]store.ChildHint(nil), in...))
	if !slices.Equal(got, want) {
		t.Fatalf("coalesced\n%+v\nwant\n%+v", got, want)
	}
}
