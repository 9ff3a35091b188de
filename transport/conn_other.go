//go:build !linux

package transport

import (
	"bytes"
	"errors"
	"io"
)

func rights(fds []int) []byte { return nil }

func oobSpace(n int) int { return 0 }

func parseRights(oob []byte) ([]int, error) { return nil, errors.ErrUnsupported }

func closeFDs(fds []int) {}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
