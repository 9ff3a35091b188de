//go:build !purego

package crc32c

import "golang.org/x/sys/cpu"

// hasVector reports whether the CPU (and OS) support every instruction
// updateVector uses:
//   - AVX-512 Foundation and VPCLMULQDQ: 512-bit loads, carry-less
//     multiplies, three-way XOR (VPTERNLOGD) and lane extracts;
//   - AVX: the VEX-encoded 128-bit XORs and moves of the last stage;
//   - SSE4.2: the CRC32 instruction, for the four chains that run beside
//     the multiplies and for the last 16 bytes.
//
// PCLMULQDQ is implied by VPCLMULQDQ and is checked for good measure.
// cpu.X86.HasAVX512F is only set when the OS saves the AVX-512 state.
var hasVector = cpu.X86.HasAVX512F &&
	cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasAVX &&
	cpu.X86.HasPCLMULQDQ &&
	cpu.X86.HasSSE42

// updateVector adds p to the raw CRC-32C register value crc (no inversion)
// and returns the new raw value. len(p) must be a positive multiple of
// vectorBlock (768).
//
//go:noescape
func updateVector(crc uint32, p []byte) uint32
