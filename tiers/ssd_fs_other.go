//go:build !linux

package tiers

import (
	"errors"
	"fmt"
)

// Sync is fsync: the system has no fdatasync.
func (f osFile) Sync() error { return f.File.Sync() }

// Fallocate is unsupported here; the caller falls back to Truncate.
func (f osFile) Fallocate(off, n int64) error {
	return fmt.Errorf("fallocate %s: %w", f.Name(), errors.ErrUnsupported)
}

func (f osFile) dontNeed(off, n int64) {}

// ssdSpace is unknown here: it reports room and a writable file system.
func ssdSpace(string) (free int64, readOnly bool, err error) { return 1 << 62, false, nil }
