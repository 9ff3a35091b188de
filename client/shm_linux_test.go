package client_test

import "golang.org/x/sys/unix"

func closeTestFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
