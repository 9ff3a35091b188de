package coord

import (
	"slices"
	"testing"
)

// With NoFloor the store gets zero cutoffs whatever was computed; without,
// it gets them as they are.
func TestNoFloor(t *testing.T) {
	worth := []float64{3, 0, 7}
	if got := (&Coord{cfg: Config{NoFloor: true}}).floor(worth); !slices.Equal(got, []float64{0, 0, 0}) {
		t.Fatalf("NoFloor: store gets %v", got)
	}
	if got := (&Coord{}).floor(worth); !slices.Equal(got, worth) {
		t.Fatalf("floor: store gets %v, want %v", got, worth)
	}
}
