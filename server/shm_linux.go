package server

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// checkPeer admits only processes of the node's own user (or root): a
// process that maps the arena sees every tenant's pages.
func checkPeer(uc *net.UnixConn) error {
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	if me := os.Getuid(); int(cred.Uid) != me && cred.Uid != 0 {
		return fmt.Errorf("peer uid %d is not the node's (%d): %w", cred.Uid, me, errDenied)
	}
	return nil
}
