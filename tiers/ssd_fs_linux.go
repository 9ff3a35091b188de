//go:build linux

package tiers

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sync is fdatasync(2): the data and the metadata needed to read it back
// (extent conversion, length), not timestamps.
func (f osFile) Sync() error {
	if err := ssdRetryEINTR(func() error { return unix.Fdatasync(int(f.Fd())) }); err != nil {
		return &ssdFSError{op: "fdatasync", name: f.Name(), err: err}
	}
	return nil
}

// Fallocate is fallocate(2) with mode 0. EOPNOTSUPP (a file system without
// it) and ENOSYS come back wrapping errors.ErrUnsupported.
func (f osFile) Fallocate(off, n int64) error {
	err := ssdRetryEINTR(func() error { return unix.Fallocate(int(f.Fd()), 0, off, n) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("fallocate %s: %w: %w", f.Name(), errors.ErrUnsupported, err)
	}
	return &ssdFSError{op: "fallocate", name: f.Name(), err: err}
}

func (f osFile) dontNeed(off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED) // advice only
}

func ssdRetryEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// ssdFSError names the operation and file of a system call's error, like
// os.PathError (which it is not, so as not to claim a path operation).
type ssdFSError struct {
	op, name string
	err      error
}

func (e *ssdFSError) Error() string { return e.op + " " + e.name + ": " + e.err.Error() }
func (e *ssdFSError) Unwrap() error { return e.err }

// ssdSpace reports the bytes an unprivileged writer may still take in the
// file system of dir and whether it is mounted read-only (statfs(2)).
func ssdSpace(dir string) (free int64, readOnly bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return int64(st.Bavail) * st.Bsize, st.Flags&unix.ST_RDONLY != 0, nil
}
