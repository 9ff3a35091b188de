//go:build !linux

package transport

import (
	"errors"
	"fmt"
)

// The shm backend needs memfds and SCM_RIGHTS (Linux).

func mapShared(fd int, size int64, writable bool) ([]byte, error) {
	return nil, fmt.Errorf("shm: %w", errors.ErrUnsupported)
}

func unmapShared(b []byte) error { return nil }

func joinErr(errs ...error) error { return errors.Join(errs...) }
