//go:build !amd64 || purego

package crc32c

// hasVector is false: this architecture (or a purego build) has no vector
// implementation, and everything goes through hash/crc32.
const hasVector = false

// vectorPeriod is unused without a vector implementation.
const vectorPeriod = 768

// updateVector is never called when hasVector is false.
func updateVector(crc uint32, p []byte) uint32 {
	panic("crc32c: no vector implementation on this architecture")
}
