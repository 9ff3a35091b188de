package tiers

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// The CUDA driver API as the GPU tier uses it. cudaDriver holds the entry
// points, bound at run time by loadCUDADriver (gpu_cuda_linux.go, the one
// file that uses purego); cudaDevice is one device's primary context and
// the calls made under it. The C types map as CUresult, CUdevice and int to
// int32, CUdeviceptr to uint64, size_t and CUcontext to uintptr.

// CUresult values the tier tells apart.
const (
	cudaSuccess        = 0
	cudaErrOutOfMemory = 2 // CUDA_ERROR_OUT_OF_MEMORY
)

// cudaDriver holds the driver entry points. The ones marked optional are nil
// when the library lacks them.
type cudaDriver struct {
	lib string // what dlopen loaded

	cuInit                    func(flags uint32) int32
	cuDeviceGetCount          func(count *int32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceGetName           func(name []byte, n int32, dev int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32 // the _v2 symbol where present
	cuCtxPushCurrent          func(ctx uintptr) int32
	cuCtxPopCurrent           func(ctx *uintptr) int32
	cuCtxSynchronize          func() int32
	cuMemGetInfo              func(free, total *uintptr) int32
	cuMemAlloc                func(dptr *uint64, size uintptr) int32
	cuMemFree                 func(dptr uint64) int32
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uintptr) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uintptr) int32
	cuGetErrorName            func(r int32, s **byte) int32        // optional
	cuGetErrorString          func(r int32, s **byte) int32        // optional
	cuIpcGetMemHandle         func(h *[64]byte, dptr uint64) int32 // optional
}

// cudaError is a driver call that returned something other than
// CUDA_SUCCESS.
type cudaError struct {
	Op   string // the entry point, e.g. "cuMemAlloc_v2"
	Code int32  // the CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY", if the driver says
	Msg  string // e.g. "out of memory", if the driver says
}

func (e *cudaError) Error() string {
	s := fmt.Sprintf("%s: CUresult %d", e.Op, e.Code)
	if e.Name != "" {
		s = fmt.Sprintf("%s: %s (%d)", e.Op, e.Name, e.Code)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// cudaOutOfMemory reports whether err is a driver call that ran out of
// device memory.
func cudaOutOfMemory(err error) bool {
	var ce *cudaError
	return errors.As(err, &ce) && ce.Code == cudaErrOutOfMemory
}

// check returns nil for CUDA_SUCCESS, else a *cudaError for op.
func (d *cudaDriver) check(op string, r int32) error {
	if r == cudaSuccess {
		return nil
	}
	e := &cudaError{Op: op, Code: r}
	var s *byte
	if d.cuGetErrorName != nil && d.cuGetErrorName(r, &s) == cudaSuccess {
		e.Name = cudaString(s)
	}
	s = nil
	if d.cuGetErrorString != nil && d.cuGetErrorString(r, &s) == cudaSuccess {
		e.Msg = cudaString(s)
	}
	return e
}

// cudaString copies the NUL-terminated C string at p, which the driver owns.
func cudaString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cudaDevice is one device with its primary context retained.
type cudaDevice struct {
	drv  *cudaDriver
	dev  int32   // CUdevice
	ctx  uintptr // CUcontext: the device's primary context
	name string
}

// openCUDADevice loads the driver (lib, or the default names when empty),
// initialises it and retains the primary context of device ordinal. It
// returns an error wrapping ErrUnavailable, saying why, when there is no
// usable driver or no such device.
func openCUDADevice(lib string, ordinal int) (*cudaDevice, error) {
	drv, err := loadCUDADriver(lib)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := drv.check("cuInit", drv.cuInit(0)); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, drv.lib, err)
	}
	var count int32
	if err := drv.check("cuDeviceGetCount", drv.cuDeviceGetCount(&count)); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, drv.lib, err)
	}
	if ordinal >= int(count) {
		return nil, fmt.Errorf("%w: %s: no CUDA device %d (%d visible)", ErrUnavailable, drv.lib, ordinal, count)
	}
	d := &cudaDevice{drv: drv}
	if err := drv.check("cuDeviceGet", drv.cuDeviceGet(&d.dev, int32(ordinal))); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, drv.lib, err)
	}
	name := make([]byte, 256)
	if err := drv.check("cuDeviceGetName", drv.cuDeviceGetName(name, int32(len(name)), d.dev)); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, drv.lib, err)
	}
	d.name = cudaString(&name[0])
	if err := drv.check("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return nil, fmt.Errorf("%w: %s: device %d (%s): %w", ErrUnavailable, drv.lib, ordinal, d.name, err)
	}
	return d, nil
}

// do runs call with the primary context current on a locked OS thread,
// restoring the thread's context stack afterwards (see "Threads and
// contexts" in gpu.go), and returns call's error.
func (d *cudaDevice) do(call func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.drv.check("cuCtxPushCurrent_v2", d.drv.cuCtxPushCurrent(d.ctx)); err != nil {
		return err
	}
	err := call()
	var popped uintptr
	if perr := d.drv.check("cuCtxPopCurrent_v2", d.drv.cuCtxPopCurrent(&popped)); perr != nil && err == nil {
		err = perr
	}
	return err
}

// memInfo returns the device's free and total memory in bytes.
func (d *cudaDevice) memInfo() (free, total int64, err error) {
	var f, t uintptr
	err = d.do(func() error { return d.drv.check("cuMemGetInfo_v2", d.drv.cuMemGetInfo(&f, &t)) })
	return int64(f), int64(t), err
}

// malloc allocates size bytes of device memory.
func (d *cudaDevice) malloc(size int64) (uint64, error) {
	var p uint64
	err := d.do(func() error { return d.drv.check("cuMemAlloc_v2", d.drv.cuMemAlloc(&p, uintptr(size))) })
	return p, err
}

// memFree frees device memory malloc returned.
func (d *cudaDevice) memFree(p uint64) error {
	return d.do(func() error { return d.drv.check("cuMemFree_v2", d.drv.cuMemFree(p)) })
}

// htod copies p to device address dst and waits for the bytes to land.
func (d *cudaDevice) htod(dst uint64, p []byte) error {
	src := unsafe.Pointer(unsafe.SliceData(p))
	return d.do(func() error {
		if err := d.drv.check("cuMemcpyHtoD_v2", d.drv.cuMemcpyHtoD(dst, src, uintptr(len(p)))); err != nil {
			return err
		}
		return d.drv.check("cuCtxSynchronize", d.drv.cuCtxSynchronize())
	})
}

// dtoh copies len(p) bytes from device address src into p.
func (d *cudaDevice) dtoh(p []byte, src uint64) error {
	dst := unsafe.Pointer(unsafe.SliceData(p))
	return d.do(func() error {
		return d.drv.check("cuMemcpyDtoH_v2", d.drv.cuMemcpyDtoH(dst, src, uintptr(len(p))))
	})
}

// ipcHandle exports the allocation at p.
func (d *cudaDevice) ipcHandle(p uint64) ([64]byte, error) {
	var h [64]byte
	if d.drv.cuIpcGetMemHandle == nil {
		return h, fmt.Errorf("%s has no cuIpcGetMemHandle: %w", d.drv.lib, errors.ErrUnsupported)
	}
	err := d.do(func() error { return d.drv.check("cuIpcGetMemHandle", d.drv.cuIpcGetMemHandle(&h, p)) })
	return h, err
}

// close releases the primary context. The library stays loaded.
func (d *cudaDevice) close() error {
	return d.drv.check("cuDevicePrimaryCtxRelease_v2", d.drv.cuDevicePrimaryCtxRelease(d.dev))
}
