package transport

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func mapShared(fd int, size int64, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(fd, 0, int(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return b, nil
}

func unmapShared(b []byte) error {
	if b == nil {
		return nil
	}
	return os.NewSyscallError("munmap", unix.Munmap(b))
}

func joinErr(errs ...error) error { return errors.Join(errs...) }
