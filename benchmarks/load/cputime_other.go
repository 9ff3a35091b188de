//go:build !unix

package load

import "time"

// CPUTime is not measured on this platform: it is 0.
func CPUTime() time.Duration { return 0 }
