package transport

import "golang.org/x/sys/unix"

// mapAnonForTest returns memory outside the Go heap, as registration needs.
func mapAnonForTest(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}
