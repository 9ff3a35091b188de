//go:build !purego

package crc32c

// kernel is one assembly kernel, for TestKernels.
type kernel struct {
	name   string
	period int
	update func(uint32, []byte) uint32
}

// vectorKernels returns the kernels this CPU can run.
func vectorKernels() []kernel {
	var ks []kernel
	if hasZMM {
		ks = append(ks, kernel{"updateZMM", 768, updateZMM})
	}
	if hasYMM {
		ks = append(ks, kernel{"updateYMM", 512, updateYMM})
	}
	return ks
}
