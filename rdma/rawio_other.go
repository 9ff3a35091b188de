//go:build !linux

package rdma

import "net"

// rawIO is the raw system-call path of rawio_linux.go; elsewhere a stream
// connection uses net.Conn.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) Read([]byte) (int, error) { panic("rdma: no raw io") }

func (*rawIO) writev([][]byte) error { panic("rdma: no raw io") }
