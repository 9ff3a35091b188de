//go:build !linux

package client

func closeFDs(fds []int) {}
