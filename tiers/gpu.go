package tiers

// GPU: the device-memory (HBM) tier.
//
// # Driver
//
// The CUDA driver API is loaded at run time (gpu_cuda.go): libcuda.so.1,
// else libcuda.so, through purego, so strata builds with no CUDA toolkit and
// no cgo, and a binary built anywhere runs on a machine with or without a
// GPU. When the library is missing, too old (a required symbol absent),
// cuInit fails (no device, driver/kernel-module mismatch, CUDA_VISIBLE_DEVICES
// empty) or the configured device does not exist, NewGPU returns an error
// wrapping ErrUnavailable that says why, and the node runs without the tier.
// The library stays loaded after Close (unloading libcuda is not safe while
// its threads live); dlopen counts references, so a second NewGPU is cheap.
//
// # Arena
//
// One cuMemAlloc of Capacity bytes (or FreeFraction of the device's free
// memory) on the device's primary context, which the tier retains until
// Close. The primary context is the one the runtime API (and so PyTorch) uses
// on that device, so an engine in another process sees ordinary device
// memory; IPCHandle exports the arena for same-host engines
// (cuIpcOpenMemHandle on their side, then base + Extent.Off). Extents are
// carved from the arena by gpuAlloc (gpu_alloc.go), a slab allocator over the
// host tier's size classes; every extent is 4 KiB-aligned within the arena.
//
// # Threads and contexts
//
// A CUDA context is current per OS thread, and goroutines move between
// threads. Every driver call that needs the context (allocation, copies,
// memory info, IPC, free) runs as: runtime.LockOSThread,
// cuCtxPushCurrent_v2(primary), the call, cuCtxPopCurrent_v2,
// runtime.UnlockOSThread. Push/pop rather than cuCtxSetCurrent leaves each
// thread's context stack exactly as it found it, so no thread is left
// holding the context after Close and nothing else in the process that uses
// CUDA on the same thread is disturbed. It costs two cheap driver calls per
// copy (thread-local bookkeeping, no kernel entry) and lets copies from many
// goroutines proceed on their own threads; the alternative, one goroutine on
// a locked thread executing copy requests, would serialise every copy behind
// one channel and add a goroutine to own and stop.
//
// Copies are synchronous cuMemcpyHtoD_v2/cuMemcpyDtoH_v2 on the legacy
// default stream, from and to pageable Go memory. HtoD from pageable memory
// may return before the DMA lands, so WriteAt then calls cuCtxSynchronize:
// when WriteAt returns, the bytes are in device memory and visible to other
// processes holding the IPC handle. (Registering the host tier's arena with
// cuMemHostRegister would make host-to-GPU moves a direct DMA; not done.)
//
// # Locking
//
// life is a RWMutex: copies, Alloc, Free and IPCHandle hold it shared while
// they check closed and use the arena; Close holds it exclusively, so no
// copy touches the arena after cuMemFree, and Close may run concurrently
// with other methods (they fail with ErrClosed afterwards). gpuAlloc has its
// own mutex.

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// maxGPUCapacity bounds the arena from above (exclusive): slot indexes
// within a span, at most Capacity/4 KiB, are int32.
const maxGPUCapacity = 1 << 43

// GPUConfig configures a GPU tier. Exactly one of Capacity and FreeFraction
// must be set; the zero value of every other field selects its default.
type GPUConfig struct {
	// Device is the CUDA device ordinal (as numbered under the process's
	// CUDA_VISIBLE_DEVICES). Default 0.
	Device int
	// Capacity is the arena size in bytes, rounded down to whole slabs; at
	// least 4 KiB and less than 8 TiB. No default: set it or FreeFraction.
	Capacity int64
	// FreeFraction, in (0, 1], sizes the arena as that fraction of the
	// device memory free when NewGPU runs (cuMemGetInfo), for flags such as
	// --gpu-capacity=80%. No default: set it or Capacity.
	FreeFraction float64
	// SlabSize is the unit in which memory moves between size classes, in
	// bytes, a multiple of 4 KiB. Default as for HostConfig.SlabSize:
	// capacity/64 rounded down to a power of two, between 1 MiB and 64 MiB,
	// and never more than the capacity.
	SlabSize int64
	// Driver is the path or name of the CUDA driver library given to dlopen.
	// Default libcuda.so.1, then libcuda.so, found by the dynamic loader.
	Driver string
}

// validate checks the fields that do not need the device.
func (cfg GPUConfig) validate() error {
	switch {
	case cfg.Device < 0:
		return fmt.Errorf("gpu: device %d is negative: %w", cfg.Device, ErrInvalidConfig)
	case cfg.Capacity != 0 && cfg.FreeFraction != 0:
		return fmt.Errorf("gpu: both capacity %d and free fraction %g set: %w",
			cfg.Capacity, cfg.FreeFraction, ErrInvalidConfig)
	case cfg.Capacity == 0 && cfg.FreeFraction == 0:
		return fmt.Errorf("gpu: neither capacity nor free fraction set: %w", ErrInvalidConfig)
	case cfg.Capacity != 0 && (cfg.Capacity < granule || cfg.Capacity >= maxGPUCapacity):
		return fmt.Errorf("gpu: capacity %d not in [%d, %d): %w",
			cfg.Capacity, granule, int64(maxGPUCapacity), ErrInvalidConfig)
	case cfg.Capacity == 0 && !(cfg.FreeFraction > 0 && cfg.FreeFraction <= 1):
		return fmt.Errorf("gpu: free fraction %g not in (0, 1]: %w", cfg.FreeFraction, ErrInvalidConfig)
	case cfg.SlabSize < 0 || cfg.SlabSize%granule != 0:
		return fmt.Errorf("gpu: slab size %d is not a positive multiple of %d: %w",
			cfg.SlabSize, granule, ErrInvalidConfig)
	}
	return nil
}

// geometry returns the slab size and count for an arena of capacity bytes.
func (cfg GPUConfig) geometry(capacity int64) (slabSize int64, nslabs int, err error) {
	if capacity < granule || capacity >= maxGPUCapacity {
		return 0, 0, fmt.Errorf("capacity %d not in [%d, %d): %w",
			capacity, granule, int64(maxGPUCapacity), ErrInvalidConfig)
	}
	slabSize = cfg.SlabSize
	if slabSize == 0 {
		slab := int64(1) << (bits.Len64(uint64(capacity/64)) - 1)
		slabSize = min(DefaultSlabSize, max(1<<20, slab), capacity&^(granule-1))
	}
	if slabSize > capacity {
		return 0, 0, fmt.Errorf("capacity %d is less than one %d-byte slab: %w",
			capacity, slabSize, ErrInvalidConfig)
	}
	return slabSize, int(capacity / slabSize), nil
}

// GPU is the device-memory tier: one CUDA allocation carved by a slab
// allocator. It implements Tier (not Mapped: its bytes are not in this
// process's address space) and is safe for concurrent use, Close included.
type GPU struct {
	dev    *cudaDevice
	device int
	alloc  *gpuAlloc

	// life guards base and closed: shared by every method that uses the
	// arena, exclusive in Close.
	life   sync.RWMutex
	base   uint64 // device address of the arena
	closed bool
}

var _ Tier = (*GPU)(nil)

// NewGPU loads the CUDA driver, retains cfg.Device's primary context and
// allocates the arena. It fails with ErrInvalidConfig for a bad cfg or an
// arena the device cannot hold, and with ErrUnavailable (saying why) when
// there is no usable driver or device.
func NewGPU(cfg GPUConfig) (*GPU, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dev, err := openCUDADevice(cfg.Driver, cfg.Device)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	g, err := newGPUOn(dev, cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("gpu: device %d (%s): %w", cfg.Device, dev.name, err), dev.close())
	}
	return g, nil
}

// newGPUOn sizes and allocates the arena on an opened device.
func newGPUOn(dev *cudaDevice, cfg GPUConfig) (*GPU, error) {
	free, total, err := dev.memInfo()
	if err != nil {
		return nil, err
	}
	capacity := cfg.Capacity
	if capacity == 0 {
		capacity = int64(float64(free) * cfg.FreeFraction)
	}
	slabSize, nslabs, err := cfg.geometry(capacity)
	if err != nil {
		return nil, err
	}
	size := slabSize * int64(nslabs)
	base, err := dev.malloc(size)
	if err != nil {
		if cudaOutOfMemory(err) {
			return nil, fmt.Errorf("allocating the %d-byte arena (%d of %d bytes free): %w: %w",
				size, free, total, ErrInvalidConfig, err)
		}
		return nil, fmt.Errorf("allocating the %d-byte arena: %w", size, err)
	}
	return &GPU{dev: dev, device: cfg.Device, alloc: newGPUAlloc(slabSize, nslabs), base: base}, nil
}

// Kind returns KindGPU.
func (g *GPU) Kind() Kind { return KindGPU }

// Device returns the CUDA device ordinal the arena lives on.
func (g *GPU) Device() int { return g.device }

// Name returns the device's name as the driver reports it.
func (g *GPU) Name() string { return g.dev.name }

// Size returns the arena's length in bytes: the capacity rounded down to
// whole slabs.
func (g *GPU) Size() int64 { return g.alloc.size }

// Alloc sets aside an extent of size bytes in the smallest class holding it.
// It fails with ErrClosed after Close, ErrTooLarge when size <= 0 or its
// class exceeds the arena, and ErrFull when the class has no free slot and no
// run of free slabs is left for a new span of it.
func (g *GPU) Alloc(size int64) (Extent, error) {
	g.life.RLock()
	defer g.life.RUnlock()
	if g.closed {
		return Extent{}, fmt.Errorf("gpu: allocating %d bytes: %w", size, ErrClosed)
	}
	ext, err := g.alloc.alloc(size)
	if err != nil {
		return Extent{}, fmt.Errorf("gpu: allocating %w", err)
	}
	return ext, nil
}

// Free returns ext, which must be the Extent Alloc returned. Freeing an
// extent that is not live panics: a programmer error. After Close, Free does
// nothing.
func (g *GPU) Free(ext Extent) {
	g.life.RLock()
	defer g.life.RUnlock()
	if g.closed {
		return
	}
	g.alloc.free(ext)
}

// Generation returns the current generation of ext's slot: ext.Gen exactly
// while ext is live, never ext.Gen again once it is freed, and 0 after Close.
func (g *GPU) Generation(ext Extent) uint64 {
	g.life.RLock()
	defer g.life.RUnlock()
	if g.closed {
		return 0
	}
	return g.alloc.generation(ext)
}

// WriteAt copies p into ext at off (cuMemcpyHtoD) and waits until the bytes
// are in device memory. It fails with ErrOutOfRange when the range leaves
// ext.Len or ext leaves the arena, ErrClosed after Close, and with the
// driver's error when the copy fails.
func (g *GPU) WriteAt(ext Extent, p []byte, off int64) error { return g.copyAt(ext, p, off, true) }

// ReadAt copies len(p) bytes of ext at off into p (cuMemcpyDtoH). It fails
// like WriteAt.
func (g *GPU) ReadAt(ext Extent, p []byte, off int64) error { return g.copyAt(ext, p, off, false) }

// copyAt copies p into ext at off (write) or len(p) bytes of ext at off
// into p.
func (g *GPU) copyAt(ext Extent, p []byte, off int64, write bool) error {
	g.life.RLock()
	defer g.life.RUnlock()
	if err := g.checkLocked(ext, off, len(p)); err != nil {
		return rangeErr("gpu", write, ext, p, off, err)
	}
	if len(p) == 0 {
		return nil
	}
	addr := g.base + uint64(ext.Off+off)
	var err error
	if write {
		err = g.dev.htod(addr, p)
	} else {
		err = g.dev.dtoh(p, addr)
	}
	if err != nil {
		return rangeErr("gpu", write, ext, p, off, err)
	}
	return nil
}

// checkLocked checks that the tier is open and that n bytes at off lie
// within ext and ext within the arena. life must be held.
func (g *GPU) checkLocked(ext Extent, off int64, n int) error {
	if g.closed {
		return ErrClosed
	}
	if off < 0 || off > ext.Len-int64(n) || ext.Off < 0 || ext.Len < 0 || ext.Off > g.alloc.size-ext.Len {
		return ErrOutOfRange
	}
	return nil
}

// IPCHandle returns the arena's CUDA IPC handle (cuIpcGetMemHandle), for a
// same-host engine to open with cuIpcOpenMemHandle: the extent ext is then
// at the opened pointer plus ext.Off. It fails with ErrClosed after Close and
// with errors.ErrUnsupported when the driver lacks IPC.
func (g *GPU) IPCHandle() ([64]byte, error) {
	g.life.RLock()
	defer g.life.RUnlock()
	if g.closed {
		return [64]byte{}, fmt.Errorf("gpu: ipc handle: %w", ErrClosed)
	}
	h, err := g.dev.ipcHandle(g.base)
	if err != nil {
		return [64]byte{}, fmt.Errorf("gpu: ipc handle: %w", err)
	}
	return h, nil
}

// Stats reports capacity and usage.
func (g *GPU) Stats() Stats { return g.alloc.stats() }

// Close frees the arena and releases the device's primary context. It waits
// for copies in flight; afterwards Alloc, WriteAt, ReadAt and IPCHandle fail
// with ErrClosed, Free does nothing and Generation returns 0. Processes that
// opened the IPC handle must close it (cuIpcCloseMemHandle) before Close:
// CUDA leaves freeing an allocation still open elsewhere undefined. A second
// Close returns ErrClosed.
func (g *GPU) Close() error {
	g.life.Lock()
	defer g.life.Unlock()
	if g.closed {
		return fmt.Errorf("gpu: close: %w", ErrClosed)
	}
	g.closed = true
	if err := errors.Join(g.dev.memFree(g.base), g.dev.close()); err != nil {
		return fmt.Errorf("gpu: close: %w", err)
	}
	return nil
}
