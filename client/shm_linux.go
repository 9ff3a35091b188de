package client

import "golang.org/x/sys/unix"

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
