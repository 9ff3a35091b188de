//go:build !(linux && (amd64 || arm64))

package tiers

import (
	"errors"
	"fmt"
	"runtime"
)

// loadCUDADriver fails: the tier binds the CUDA driver only on linux/amd64
// and linux/arm64, where NVIDIA ships libcuda.so.
func loadCUDADriver(lib string) (*cudaDriver, error) {
	return nil, fmt.Errorf("the CUDA driver on %s/%s: %w", runtime.GOOS, runtime.GOARCH, errors.ErrUnsupported)
}
