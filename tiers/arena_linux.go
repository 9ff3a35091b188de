//go:build linux

package tiers

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapArena creates a memfd of size bytes and maps it shared, read-write. The
// kernel commits pages on first touch, so an untouched arena costs only
// address space.
func mapArena(name string, size int64) (mem []byte, fd int, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, -1, fmt.Errorf("memfd_create %q: %w", name, err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("ftruncate memfd to %d bytes: %w", size, err)
	}
	mem, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("mmap %d-byte memfd: %w", size, err)
	}
	return mem, fd, nil
}

// populate commits every page of mem, a shared mapping, for writing:
// MADV_POPULATE_WRITE (Linux 5.14), or a write to each page where the
// kernel does not know it.
func populate(mem []byte) error {
	err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	touchPages(mem) // older kernels: a write fault per page
	return nil
}

// touchPages writes to each page of mem the zero it already reads as.
func touchPages(mem []byte) {
	for off := 0; off < len(mem); off += os.Getpagesize() {
		mem[off] = 0
	}
}

// unmapArena unmaps the arena and closes its memfd.
func unmapArena(mem []byte, fd int) error {
	return errors.Join(unmap(mem), os.NewSyscallError("close", unix.Close(fd)))
}

// mapAnon maps size bytes of private, zeroed, unreserved memory: slot
// metadata that stays outside the Go heap and is committed as it is touched.
func mapAnon(size int64) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes of slot metadata: %w", size, err)
	}
	return b, nil
}

func unmap(b []byte) error {
	if b == nil {
		return nil
	}
	return os.NewSyscallError("munmap", unix.Munmap(b))
}
