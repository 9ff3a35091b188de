//go:build !purego

package crc32c

import (
	"golang.org/x/sys/cpu"

	"github.com/stratakv/strata/internal/cpuid"
)

// hasZMM reports whether the CPU (and OS) support every instruction
// updateZMM uses:
//   - AVX-512 Foundation and VPCLMULQDQ: 512-bit loads, carry-less
//     multiplies, three-way XOR (VPTERNLOGD) and lane extracts;
//   - AVX: the VEX-encoded 128-bit XORs and moves of the last stage;
//   - SSE4.2: the CRC32 instruction, for the four chains that run beside
//     the multiplies and for the last 16 bytes.
//
// PCLMULQDQ is implied by VPCLMULQDQ and is checked for good measure.
// cpu.X86.HasAVX512F is only set when the OS saves the AVX-512 state.
var hasZMM = cpu.X86.HasAVX512F &&
	cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasAVX &&
	cpu.X86.HasPCLMULQDQ &&
	cpu.X86.HasSSE42

// hasYMM reports whether the CPU (and OS) support every instruction
// updateYMM uses: AVX2 (256-bit loads, XORs, lane extracts and
// broadcasts; cpu.X86.HasAVX2 is only set when the OS saves the AVX
// state), VPCLMULQDQ on 256-bit registers, and SSE4.2's CRC32 for the
// four chains beside the multiplies and the last 16 bytes.
// golang.org/x/sys/cpu reports VPCLMULQDQ only beside AVX-512, so its
// CPUID bit (leaf 7, ECX bit 10) is read here.
var hasYMM = cpu.X86.HasAVX2 &&
	cpu.X86.HasPCLMULQDQ &&
	cpu.X86.HasSSE42 &&
	hasVPCLMULQDQ()

// hasVPCLMULQDQ reports the CPUID bit of VPCLMULQDQ (leaf 7, ECX bit 10).
func hasVPCLMULQDQ() bool {
	if max, _, _, _ := cpuid.Query(0, 0); max < 7 {
		return false
	}
	_, _, ecx, _ := cpuid.Query(7, 0)
	return ecx&(1<<10) != 0
}

// hasVector: one of the two kernels runs here, the 512-bit one where it
// can.
var hasVector = hasZMM || hasYMM

// vectorPeriod is the granule of the kernel updateVector runs.
var vectorPeriod = func() int {
	if hasZMM {
		return 768
	}
	return 512
}()

// updateVector adds p to the raw CRC-32C register value crc (no inversion)
// and returns the new raw value. len(p) must be a positive multiple of
// vectorBlock.
func updateVector(crc uint32, p []byte) uint32 {
	if hasZMM {
		return updateZMM(crc, p)
	}
	return updateYMM(crc, p)
}

// updateZMM is updateVector with 512-bit registers; len(p) must be a
// positive multiple of 768.
//
//go:noescape
func updateZMM(crc uint32, p []byte) uint32

// updateYMM is updateVector with 256-bit registers; len(p) must be a
// positive multiple of 512.
//
//go:noescape
func updateYMM(crc uint32, p []byte) uint32
