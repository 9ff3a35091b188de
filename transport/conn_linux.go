package transport

import (
	"bytes"
	"crypto/tls"
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

// PeerGone reports whether the peer closed c, reset it or sent bytes no
// request asked for while c sat idle: a non-blocking peek at the socket
// finds end of file, an error or data. An idle connection in a client's
// pool has none of these, so a true answer means it must not be used
// (the node closes connections idle past its timeout). False where c has
// no socket to peek at.
func (c *Conn) PeerGone() bool {
	nc := c.nc
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if b, ok := nc.(*tlsBase); ok {
		nc = b.Conn
	}
	rc, err := rawConn(nc)
	if err != nil {
		return true
	}
	if rc == nil {
		return false
	}
	gone := false
	if err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		gone = n > 0 || (err == nil && n == 0) || (err != nil && err != unix.EAGAIN && err != unix.EINTR)
		return true
	}); err != nil {
		return true // closed
	}
	return gone
}
