//go:build linux && (amd64 || arm64)

package tiers

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
)

// fakeCUDALib builds and loads the fake driver once per test binary.
var fakeCUDALib = sync.OnceValues(loadFakeCUDA)

// needFakeCUDA returns the fake driver, reset, or skips the test when it
// cannot be built here.
func needFakeCUDA(t *testing.T) *fakeCUDA {
	t.Helper()
	f, err := fakeCUDALib()
	if err != nil {
		t.Skipf("no fake CUDA driver: %v", err)
	}
	f.reset()
	return f
}

// loadFakeCUDA compiles testdata/gpu_fakecuda.c into a shared library, kept
// in the user cache directory under its source's hash (so a test binary
// built once reuses it), and binds its test controls.
func loadFakeCUDA() (*fakeCUDA, error) {
	const src = "testdata/gpu_fakecuda.c"
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return nil, fmt.Errorf("no C compiler: %w", err)
	}
	text, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "strata-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, fmt.Sprintf("fakecuda-%x.so", sha256.Sum256(text)))
	if _, err := os.Stat(path); err != nil {
		tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", tmp, src).CombinedOutput()
		if err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("%s %s: %w\n%s", cc, src, err, out)
		}
		if err := os.Rename(tmp, path); err != nil {
			return nil, err
		}
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	f := &fakeCUDA{path: path}
	purego.RegisterLibFunc(&f.reset, h, "fakecuda_reset")
	purego.RegisterLibFunc(&f.setInitError, h, "fakecuda_set_init_error")
	purego.RegisterLibFunc(&f.setDevices, h, "fakecuda_set_devices")
	purego.RegisterLibFunc(&f.setTotalMem, h, "fakecuda_set_total_mem")
	purego.RegisterLibFunc(&f.setCopyError, h, "fakecuda_set_copy_error")
	purego.RegisterLibFunc(&f.liveAllocs, h, "fakecuda_live_allocs")
	purego.RegisterLibFunc(&f.primaryRefs, h, "fakecuda_primary_refs")
	purego.RegisterLibFunc(&f.pushes, h, "fakecuda_pushes")
	return f, nil
}

// TestGPUFakeDriverFaults checks, on the fake driver, that every way NewGPU
// can fail returns the right sentinel, says why, and leaves no device
// memory or context reference behind.
func TestGPUFakeDriverFaults(t *testing.T) {
	fake := needFakeCUDA(t)
	tests := []struct {
		name    string
		setup   func()
		cfg     GPUConfig
		want    error
		wantSub string
	}{
		{"cuInit fails", func() { fake.setInitError(100) }, GPUConfig{Capacity: 1 << 20},
			ErrUnavailable, "cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"},
		{"no device", func() { fake.setDevices(0) }, GPUConfig{Capacity: 1 << 20},
			ErrUnavailable, "no CUDA device 0 (0 visible)"},
		{"no such device", func() {}, GPUConfig{Capacity: 1 << 20, Device: 1},
			ErrUnavailable, "no CUDA device 1 (1 visible)"},
		{"arena too large", func() { fake.setTotalMem(8 << 20) }, GPUConfig{Capacity: 16 << 20},
			ErrInvalidConfig, "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"slab larger than the fraction", func() { fake.setTotalMem(64 << 20) }, GPUConfig{FreeFraction: 0.01, SlabSize: 4 << 20},
			ErrInvalidConfig, "less than one"},
		{"fraction under 4 KiB", func() { fake.setTotalMem(64 << 10) }, GPUConfig{FreeFraction: 0.01},
			ErrInvalidConfig, "capacity 655 not in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake.reset()
			tt.setup()
			cfg := tt.cfg
			cfg.Driver = fake.path
			g, err := NewGPU(cfg)
			if err == nil {
				g.Close()
				t.Fatalf("NewGPU(%+v) succeeded", cfg)
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("NewGPU(%+v): %v; want %v saying %q", cfg, err, tt.want, tt.wantSub)
			}
			t.Logf("%v", err)
			fake.checkClean(t)
		})
	}
	fake.reset()
}

// TestGPUDriverMissing checks the reasons NewGPU gives for a library that
// does not exist and for one that is not a CUDA driver.
func TestGPUDriverMissing(t *testing.T) {
	for _, tt := range []struct{ lib, wantSub string }{
		{"/nonexistent/libcuda.so.1", "/nonexistent/libcuda.so.1: cannot open shared object file"},
		{"libc.so.6", "libc.so.6"},
	} {
		_, err := NewGPU(GPUConfig{Capacity: 1 << 20, Driver: tt.lib})
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tt.wantSub) {
			t.Errorf("NewGPU with driver %q: %v; want ErrUnavailable saying %q", tt.lib, err, tt.wantSub)
		}
		t.Logf("%v", err)
	}
}

// TestGPUFakeCopyError checks that a failing copy reports the driver's
// error and leaves the thread's context stack balanced.
func TestGPUFakeCopyError(t *testing.T) {
	fake := needFakeCUDA(t)
	g := fake.open(t, GPUConfig{Capacity: 4 << 20})
	ext, err := g.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(ext)
	fake.setCopyError(1)
	err = g.WriteAt(ext, make([]byte, 100), 0)
	if err == nil || errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "cuMemcpyHtoD_v2: CUDA_ERROR_INVALID_VALUE (1)") {
		t.Errorf("WriteAt with the copy failing: %v", err)
	}
	err = g.ReadAt(ext, make([]byte, 100), 0)
	if err == nil || !strings.Contains(err.Error(), "cuMemcpyDtoH_v2") {
		t.Errorf("ReadAt with the copy failing: %v", err)
	}
	if p := fake.pushes(); p != 0 {
		t.Errorf("%d context pushes not popped after failed copies", p)
	}
	fake.setCopyError(0)
	if err := g.WriteAt(ext, make([]byte, 100), 0); err != nil {
		t.Errorf("WriteAt after the fault cleared: %v", err)
	}
}
