//go:build !linux

package tiers

import (
	"errors"
	"fmt"
)

// The host tier needs memfd_create; other systems get a clear error.

func mapArena(name string, size int64) ([]byte, int, error) {
	return nil, -1, fmt.Errorf("memfd arena: %w", errors.ErrUnsupported)
}

func unmapArena(mem []byte, fd int) error { return nil }

func populate(mem []byte) error { return nil }

func mapAnon(size int64) ([]byte, error) {
	return nil, fmt.Errorf("slot metadata: %w", errors.ErrUnsupported)
}

func unmap(b []byte) error { return nil }
