package tiers

import "testing"

func TestClassIndex(t *testing.T) {
	for _, tc := range []struct {
		size, class int64
	}{
		{1, 4096},
		{4096, 4096},
		{4097, 8192},
		{65536, 65536},
		{65537, 69632},
		{1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 4096},
		{1_179_648, 1_179_648}, // 1.125 MiB
		{2 << 20, 2 << 20},
		{2*32*8*128*2*16 + 1, 2<<20 + 8192},
		{4_497_408, 4_505_600}, // 61 layers x 576 x bf16 x 64 tokens (MLA)
		{5 << 20, 5 << 20},
		{64 << 20, 64 << 20},
		{1<<30 + 1, 1<<30 + 1<<22},
	} {
		if got := classSize(classIndex(tc.size)); got != tc.class {
			t.Errorf("class of %d = %d, want %d", tc.size, got, tc.class)
		}
	}
}

// TestClassTable pins that classes are increasing multiples of 4 KiB, that
// each size maps to the smallest class holding it, and the waste bounds.
func TestClassTable(t *testing.T) {
	prev := int64(0)
	for idx := range classIndex(1<<43) + 1 {
		c := classSize(idx)
		if c <= prev || c%granule != 0 {
			t.Fatalf("class %d: size %d after %d", idx, c, prev)
		}
		if got := classIndex(c); got != idx {
			t.Fatalf("classIndex(classSize(%d) = %d) = %d", idx, c, got)
		}
		if got := classIndex(prev + 1); got != idx {
			t.Fatalf("classIndex(%d) = %d, want %d", prev+1, got, idx)
		}
		// Worst case: one byte above the previous class.
		waste := float64(c-prev-1) / float64(c)
		switch {
		case c > linearLimit && waste >= 1.0/steps:
			t.Fatalf("class %d: waste %.4f above 1/%d", c, waste, steps)
		case c >= 64<<10 && waste > 1.0/16:
			t.Fatalf("class %d: waste %.4f above 1/16", c, waste)
		}
		prev = c
	}
}

func TestSpanGeometry(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		class, slab int64
		nslabs      int
		spanSlabs   int
		slots       int
	}{
		{4096, 64 * mib, 1024, 1, 16384},
		{64 << 10, 64 * mib, 1024, 1, 1024},
		{1_179_648, 64 * mib, 1024, 1, 56}, // tail exactly 1/64
		{2 * mib, 64 * mib, 1024, 1, 32},
		{4_505_600, 64 * mib, 1024, 3, 44}, // 1 slab would waste 6%
		{64 * mib, 64 * mib, 1024, 1, 1},
		{80 * mib, 64 * mib, 1024, 5, 4},   // a page larger than a slab
		{40 * mib, 64 * mib, 1024, 5, 8},   // 1 slab would waste 37.5%
		{40 * mib, 64 * mib, 8, 1, 1},      // small arena: no room to do better
		{3 * mib, 1 * mib, 16, 3, 1},       // exact multiple
		{73728, 64 << 10, 64, 8, 7},        // best of 2..8 slabs
		{16 * mib, 1 * mib, 16, 16, 1},     // the whole arena
		{4096, 4096, 1, 1, 1},              // one granule
		{1<<20 + 4096, 1 << 20, 2, 2, 1},   // kmin = 2 = nslabs
		{1 << 20, 1<<20 + 4096, 10, 1, 1},  // slab not a power of two
		{12 << 10, 20 << 10, 1000, 3, 5},   // 12 KiB in 20 KiB slabs: no tail at 3
		{5 * mib, 64 * mib, 1024, 3, 38},   // 1 slab: 6.25%, 2: 2.3%, 3: 1.04%
		{6 * mib, 64 * mib, 1024, 2, 21},   // 2 slabs: tail exactly 1/64
		{32 * mib, 64 * mib, 1024, 1, 2},   // 256-token chunk of an 8B model
		{36 * mib, 64 * mib, 1024, 4, 7},   // 44%, 15.6%, 6.25%, then 1.56%
		{100 * mib, 64 * mib, 1024, 11, 7}, // 7 slots in 704 MiB: 0.57%
	} {
		k, slots := spanGeometry(tc.class, tc.slab, tc.nslabs)
		if k != tc.spanSlabs || slots != tc.slots {
			t.Errorf("spanGeometry(%d, %d, %d) = %d slabs, %d slots; want %d, %d",
				tc.class, tc.slab, tc.nslabs, k, slots, tc.spanSlabs, tc.slots)
		}
	}
}
