package tiers

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// The GPU tier's tests run each scenario on two drivers: "cuda", the real
// libcuda (skipped, saying why, where NewGPU reports the tier unavailable,
// unless STRATA_REQUIRE_GPU is set, as scripts/gpu-check.sh does on a GPU
// machine), and "fake", testdata/gpu_fakecuda.c built with the C compiler
// (skipped where there is none), which proves the bindings and the tier's
// logic everywhere but not the real driver's behaviour.

// gpuOpener opens a GPU tier for a test and closes it when the test ends.
type gpuOpener func(t *testing.T, cfg GPUConfig) *GPU

// fakeCUDA is the fake driver library and its test controls
// (gpu_fakecuda.c's fakecuda_* functions).
type fakeCUDA struct {
	path         string
	reset        func()
	setInitError func(r int32)
	setDevices   func(n int32)
	setTotalMem  func(n int64)
	setCopyError func(r int32)
	liveAllocs   func() int32
	primaryRefs  func() int32
	pushes       func() int32
}

// forEachGPUDriver runs f as subtests "cuda" and "fake".
func forEachGPUDriver(t *testing.T, f func(t *testing.T, open gpuOpener)) {
	t.Run("cuda", func(t *testing.T) { f(t, openRealGPU) })
	t.Run("fake", func(t *testing.T) {
		fake := needFakeCUDA(t)
		f(t, fake.open)
	})
}

// openRealGPU opens the tier on the real driver, skipping the test when the
// tier is unavailable here (failing instead under STRATA_REQUIRE_GPU).
func openRealGPU(t *testing.T, cfg GPUConfig) *GPU {
	t.Helper()
	g, err := NewGPU(cfg)
	if errors.Is(err, ErrUnavailable) {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatalf("NewGPU(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { closeTestGPU(t, g) })
	return g
}

// open opens the tier on the fake driver and, when the test ends, closes it
// and checks that the driver was left clean: no device memory, no retained
// context, no pushed context on any thread.
func (f *fakeCUDA) open(t *testing.T, cfg GPUConfig) *GPU {
	t.Helper()
	cfg.Driver = f.path
	g, err := NewGPU(cfg)
	if err != nil {
		t.Fatalf("NewGPU(%+v) on the fake driver: %v", cfg, err)
	}
	t.Cleanup(func() {
		closeTestGPU(t, g)
		f.checkClean(t)
	})
	return g
}

// checkClean fails t unless the fake driver holds no memory, context
// reference or pushed context.
func (f *fakeCUDA) checkClean(t *testing.T) {
	t.Helper()
	if a, r, p := f.liveAllocs(), f.primaryRefs(), f.pushes(); a != 0 || r != 0 || p != 0 {
		t.Errorf("fake driver left %d allocations, %d primary context refs, %d pushes unpopped", a, r, p)
	}
}

// closeTestGPU closes g, which a test may have closed already.
func closeTestGPU(t *testing.T, g *GPU) {
	t.Helper()
	if err := g.Close(); err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("Close: %v", err)
	}
}

// TestGPUUnavailable checks that NewGPU where the driver or device is
// missing returns an error wrapping ErrUnavailable that says why, and does
// not panic. Where libcuda works there is nothing to check.
func TestGPUUnavailable(t *testing.T) {
	g, err := NewGPU(GPUConfig{Capacity: 1 << 20})
	if err == nil {
		name := g.Name()
		closeTestGPU(t, g)
		t.Skipf("libcuda is present and device 0 (%s) works", name)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("NewGPU: %v; want an error wrapping ErrUnavailable", err)
	}
	wantSub := "libcuda"
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		wantSub = runtime.GOOS + "/" + runtime.GOARCH
	}
	if !strings.Contains(err.Error(), wantSub) {
		t.Errorf("NewGPU: %q does not say why (no %q)", err, wantSub)
	}
	t.Logf("gpu tier unavailable, as expected here: %v", err)
}

// TestGPUConfigInvalid checks that bad configurations are refused with
// ErrInvalidConfig before any driver is loaded.
func TestGPUConfigInvalid(t *testing.T) {
	for _, cfg := range []GPUConfig{
		{},
		{Capacity: -1},
		{Capacity: 100},
		{Capacity: maxGPUCapacity},
		{Capacity: 1 << 20, FreeFraction: 0.5},
		{FreeFraction: -0.1},
		{FreeFraction: 1.5},
		{Capacity: 1 << 20, SlabSize: 1000},
		{Capacity: 1 << 20, SlabSize: -4096},
		{Capacity: 1 << 20, Device: -1},
	} {
		cfg.Driver = "/nonexistent/libcuda.so.1" // loading it would be ErrUnavailable
		if _, err := NewGPU(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewGPU(%+v): %v; want ErrInvalidConfig", cfg, err)
		}
	}
}

// TestGPURoundTrip writes extents of several sizes, whole and in pieces,
// and reads them back, whole and in pieces, after every extent is written
// (so a wrong base or offset shows as one extent's bytes in another).
func TestGPURoundTrip(t *testing.T) {
	forEachGPUDriver(t, func(t *testing.T, open gpuOpener) {
		g := open(t, GPUConfig{Capacity: 64 << 20})
		rng := rand.New(rand.NewPCG(1, 2))
		sizes := []int64{1, 4096, 4097, 64 << 10, 1_179_648, 2 << 20, 4_497_408}
		exts := make([]Extent, len(sizes))
		want := make([][]byte, len(sizes))
		for i, size := range sizes {
			ext, err := g.Alloc(size)
			if err != nil {
				t.Fatalf("Alloc(%d): %v", size, err)
			}
			exts[i], want[i] = ext, make([]byte, size)
			for j := range want[i] {
				want[i][j] = byte(rng.Uint32())
			}
			if err := g.WriteAt(ext, want[i], 0); err != nil {
				t.Fatalf("WriteAt(%+v): %v", ext, err)
			}
			// Overwrite a piece in the middle (or all of a 1-byte extent).
			off := size / 3
			piece := bytes.Repeat([]byte{byte(i + 1)}, int(min(size-off, 5000)))
			if err := g.WriteAt(ext, piece, off); err != nil {
				t.Fatalf("WriteAt(%+v, %d bytes at %d): %v", ext, len(piece), off, err)
			}
			copy(want[i][off:], piece)
		}
		for i, ext := range exts {
			got := make([]byte, ext.Len)
			if err := g.ReadAt(ext, got, 0); err != nil {
				t.Fatalf("ReadAt(%+v): %v", ext, err)
			}
			if !bytes.Equal(got, want[i]) {
				t.Fatalf("extent %+v: read back different bytes", ext)
			}
			off := ext.Len / 2
			part := make([]byte, ext.Len-off)
			if err := g.ReadAt(ext, part, off); err != nil {
				t.Fatalf("ReadAt(%+v, at %d): %v", ext, off, err)
			}
			if !bytes.Equal(part, want[i][off:]) {
				t.Fatalf("extent %+v: read at %d: different bytes", ext, off)
			}
		}
		if err := g.WriteAt(exts[0], nil, exts[0].Len); err != nil {
			t.Errorf("empty WriteAt at the end: %v", err)
		}
		if err := g.ReadAt(exts[0], nil, 0); err != nil {
			t.Errorf("empty ReadAt: %v", err)
		}
		for _, ext := range exts {
			g.Free(ext)
		}
	})
}

// TestGPUStatsFull fills a 4-slab arena, checks Stats and ErrFull, and that
// a freed extent makes room again.
func TestGPUStatsFull(t *testing.T) {
	forEachGPUDriver(t, func(t *testing.T, open gpuOpener) {
		const mib = 1 << 20
		g := open(t, GPUConfig{Capacity: 4*mib + 12345, SlabSize: mib})
		if g.Kind() != KindGPU || g.Size() != 4*mib || g.Device() != 0 || g.Name() == "" {
			t.Fatalf("Kind %v, Size %d, Device %d, Name %q", g.Kind(), g.Size(), g.Device(), g.Name())
		}
		t.Logf("device %d: %s", g.Device(), g.Name())
		if _, err := g.Alloc(4*mib + 1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Alloc beyond the arena: %v, want ErrTooLarge", err)
		}
		var exts []Extent
		for range 4 {
			ext, err := g.Alloc(mib - 100)
			if err != nil {
				t.Fatalf("Alloc: %v", err)
			}
			exts = append(exts, ext)
		}
		if _, err := g.Alloc(1); !errors.Is(err, ErrFull) {
			t.Fatalf("Alloc in a full arena: %v, want ErrFull", err)
		}
		want := Stats{Kind: KindGPU, Capacity: 4 * mib, Used: 4 * mib, Extents: 4, Requested: 4 * (mib - 100)}
		if st := g.Stats(); st != want {
			t.Errorf("Stats %+v, want %+v", st, want)
		}
		g.Free(exts[2])
		ext, err := g.Alloc(mib)
		if err != nil || ext.Off != exts[2].Off || ext.Gen == exts[2].Gen {
			t.Fatalf("Alloc after Free: %+v, %v; want the freed slot %+v with a new generation", ext, err, exts[2])
		}
		if g.Generation(ext) != ext.Gen || g.Generation(exts[2]) == exts[2].Gen {
			t.Errorf("generations: live %d (want %d), freed %d", g.Generation(ext), ext.Gen, g.Generation(exts[2]))
		}
		exts[2] = ext
		for _, ext := range exts {
			g.Free(ext)
		}
		if st := g.Stats(); st != (Stats{Kind: KindGPU, Capacity: 4 * mib}) {
			t.Errorf("Stats after freeing everything: %+v", st)
		}
	})
}

// TestGPUOutOfRange checks that copies outside an extent or the arena fail
// with ErrOutOfRange, before reaching the driver.
func TestGPUOutOfRange(t *testing.T) {
	forEachGPUDriver(t, func(t *testing.T, open gpuOpener) {
		g := open(t, GPUConfig{Capacity: 4 << 20})
		ext, err := g.Alloc(1000)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Free(ext)
		tests := []struct {
			ext Extent
			n   int
			off int64
		}{
			{ext, 1001, 0},
			{ext, 1, 1000},
			{ext, 10, 995},
			{ext, 1, -1},
			{Extent{Off: -4096, Len: 10, Cap: 4096}, 1, 0},
			{Extent{Off: g.Size() - 4096, Len: 8192, Cap: 8192}, 1, 0},
			{Extent{Off: 0, Len: -1}, 0, 0},
		}
		for _, tt := range tests {
			p := make([]byte, tt.n)
			if err := g.WriteAt(tt.ext, p, tt.off); !errors.Is(err, ErrOutOfRange) {
				t.Errorf("WriteAt(%+v, %d bytes at %d): %v, want ErrOutOfRange", tt.ext, tt.n, tt.off, err)
			}
			if err := g.ReadAt(tt.ext, p, tt.off); !errors.Is(err, ErrOutOfRange) {
				t.Errorf("ReadAt(%+v, %d bytes at %d): %v, want ErrOutOfRange", tt.ext, tt.n, tt.off, err)
			}
		}
	})
}

// TestGPUClose checks what every method does after Close, and that Close
// waits for copies in flight: each racing copy either completes or fails
// with ErrClosed.
func TestGPUClose(t *testing.T) {
	forEachGPUDriver(t, func(t *testing.T, open gpuOpener) {
		g := open(t, GPUConfig{Capacity: 16 << 20})
		ext, err := g.Alloc(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				p := make([]byte, len(buf))
				<-start
				for {
					if err := g.WriteAt(ext, p, 0); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("WriteAt racing Close: %v", err)
						}
						return
					}
					if err := g.ReadAt(ext, p, 0); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("ReadAt racing Close: %v", err)
						}
						return
					}
				}
			})
		}
		close(start)
		if err := g.WriteAt(ext, buf, 0); err != nil {
			t.Fatalf("WriteAt before Close: %v", err)
		}
		if err := g.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		if _, err := g.Alloc(1); !errors.Is(err, ErrClosed) {
			t.Errorf("Alloc after Close: %v", err)
		}
		if err := g.WriteAt(ext, buf, 0); !errors.Is(err, ErrClosed) {
			t.Errorf("WriteAt after Close: %v", err)
		}
		if err := g.ReadAt(ext, buf, 0); !errors.Is(err, ErrClosed) {
			t.Errorf("ReadAt after Close: %v", err)
		}
		if _, err := g.IPCHandle(); !errors.Is(err, ErrClosed) {
			t.Errorf("IPCHandle after Close: %v", err)
		}
		if gen := g.Generation(ext); gen != 0 {
			t.Errorf("Generation after Close: %d", gen)
		}
		g.Free(ext) // does nothing
		if err := g.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("second Close: %v", err)
		}
	})
}

// TestGPUConcurrentCopies runs Alloc, WriteAt, ReadAt and Free from several
// goroutines at once; each checks its own bytes (run it with -race).
func TestGPUConcurrentCopies(t *testing.T) {
	forEachGPUDriver(t, func(t *testing.T, open gpuOpener) {
		g := open(t, GPUConfig{Capacity: 64 << 20})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for i := range 50 {
					size := int64(1 + rng.IntN(300_000))
					ext, err := g.Alloc(size)
					if err != nil {
						t.Errorf("worker %d: Alloc(%d): %v", w, size, err)
						return
					}
					p := bytes.Repeat([]byte{byte(w*50 + i)}, int(size))
					q := make([]byte, size)
					if err := g.WriteAt(ext, p, 0); err != nil {
						t.Errorf("worker %d: WriteAt: %v", w, err)
					} else if err := g.ReadAt(ext, q, 0); err != nil {
						t.Errorf("worker %d: ReadAt: %v", w, err)
					} else if !bytes.Equal(p, q) {
						t.Errorf("worker %d: extent %+v read back different bytes", w, ext)
					}
					g.Free(ext)
				}
			})
		}
		wg.Wait()
		if st := g.Stats(); st.Extents != 0 || st.Used != 0 {
			t.Errorf("Stats after every worker freed its extents: %+v", st)
		}
	})
}

// TestGPUFreeFraction sizes the arena from the device's free memory.
func TestGPUFreeFraction(t *testing.T) {
	forEachGPUDriver(t, func(t *testing.T, open gpuOpener) {
		const frac = 0.01
		g := open(t, GPUConfig{FreeFraction: frac})
		if g.Size() <= 0 {
			t.Fatalf("Size %d", g.Size())
		}
		t.Logf("%g of device %d's free memory: a %d-byte arena", frac, g.Device(), g.Size())
	})
}

// TestGPUIPCHandle exports the arena.
func TestGPUIPCHandle(t *testing.T) {
	forEachGPUDriver(t, func(t *testing.T, open gpuOpener) {
		g := open(t, GPUConfig{Capacity: 4 << 20})
		h, err := g.IPCHandle()
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("IPCHandle: %v", err)
		}
		if err != nil {
			t.Fatalf("IPCHandle: %v", err)
		}
		if h == ([64]byte{}) {
			t.Fatalf("IPCHandle: all zero")
		}
		t.Logf("ipc handle %s", fmt.Sprintf("%x", h[:16]))
	})
}
