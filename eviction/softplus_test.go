package eviction

import (
	"math"
	"testing"
)

// TestLog2p1exp2 compares the table with the exact formula over and past
// its span.
func TestLog2p1exp2(t *testing.T) {
	for x := -40.0; x <= 40; x += 0.00731 {
		want := math.Log2(1 + math.Exp2(x))
		if got := log2p1exp2(x); math.Abs(got-want) > 1e-5 {
			t.Fatalf("log2p1exp2(%g) = %g, want %g", x, got, want)
		}
	}
	// Monotone, as a priority must be.
	prev := math.Inf(-1)
	for x := -33.0; x <= 33; x += 1.0 / 512 {
		got := log2p1exp2(x)
		if got < prev {
			t.Fatalf("log2p1exp2 decreases at %g: %g after %g", x, got, prev)
		}
		prev = got
	}
}

func BenchmarkLog2p1exp2(b *testing.B) {
	x, s := -20.0, 0.0
	for range b.N {
		s += log2p1exp2(x)
		if x += 0.37; x > 20 {
			x = -20
		}
	}
	_ = s
}
