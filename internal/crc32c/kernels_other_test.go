//go:build !amd64 || purego

package crc32c

// kernel is one assembly kernel, for TestKernels.
type kernel struct {
	name   string
	period int
	update func(uint32, []byte) uint32
}

// vectorKernels returns none: there is no assembly here.
func vectorKernels() []kernel { return nil }
