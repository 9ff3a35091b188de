package tiers

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestHostPrefault: with Prefault every page of the arena is resident
// once the tier is made; without it none is until written.
func TestHostPrefault(t *testing.T) {
	resident := func(h *Host) (n, of int) {
		vec := make([]byte, (len(h.mem)+os.Getpagesize()-1)/os.Getpagesize())
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(h.mem))),
			uintptr(len(h.mem)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
		if errno != 0 {
			t.Fatalf("mincore: %v", errno)
		}
		for _, v := range vec {
			n += int(v & 1)
		}
		return n, len(vec)
	}
	cold := newTestHost(t, HostConfig{Capacity: 16 << 20})
	if n, of := resident(cold); n != 0 {
		t.Fatalf("%d of %d pages of a fresh arena resident without Prefault, want 0", n, of)
	}
	warm := newTestHost(t, HostConfig{Capacity: 16 << 20, Prefault: true})
	if n, of := resident(warm); n != of {
		t.Fatalf("%d of %d pages of the arena resident with Prefault, want all", n, of)
	}
}

// BenchmarkArenaTouch: what committing the arena costs, per GiB, made
// three ways: Prefault's populate at start, a write to each page of a
// fresh arena (what the first puts pay without Prefault), and the same
// writes once the pages are there.
//
//	go test -run '^$' -bench ArenaTouch -benchtime 3x ./tiers
func BenchmarkArenaTouch(b *testing.B) {
	const size = 256 << 20
	perGiB := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N)*float64(1<<30)/size, "s/GiB")
	}
	b.Run("prefault", func(b *testing.B) {
		for range b.N {
			h, err := NewHost(HostConfig{Capacity: size, Prefault: true})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			h.Close()
			b.StartTimer()
		}
		perGiB(b)
	})
	b.Run("first-touch", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			h, err := NewHost(HostConfig{Capacity: size})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			touchPages(h.mem)
			b.StopTimer()
			h.Close()
			b.StartTimer()
		}
		perGiB(b)
	})
	b.Run("touched", func(b *testing.B) {
		h, err := NewHost(HostConfig{Capacity: size, Prefault: true})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		b.ResetTimer()
		for range b.N {
			touchPages(h.mem)
		}
		perGiB(b)
	})
}
