package peer

import (
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
)

// TestRoute: child and value hints go to their parent's owner (dropped
// when that is self), parent-gone notices to every member but self, after
// the member's other hints.
func TestRoute(t *testing.T) {
	owner := func(k namespace.Key) int { return int(k[0]) }
	hs := []store.ChildHint{
		{Parent: namespace.Key{1}, Added: true},
		{Parent: namespace.Key{0}, Added: true}, // self's: dropped
		{Parent: namespace.Key{2}, Gone: true, Worth: 3},
		{Parent: namespace.Key{2}, Worth: 5},
	}
	groups, dropped := Route(3, 0, owner, hs)
	if dropped != 1 {
		t.Fatalf("dropped %d, want 1", dropped)
	}
	want := [][]store.ChildHint{
		nil,
		{{Parent: namespace.Key{1}, Added: true}, {Parent: namespace.Key{2}, Gone: true}},
		{{Parent: namespace.Key{2}, Worth: 5}, {Parent: namespace.Key{2}, Gone: true}},
	}
	checkGroups(t, groups, want)
}

// TestRouteCandidates: child and value hints go to both of their parent's
// first candidates but self (a refused parent lives on its second), and
// are dropped only when self is the only candidate.
func TestRouteCandidates(t *testing.T) {
	cands := func(k namespace.Key, dst []int) []int {
		if k[1] == 9 {
			return append(dst[:0], int(k[0])) // a one-member view
		}
		return append(dst[:0], int(k[0]), int(k[1]))
	}
	hs := []store.ChildHint{
		{Parent: namespace.Key{1, 2}, Added: true},
		{Parent: namespace.Key{0, 2}, Worth: 4},    // owner is self: the second candidate gets it
		{Parent: namespace.Key{0, 9}, Added: true}, // self is the only candidate: dropped
		{Parent: namespace.Key{2, 1}, Gone: true},
	}
	groups, dropped := RouteCandidates(3, 0, cands, hs)
	if dropped != 1 {
		t.Fatalf("dropped %d, want 1", dropped)
	}
	want := [][]store.ChildHint{
		nil,
		{{Parent: namespace.Key{1, 2}, Added: true}, {Parent: namespace.Key{2, 1}, Gone: true}},
		{{Parent: namespace.Key{1, 2}, Added: true}, {Parent: namespace.Key{0, 2}, Worth: 4}, {Parent: namespace.Key{2, 1}, Gone: true}},
	}
	checkGroups(t, groups, want)
}

// checkGroups fails t unless every member got exactly its wanted hints, in
// order.
func checkGroups(t *testing.T, groups, want [][]store.ChildHint) {
	t.Helper()
	for i := range want {
		if len(groups[i]) != len(want[i]) {
			t.Fatalf("member %d gets %+v, want %+v", i, groups[i], want[i])
		}
		for j := range want[i] {
			if groups[i][j] != want[i][j] {
				t.Fatalf("member %d hint %d: %+v, want %+v", i, j, groups[i][j], want[i][j])
			}
		}
	}
}
