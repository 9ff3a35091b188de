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

// PeerGone is the peek of conn_linux.go; elsewhere a connection is taken
// to be alive.
func (c *Conn) PeerGone() bool { return false }
