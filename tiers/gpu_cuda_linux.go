//go:build linux && (amd64 || arm64)

package tiers

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
)

// defaultCUDALibs are the names tried, in order, when GPUConfig.Driver is
// empty: the driver's soname, then the development symlink.
var defaultCUDALibs = []string{"libcuda.so.1", "libcuda.so"}

// loadCUDADriver dlopens the CUDA driver library and binds the entry points
// the tier uses, preferring the _v2 symbols where the API versions them. It
// fails, saying why, when the library cannot be loaded or lacks a required
// symbol. The library is never closed (see "Driver" in gpu.go).
func loadCUDADriver(lib string) (*cudaDriver, error) {
	names := defaultCUDALibs
	if lib != "" {
		names = []string{lib}
	}
	var handle uintptr
	var reasons []string
	for _, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			handle, lib = h, name
			break
		}
		reasons = append(reasons, err.Error())
	}
	if handle == 0 {
		// One line, for the log: dlerror already names each library.
		return nil, errors.New(strings.Join(reasons, "; "))
	}
	d := &cudaDriver{lib: lib}
	b := cudaBinder{handle: handle, lib: lib}
	b.bind(&d.cuInit, "cuInit")
	b.bind(&d.cuDeviceGetCount, "cuDeviceGetCount")
	b.bind(&d.cuDeviceGet, "cuDeviceGet")
	b.bind(&d.cuDeviceGetName, "cuDeviceGetName")
	b.bind(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	b.bind(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
	b.bind(&d.cuCtxPushCurrent, "cuCtxPushCurrent_v2")
	b.bind(&d.cuCtxPopCurrent, "cuCtxPopCurrent_v2")
	b.bind(&d.cuCtxSynchronize, "cuCtxSynchronize")
	b.bind(&d.cuMemGetInfo, "cuMemGetInfo_v2")
	b.bind(&d.cuMemAlloc, "cuMemAlloc_v2")
	b.bind(&d.cuMemFree, "cuMemFree_v2")
	b.bind(&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2")
	b.bind(&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2")
	b.optional(&d.cuGetErrorName, "cuGetErrorName")
	b.optional(&d.cuGetErrorString, "cuGetErrorString")
	b.optional(&d.cuIpcGetMemHandle, "cuIpcGetMemHandle")
	if len(b.missing) > 0 {
		return nil, fmt.Errorf("%s: driver too old: no symbol %v", lib, b.missing)
	}
	return d, nil
}

// cudaBinder binds C functions of one library to Go function variables.
type cudaBinder struct {
	handle  uintptr
	lib     string
	missing []string
}

// bind points fptr at the first of names the library has, noting names[0] as
// missing when it has none.
func (b *cudaBinder) bind(fptr any, names ...string) {
	if !b.optional(fptr, names...) {
		b.missing = append(b.missing, names[0])
	}
}

// optional points fptr at the first of names the library has and reports
// whether there was one; fptr stays nil otherwise.
func (b *cudaBinder) optional(fptr any, names ...string) bool {
	for _, name := range names {
		// Dlsym first: RegisterLibFunc panics on a missing symbol.
		if sym, err := purego.Dlsym(b.handle, name); err == nil && sym != 0 {
			purego.RegisterFunc(fptr, sym)
			return true
		}
	}
	return false
}
