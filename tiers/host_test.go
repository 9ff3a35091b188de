//go:build linux

package tiers

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratakv/strata/internal/testing/panics"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// newTestHost returns a host that is checked for consistency and closed when
// the test ends.
func newTestHost(t testing.TB, cfg HostConfig) *Host {
	t.Helper()
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatalf("NewHost(%+v): %v", cfg, err)
	}
	checkAndCloseAtEnd(t, &h.closed, func() error { return checkHost(h) }, h.Close)
	return h
}

// checkAndCloseAtEnd makes the end of t check a tier's consistency and
// close it, unless the test closed it itself.
func checkAndCloseAtEnd(t testing.TB, closed *atomic.Bool, check, close func() error) {
	t.Cleanup(func() {
		if closed.Load() {
			return
		}
		if err := check(); err != nil {
			t.Errorf("consistency check at the end: %v", err)
		}
		if err := close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func mustCheck(t testing.TB, h *Host) {
	t.Helper()
	if err := checkHost(h); err != nil {
		t.Fatal(err)
	}
}

// fill allocates size-byte extents of tier until ErrFull and returns them.
func fill(t testing.TB, tier interface{ Alloc(int64) (Extent, error) }, size int64) []Extent {
	t.Helper()
	var exts []Extent
	for {
		ext, err := tier.Alloc(size)
		if errors.Is(err, ErrFull) {
			return exts
		}
		if err != nil {
			t.Fatalf("Alloc(%d) after %d extents: %v", size, len(exts), err)
		}
		exts = append(exts, ext)
	}
}

func freeAll(h *Host, exts []Extent) {
	for _, e := range exts {
		h.Free(e)
	}
}

func TestHostConfig(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        HostConfig
		size, slab int64
		wantErr    bool
	}{
		{name: "defaults", cfg: HostConfig{Capacity: 256 * mib}, size: 256 * mib, slab: 4 * mib},
		{name: "large default", cfg: HostConfig{Capacity: 8192 * mib}, size: 8192 * mib, slab: 64 * mib},
		{name: "rounded down to slabs", cfg: HostConfig{Capacity: 200*mib + 5000}, size: 200 * mib, slab: 2 * mib},
		{name: "small capacity shrinks the default slab", cfg: HostConfig{Capacity: 10*mib + 100}, size: 10 * mib, slab: mib},
		{name: "tiny capacity", cfg: HostConfig{Capacity: 512 << 10}, size: 512 << 10, slab: 512 << 10},
		{name: "explicit slab", cfg: HostConfig{Capacity: 10 * mib, SlabSize: 3 * mib}, size: 9 * mib, slab: 3 * mib},
		{name: "one granule", cfg: HostConfig{Capacity: 4096}, size: 4096, slab: 4096},
		{name: "named", cfg: HostConfig{Capacity: mib, Name: "kv"}, size: mib, slab: mib},
		{name: "no capacity", cfg: HostConfig{}, wantErr: true},
		{name: "negative capacity", cfg: HostConfig{Capacity: -1}, wantErr: true},
		{name: "capacity below a granule", cfg: HostConfig{Capacity: 4095}, wantErr: true},
		{name: "capacity of 8 TiB", cfg: HostConfig{Capacity: 1 << 43}, wantErr: true},
		{name: "slab not a multiple of 4 KiB", cfg: HostConfig{Capacity: mib, SlabSize: 5000}, wantErr: true},
		{name: "negative slab", cfg: HostConfig{Capacity: mib, SlabSize: -4096}, wantErr: true},
		{name: "slab above capacity", cfg: HostConfig{Capacity: mib, SlabSize: 2 * mib}, wantErr: true},
		{name: "name with NUL", cfg: HostConfig{Capacity: mib, Name: "a\x00b"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHost(tc.cfg)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("NewHost(%+v) = %v, want ErrInvalidConfig", tc.cfg, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if h.Kind() != KindHost || h.Size() != tc.size || h.slabSize != tc.slab || h.Stats().Capacity != tc.size {
				t.Errorf("size %d, slab %d, capacity %d; want %d, %d", h.Size(), h.slabSize, h.Stats().Capacity, tc.size, tc.slab)
			}
			var st unix.Stat_t
			if err := unix.Fstat(h.FD(), &st); err != nil || st.Size != h.Size() {
				t.Errorf("fstat(FD()) = size %d, %v; want %d", st.Size, err, h.Size())
			}
		})
	}
}

// TestHostFillFreeReuse fills a host with one size until ErrFull, frees
// everything and fills it again.
func TestHostFillFreeReuse(t *testing.T) {
	for _, tc := range []struct {
		slab, capacity, size int64
		want                 int // extents that fit
	}{
		{mib, 16 * mib, 64 * kib, 256},
		{mib, 16 * mib, 1, 16 * 256},         // the 4 KiB class
		{mib, 16 * mib, 4097, 16 * 128},      // 8 KiB
		{mib, 16 * mib, 2 * mib, 8},          // two slabs per extent
		{mib, 16 * mib, 5 * mib, 3},          // five; one slab left over
		{mib, 16 * mib, 16 * mib, 1},         // the whole arena
		{mib, 16 * mib, 1_179_648, 8},        // 2-slab spans of 1 slot
		{64 * kib, mib + 1000, 3000, 256},    // capacity rounded down
		{64 * kib, 4 * mib, 100_000, 8 * 5},  // 8-slab spans of 5 x 102,400
		{60 * kib, 600 * kib, 20 * kib, 30},  // slab not a power of two
		{4 * kib, 2*mib + 4*kib, 2 * mib, 1}, // every slab one granule
		{64 * mib, gib, 4_497_408, 8 * 29},   // 2-slab spans (3 in a big arena)
	} {
		t.Run(fmt.Sprintf("slab=%d/cap=%d/size=%d", tc.slab, tc.capacity, tc.size), func(t *testing.T) {
			h := newTestHost(t, HostConfig{Capacity: tc.capacity, SlabSize: tc.slab})
			exts := fill(t, h, tc.size)
			if len(exts) != tc.want {
				t.Fatalf("%d extents fit, want %d", len(exts), tc.want)
			}
			_, err := h.Alloc(tc.size)
			if !errors.Is(err, ErrFull) {
				t.Fatalf("Alloc on a full host: %v, want ErrFull", err)
			}
			mustCheck(t, h)
			c := classSize(classIndex(tc.size))
			want := Stats{Kind: KindHost, Capacity: h.Size(), Used: int64(tc.want) * c,
				Extents: int64(tc.want), Requested: int64(tc.want) * tc.size}
			if st := h.Stats(); st != want {
				t.Fatalf("Stats = %+v, want %+v", st, want)
			}
			freeAll(h, exts)
			mustCheck(t, h)
			if st := h.Stats(); st.Used != 0 || st.Extents != 0 || st.Requested != 0 {
				t.Fatalf("Stats after freeing all = %+v", st)
			}
			again := fill(t, h, tc.size)
			if len(again) != tc.want {
				t.Fatalf("%d extents fit after freeing all, want %d", len(again), tc.want)
			}
			seen := map[int64]uint64{}
			for _, e := range exts {
				seen[e.Off] = e.Gen
			}
			for _, e := range again {
				if g, ok := seen[e.Off]; ok && g == e.Gen {
					t.Fatalf("extent at %d reused with generation %d unchanged", e.Off, g)
				}
			}
			mustCheck(t, h)
		})
	}
}

// TestHostMixedClasses interleaves several classes until all are full, then
// checks that nothing overlaps and that everything freed is reusable.
func TestHostMixedClasses(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 64 * mib, SlabSize: mib})
	sizes := []int64{4 * kib, 64 * kib, 1_179_648, 2 * mib, 100_000}
	var live []Extent
	full := map[int64]bool{}
	for i := 0; len(full) < len(sizes); i++ {
		size := sizes[i%len(sizes)]
		ext, err := h.Alloc(size)
		switch {
		case errors.Is(err, ErrFull):
			full[size] = true
		case err != nil:
			t.Fatal(err)
		default:
			live = append(live, ext)
		}
	}
	mustCheck(t, h)
	checkNoOverlap(t, h, live)
	st := h.Stats()
	if free := st.Capacity - st.Used; free > 2*mib {
		t.Errorf("%d bytes free with every class full", free)
	}
	freeAll(h, live)
	mustCheck(t, h)
	if got := fill(t, h, 64*kib); len(got) != 1024 {
		t.Errorf("%d 64 KiB extents fit after freeing all, want 1024", len(got))
	}
}

// TestHostClassShift fills with small pages, frees them, and fills with
// large ones: emptied slabs (and spare spans) go back to the pool.
func TestHostClassShift(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 64 * mib, SlabSize: 4 * mib})
	for _, step := range []struct {
		size int64
		want int
	}{
		{64 * kib, 1024},
		{2 * mib, 32},
		{1_179_648, 56}, // 7 per 2-slab span
		{4 * kib, 16384},
		{64 * mib, 1},
		{64 * kib, 1024},
	} {
		exts := fill(t, h, step.size)
		if len(exts) != step.want {
			t.Fatalf("%d extents of %d bytes fit, want %d; classes %+v", len(exts), step.size, step.want, h.ClassStats())
		}
		mustCheck(t, h)
		freeAll(h, exts)
		mustCheck(t, h)
	}
	cs := h.ClassStats()
	if len(cs) != 1 || cs[0].Size != 64*kib || cs[0].Extents != 0 || cs[0].Slabs != 1 {
		t.Errorf("ClassStats after the shifts = %+v, want only the 64 KiB class's spare", cs)
	}
}

func TestHostClassStats(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 64 * mib, SlabSize: mib})
	var exts []Extent
	for range 20 {
		e, err := h.Alloc(60 * kib)
		if err != nil {
			t.Fatal(err)
		}
		exts = append(exts, e)
	}
	big, err := h.Alloc(2 * mib)
	if err != nil {
		t.Fatal(err)
	}
	want := []ClassStats{
		{Size: 60 * kib, SpanSlabs: 1, SpanSlots: 17, Slabs: 2, Extents: 20, FreeSlots: 14, Requested: 20 * 60 * kib},
		{Size: 2 * mib, SpanSlabs: 2, SpanSlots: 1, Slabs: 2, Extents: 1, FreeSlots: 0, Requested: 2 * mib},
	}
	if got := h.ClassStats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ClassStats = %+v\nwant %+v", got, want)
	}
	h.Free(big)
	freeAll(h, exts)
	want = []ClassStats{ // each class keeps one empty span as its spare
		{Size: 60 * kib, SpanSlabs: 1, SpanSlots: 17, Slabs: 1, FreeSlots: 17},
		{Size: 2 * mib, SpanSlabs: 2, SpanSlots: 1, Slabs: 2, FreeSlots: 1},
	}
	if got := h.ClassStats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ClassStats after freeing = %+v\nwant %+v", got, want)
	}
}

// TestHostGenerations pins the generation contract: Gen is odd and equals
// Generation while live; freeing or reusing the slot, even for another
// class, changes what Generation reports for the old extent.
func TestHostGenerations(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: mib})
	a, err := h.Alloc(64 * kib)
	if err != nil {
		t.Fatal(err)
	}
	if a.Gen%2 != 1 || h.Generation(a) != a.Gen {
		t.Fatalf("live extent %+v: Generation %d", a, h.Generation(a))
	}
	keep, _ := h.Alloc(64 * kib) // keeps the span carved
	h.Free(a)
	if g := h.Generation(a); g == a.Gen {
		t.Fatalf("Generation of a freed extent = %d, unchanged", g)
	}
	b, _ := h.Alloc(64 * kib)
	if b.Off != a.Off || b.Gen == a.Gen || h.Generation(a) == a.Gen || h.Generation(b) != b.Gen {
		t.Fatalf("reuse: a %+v b %+v Generation(a) %d", a, b, h.Generation(a))
	}
	h.Free(b)
	h.Free(keep)

	// Other classes carve the same bytes: every slab is taken by 4 KiB
	// extents, then 1 MiB ones.
	stale := []Extent{a, b, keep}
	for _, size := range []int64{4 * kib, mib, 64 * kib} {
		exts := fill(t, h, size)
		for _, s := range stale {
			if g := h.Generation(s); g == s.Gen {
				t.Fatalf("stale %+v: Generation %d after the bytes went to %d-byte extents", s, g, size)
			}
		}
		for _, e := range exts {
			if h.Generation(e) != e.Gen {
				t.Fatalf("live %+v: Generation %d", e, h.Generation(e))
			}
		}
		freeAll(h, exts)
		stale = append(stale, exts...)
	}
	for _, s := range stale {
		if g := h.Generation(s); g == s.Gen {
			t.Fatalf("stale %+v: Generation %d", s, g)
		}
	}
}

func TestHostFreePanics(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: mib})
	a, _ := h.Alloc(64 * kib)
	b, _ := h.Alloc(64 * kib)
	h.Free(a)
	a2, _ := h.Alloc(64 * kib) // same slot as a
	for _, tc := range []struct {
		name string
		ext  Extent
	}{
		{"double free", b},
		{"stale generation", a},
		{"wrong cap", Extent{Off: a2.Off, Len: a2.Len, Cap: 4 * kib, Gen: a2.Gen}},
		{"inside a slot", Extent{Off: a2.Off + 4*kib, Len: 4 * kib, Cap: 64 * kib, Gen: a2.Gen}},
		{"free slab", Extent{Off: 3 * mib, Len: 1, Cap: 4 * kib, Gen: 1}},
		{"outside", Extent{Off: 4 * mib, Len: 1, Cap: 4 * kib, Gen: 1}},
		{"negative", Extent{Off: -4096, Len: 1, Cap: 4 * kib, Gen: 1}},
		{"never allocated slot", Extent{Off: a2.Off + 10*64*kib, Len: 1, Cap: 64 * kib, Gen: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "double free" {
				h.Free(b)
			}
			defer func() {
				if recover() == nil {
					t.Errorf("Free(%+v) did not panic", tc.ext)
				}
				mustCheck(t, h)
			}()
			h.Free(tc.ext)
		})
	}
	h.Free(a2)
}

func TestHostTooLarge(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 2*mib + 4*kib, SlabSize: 4 * kib})
	// 2 MiB + 1 byte fits the arena but not its class, 2 MiB + 8 KiB.
	for _, size := range []int64{0, -1, 2*mib + 1, 2*mib + 4*kib, 2*mib + 8*kib, 1 << 62} {
		if _, err := h.Alloc(size); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Alloc(%d) = %v, want ErrTooLarge", size, err)
		}
	}
	if e, err := h.Alloc(2 * mib); err != nil || e.Cap != 2*mib {
		t.Errorf("Alloc(2 MiB) = %+v, %v", e, err)
	}
}

func TestHostReadWrite(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: mib})
	ext, err := h.Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("kv bytes")
	for _, tc := range []struct {
		off  int64
		n    int
		fail bool
	}{
		{0, 8, false},
		{4992, 8, false},
		{5000, 0, false},
		{4993, 8, true}, // past Len, inside Cap
		{-1, 1, true},
		{5001, 0, true},
	} {
		p := make([]byte, tc.n)
		copy(p, msg)
		werr, rerr := h.WriteAt(ext, p, tc.off), h.ReadAt(ext, p, tc.off)
		if tc.fail != errors.Is(werr, ErrOutOfRange) || tc.fail != errors.Is(rerr, ErrOutOfRange) {
			t.Errorf("off %d n %d: WriteAt %v, ReadAt %v; want out of range %v", tc.off, tc.n, werr, rerr, tc.fail)
		}
	}
	for _, bad := range []Extent{
		{Off: -4096, Len: 10, Cap: 4096},
		{Off: h.Size() - 4096, Len: 8192, Cap: 8192},
		{Off: 0, Len: -1, Cap: 4096},
	} {
		if err := h.WriteAt(bad, nil, 0); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("WriteAt(%+v) = %v, want ErrOutOfRange", bad, err)
		}
	}
}

// TestHostBytesAlias checks that Bytes, WriteAt and ReadAt see one memory,
// and that a second mapping of FD() sees it too.
func TestHostBytesAlias(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: mib})
	_, _ = h.Alloc(64 * kib)
	ext, err := h.Alloc(100_000)
	if err != nil {
		t.Fatal(err)
	}
	b := h.Bytes(ext)
	if int64(len(b)) != ext.Len || int64(cap(b)) != ext.Len {
		t.Fatalf("Bytes: len %d cap %d, want %d", len(b), cap(b), ext.Len)
	}
	if err := h.WriteAt(ext, []byte("written"), 10); err != nil {
		t.Fatal(err)
	}
	if got := string(b[10:17]); got != "written" {
		t.Fatalf("Bytes after WriteAt = %q", got)
	}
	copy(b[ext.Len-5:], "bytes")
	p := make([]byte, 5)
	if err := h.ReadAt(ext, p, ext.Len-5); err != nil || string(p) != "bytes" {
		t.Fatalf("ReadAt after writing Bytes = %q, %v", p, err)
	}

	other, err := unix.Mmap(h.FD(), 0, int(h.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(other)
	mirror := other[ext.Off : ext.Off+ext.Len]
	if !bytes.Equal(mirror, b) {
		t.Fatal("second mapping of FD() differs")
	}
	copy(mirror, "from the other mapping")
	if err := h.ReadAt(ext, p, 0); err != nil || string(p) != "from " {
		t.Fatalf("ReadAt after writing the second mapping = %q, %v", p, err)
	}
}

func TestHostClose(t *testing.T) {
	h, err := NewHost(HostConfig{Capacity: 4 * mib, SlabSize: mib})
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := h.Alloc(64 * kib)
	fd := h.FD()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Alloc(64 * kib); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := h.WriteAt(ext, []byte("x"), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteAt after Close: %v", err)
	}
	if err := h.ReadAt(ext, make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAt after Close: %v", err)
	}
	if g := h.Generation(ext); g != 0 {
		t.Errorf("Generation after Close = %d, want 0", g)
	}
	h.Free(ext) // no-op
	if err := h.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if err := unix.Fstat(fd, new(unix.Stat_t)); err == nil {
		t.Errorf("memfd %d still open after Close", fd)
	}
	panics.Expect(t, "Bytes after Close", func() { h.Bytes(ext) })
}

// TestHostNoAllocs pins that Alloc and Free do not allocate once a class has
// a span.
func TestHostNoAllocs(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 64 * mib, SlabSize: mib})
	keep, _ := h.Alloc(64 * kib)
	var ext Extent
	var err error
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"alloc+free", func() { ext, err = h.Alloc(64 * kib); h.Free(ext) }},
		{"span churn via spare", func() { ext, err = h.Alloc(3 * mib); h.Free(ext) }},
		{"generation", func() { _ = h.Generation(keep) }},
	} {
		if n := testing.AllocsPerRun(1000, tc.f); n != 0 || err != nil {
			t.Errorf("%s: %v allocations per run, err %v", tc.name, n, err)
		}
	}
}

// TestHostConcurrent runs allocating, writing, verifying and freeing
// goroutines on a host small enough to fill up; the race detector and the
// final checks do the rest.
func TestHostConcurrent(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 16 * mib, SlabSize: 256 * kib})
	sizes := []int64{4 * kib, 64 * kib, 100_000, 300 * kib, mib}
	var wg sync.WaitGroup
	var fulls atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			var live []Extent
			buf := make([]byte, mib)
			for i := range 2000 {
				if len(live) > 0 && (i%3 == 0 || len(live) > 8) {
					e := live[0]
					live = live[1:]
					if err := h.ReadAt(e, buf[:e.Len], 0); err != nil {
						t.Error(err)
						return
					}
					if want := byte(g*31 + int(e.Gen)); bytes.Count(buf[:e.Len], []byte{want}) != int(e.Len) {
						t.Errorf("goroutine %d: extent %+v lost its bytes", g, e)
						return
					}
					h.Free(e)
					continue
				}
				e, err := h.Alloc(sizes[(g+i)%len(sizes)])
				if errors.Is(err, ErrFull) {
					fulls.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				memset(buf[:e.Len], byte(g*31+int(e.Gen)))
				if err := h.WriteAt(e, buf[:e.Len], 0); err != nil {
					t.Error(err)
					return
				}
				live = append(live, e)
			}
			freeAll(h, live)
		})
	}
	wg.Wait()
	t.Logf("%d allocations found the host full", fulls.Load())
	mustCheck(t, h)
	if st := h.Stats(); st.Used != 0 || st.Extents != 0 || st.Requested != 0 {
		t.Errorf("Stats after all goroutines freed everything = %+v", st)
	}
}

// TestHostSeqlockRead has a writer free and reuse slots while readers copy
// published extents and re-check the generation: a copy whose generation
// still matches must be exactly the bytes published for it.
func TestHostSeqlockRead(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("seqlock reads in-process need total store order (amd64); see Host.Generation")
	}
	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: mib})
	const size = 64 * kib
	var pub atomic.Pointer[Extent]
	var stop atomic.Bool
	var wg sync.WaitGroup
	var good, discarded atomic.Int64
	for range 3 {
		wg.Go(func() {
			buf := make([]byte, size)
			for !stop.Load() {
				e := pub.Load()
				if e == nil {
					continue
				}
				copy(buf, h.mem[e.Off:e.Off+e.Len]) // what a same-host client does
				if h.Generation(*e) != e.Gen {
					discarded.Add(1)
					continue
				}
				if bytes.Count(buf, []byte{byte(e.Gen)}) != int(size) {
					t.Errorf("read of %+v passed the generation check but is torn", *e)
					return
				}
				good.Add(1)
			}
		})
	}
	fillByte := func(e Extent) { memset(h.Bytes(e), byte(e.Gen)) }
	cur, _ := h.Alloc(size)
	fillByte(cur)
	first := cur // readers get their own copy, never cur itself
	pub.Store(&first)
	for range 20000 {
		old := cur
		h.Free(old) // readers of old must now fail their check
		cur, _ = h.Alloc(size)
		fillByte(cur) // the same slot: overwrites what readers of old copy
		e := cur
		pub.Store(&e)
	}
	stop.Store(true)
	wg.Wait()
	h.Free(cur)
	t.Logf("%d reads verified, %d discarded by the generation check", good.Load(), discarded.Load())
}

// checkNoOverlap checks that live extents lie inside the arena, start on 4
// KiB boundaries and do not overlap.
func checkNoOverlap(t testing.TB, h *Host, live []Extent) {
	t.Helper()
	if err := noOverlap(h, live); err != nil {
		t.Fatal(err)
	}
}

// memset sets every byte of b to v with a few copies (cheap under -race).
func memset(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}
