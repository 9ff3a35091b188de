//go:build unix

package load

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time (user and system) this whole process has used:
// the load generator, and an in-process node when there is one.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
