//go:build !linux

package namespace

import "time"

// threadCPU reports no thread CPU time: only Linux measures it per thread.
func threadCPU() (time.Duration, bool) { return 0, false }
