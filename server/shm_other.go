//go:build !linux

package server

import (
	"errors"
	"net"
)

func checkPeer(uc *net.UnixConn) error { return errors.ErrUnsupported }
