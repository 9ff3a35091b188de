//go:build !linux

package transport

import "net"

// RawSocket is the raw system-call path of rawio_linux.go; elsewhere there
// is none and stream connections use net.Conn.
type RawSocket struct {
	poll *ReadPoll
	idle func() error
}

// NewRawSocket is nil: no raw path here.
func NewRawSocket(net.Conn) *RawSocket { return nil }

func (*RawSocket) Read([]byte) (int, error) { panic("transport: no raw socket") }

func (*RawSocket) Writev(...[]byte) error { panic("transport: no raw socket") }

func (*RawSocket) writevLent(...[]byte) error { panic("transport: no raw socket") }

func (*RawSocket) closeLend() {}
