// Package crc32c computes CRC-32C (Castagnoli), the checksum strata uses for
// pages and other stored data.
//
// The results are identical to hash/crc32 with crc32.MakeTable(crc32.Castagnoli).
// On amd64 CPUs with AVX-512 and VPCLMULQDQ, inputs of 768 bytes or more are
// folded with 512-bit carry-less multiplies while the CRC32 instruction
// works on interleaved stretches of the same input, which is two to three
// times as fast as hash/crc32 alone. On amd64 CPUs with AVX2 and
// VPCLMULQDQ but not AVX-512, inputs of 512 bytes or more are folded with
// 256-bit carry-less multiplies beside the CRC32 instruction, which is
// about 1.3 to 1.5 times as fast. Everywhere else, and for short inputs
// and the bytes past the last whole period (768 or 512 bytes), the work is
// handed to hash/crc32.
package crc32c

import "hash/crc32"

// Size is the size of a CRC-32C checksum in bytes.
const Size = 4

// HasVector reports whether this build and CPU support a vector path
// (amd64 with VPCLMULQDQ and AVX-512 or AVX2). When it is true, Update and
// Checksum use that path for inputs of at least one period (768 bytes with
// AVX-512, 512 with AVX2), handing the bytes past the last whole period to
// hash/crc32. It is set at start-up and must not be changed.
var HasVector = hasVector

// useVector selects the vector path. It starts equal to HasVector; tests clear
// it to exercise the fallback.
var useVector = HasVector

// castagnoli is the table hash/crc32 uses for the fallback and for the
// tail that the vector path leaves over. hash/crc32 spots
// the Castagnoli polynomial and uses its own accelerated code for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// vectorBlock is the granule of the vector path (one period of the
	// assembly kernel this CPU runs: 768 bytes, or 512 for the AVX2 one):
	// updateVector only takes positive multiples of it, and whatever is
	// left over goes to hash/crc32.
	vectorBlock = vectorPeriod

	// vectorMin is the shortest input handed to the vector path.
	vectorMin = vectorBlock
)

// Update returns the result of adding the bytes in p to crc. Like
// crc32.Update, it takes and returns the finished (inverted) form, so
// Update(Update(0, a), b) == Checksum(append(a, b...)).
func Update(crc uint32, p []byte) uint32 {
	if useVector && len(p) >= vectorMin {
		n := len(p) - len(p)%vectorBlock
		// updateVector works on the raw register value, without the
		// pre- and post-inversion of the finished form.
		crc = ^updateVector(^crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, castagnoli, p)
}

// Checksum returns the CRC-32C checksum of p.
func Checksum(p []byte) uint32 {
	return Update(0, p)
}
