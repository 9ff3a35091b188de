//go:build unix

package benchmarks

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the whole process has used:
// client, node and everything else in it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
