package namespace

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD, which package syscall does not
// name: the usage of the calling thread alone.
const rusageThread = 1

// threadCPU returns the user and system CPU time the calling OS thread has
// used, and whether the OS reported it.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
