//go:build linux

package tiers

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkHostAllocFree measures one Alloc plus one Free per op. Each
// goroutine keeps a ring of live extents, allocating a new one and freeing
// its oldest, so spans fill and drain as under a cache's churn. "mixed"
// draws sizes from the realistic mix; "parallel" runs GOMAXPROCS goroutines
// on one host.
//
//	go test ./tiers/ -run '^$' -bench HostAllocFree -benchmem
func BenchmarkHostAllocFree(b *testing.B) {
	var mixed []int64
	for _, p := range realisticMix {
		mixed = append(mixed, p.size)
	}
	for _, sz := range []struct {
		name  string
		sizes []int64
	}{
		{"64KiB", []int64{64 << 10}},
		{"1179648", []int64{1_179_648}},
		{"2MiB", []int64{2 << 20}},
		{"4497408", []int64{4_497_408}},
		{"mixed", mixed},
	} {
		for _, par := range []bool{false, true} {
			name := fmt.Sprintf("size=%s/serial", sz.name)
			if par {
				name = fmt.Sprintf("size=%s/parallel", sz.name)
			}
			b.Run(name, func(b *testing.B) {
				h := newTestHost(b, HostConfig{Capacity: 256 << 30}) // address space only
				b.ReportAllocs()
				if !par {
					allocFreeRing(b, h, sz.sizes, 0, b.Loop)
					return
				}
				var id atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					allocFreeRing(b, h, sz.sizes, int(id.Add(1)), pb.Next)
				})
			})
		}
	}
}

// allocFreeRing runs Alloc+Free pairs while next says so, keeping 64 live
// extents, and frees them at the end.
func allocFreeRing(b *testing.B, h *Host, sizes []int64, seed int, next func() bool) {
	var ring [64]Extent
	for i := 0; next(); i++ {
		slot := &ring[i%len(ring)]
		if slot.Gen != 0 {
			h.Free(*slot)
		}
		ext, err := h.Alloc(sizes[(i*7+seed)%len(sizes)])
		if err != nil {
			b.Error(err)
			return
		}
		*slot = ext
	}
	for _, e := range ring {
		if e.Gen != 0 {
			h.Free(e)
		}
	}
}

// BenchmarkHostGeneration measures the seqlock re-check of a live extent.
func BenchmarkHostGeneration(b *testing.B) {
	h := newTestHost(b, HostConfig{Capacity: 1 << 30})
	ext, err := h.Alloc(2 << 20)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if h.Generation(ext) != ext.Gen {
				b.Error("generation changed")
				return
			}
		}
	})
}
