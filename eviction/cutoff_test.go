package eviction

import (
	"errors"
	"math"
	"testing"
)

// sum builds a summary at scale 0 (bucket i holds worth 2^(i/4)...).
func sum(buckets map[int]int64) Summary {
	var s Summary
	for b, n := range buckets {
		s.Bytes[b] = n
	}
	return s
}

func TestComputeCutoffs(t *testing.T) {
	tests := []struct {
		name        string
		sums        []Summary
		caps        []int64
		limited     bool
		lo, hi      float64 // the cutoff lies in [lo, hi]
		excessSigns []int
	}{{
		name:        "room for everything",
		sums:        []Summary{sum(map[int]int64{10: 100}), sum(map[int]int64{20: 100})},
		caps:        []int64{100, 100},
		excessSigns: []int{0, 0},
	}, {
		name: "keep the top buckets",
		// 300 bytes, room for 200: the 100 bytes of bucket 4 go.
		sums:        []Summary{sum(map[int]int64{4: 100, 40: 100}), sum(map[int]int64{40: 100})},
		caps:        []int64{100, 100},
		limited:     true,
		lo:          math.Exp2(5.0 / 4),
		hi:          math.Exp2(40.0 / 4),
		excessSigns: []int{0, 0},
	}, {
		name: "a node full of valuable pages has excess",
		// Node 0 holds 200 valuable bytes in 100 of capacity; node 1 holds
		// 100 cheap ones in 200: the cheap ones should make room.
		sums:        []Summary{sum(map[int]int64{50: 200}), sum(map[int]int64{2: 100})},
		caps:        []int64{100, 150},
		limited:     true,
		lo:          math.Exp2(2.0 / 4),
		hi:          math.Exp2(3.0 / 4),
		excessSigns: []int{1, -1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ComputeCutoffs(tt.sums, tt.caps)
			if err != nil {
				t.Fatal(err)
			}
			if c.Limited != tt.limited {
				t.Fatalf("Limited = %v, want %v (%+v)", c.Limited, tt.limited, c)
			}
			if tt.limited && (c.Worth < tt.lo || c.Worth > tt.hi || c.Floor() != c.Worth) {
				t.Fatalf("cutoff %g (floor %g) not in [%g, %g]", c.Worth, c.Floor(), tt.lo, tt.hi)
			}
			if !tt.limited && c.Floor() != 0 {
				t.Fatalf("floor %g with no limit", c.Floor())
			}
			for i, s := range tt.excessSigns {
				if sign(c.Excess[i]) != s {
					t.Errorf("node %d excess %d, want sign %d", i, c.Excess[i], s)
				}
			}
		})
	}
}

func sign(x int64) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

func TestComputeCutoffsScales(t *testing.T) {
	// The same credits summarised at two scales merge consistently.
	a := sum(map[int]int64{30: 100})
	b := sum(map[int]int64{20: 100})
	b.Lo = 10 // bucket 20 at scale 10 is bucket 30 at scale 0
	c, err := ComputeCutoffs([]Summary{a, b}, []int64{50, 50})
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Exp2(30.0 / 4); c.Worth < want || c.Worth > want*math.Exp2(0.25) {
		t.Fatalf("cutoff %g, want in bucket 30 (from %g)", c.Worth, want)
	}
}

func TestComputeCutoffsErrors(t *testing.T) {
	if _, err := ComputeCutoffs(make([]Summary, 2), []int64{1}); !errors.Is(err, ErrBadCapacity) {
		t.Errorf("length mismatch: %v", err)
	}
	if _, err := ComputeCutoffs(make([]Summary, 1), []int64{-1}); !errors.Is(err, ErrBadCapacity) {
		t.Errorf("negative capacity: %v", err)
	}
	if c, err := ComputeCutoffs(nil, nil); err != nil || c.Limited {
		t.Errorf("no nodes: %+v, %v", c, err)
	}
}

func TestPressure(t *testing.T) {
	// Node 0 has a quarter of the capacity and the same absolute evictions
	// as node 1: four times its turnover.
	sums := []Summary{{Turnover: 0.4}, {Turnover: 0.1}, {Turnover: 0.1}}
	c, err := ComputeCutoffs(sums, []int64{100, 400, 400})
	if err != nil {
		t.Fatal(err)
	}
	mean := (0.4*100 + 0.1*800) / 900
	if !near(c.Pressure[0], 0.4/mean) || !near(c.Pressure[1], 0.1/mean) {
		t.Fatalf("pressure %v, want %g, %g", c.Pressure, 0.4/mean, 0.1/mean)
	}
	if !c.Spill(0, 1) || c.Spill(1, 0) || c.Spill(1, 2) {
		t.Fatalf("Spill: 0→1 %v, 1→0 %v, 1→2 %v", c.Spill(0, 1), c.Spill(1, 0), c.Spill(1, 2))
	}
	if c.Spill(0, 7) || c.Spill(-1, 0) {
		t.Fatal("Spill with a node out of range")
	}
	idle, _ := ComputeCutoffs(make([]Summary, 2), []int64{1, 1})
	if idle.Spill(0, 1) {
		t.Fatal("Spill with no turnover anywhere")
	}
}
