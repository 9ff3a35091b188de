package hints

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
