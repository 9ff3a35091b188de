package transport

import (
	"bytes"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

func rights(fds []int) []byte { return unix.UnixRights(fds...) }

func oobSpace(n int) int { return unix.CmsgSpace(4 * n) }

// parseRights returns the fds of SCM_RIGHTS messages in oob.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parsing control messages: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			closeFDs(fds)
			return nil, fmt.Errorf("parsing SCM_RIGHTS: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
