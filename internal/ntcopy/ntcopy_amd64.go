//go:build amd64 && !purego

package ntcopy

import "golang.org/x/sys/cpu"

// hasStream: stream uses AVX2's 256-bit loads and VMOVNTDQ stores
// (cpu.X86.HasAVX2 is set only when the OS saves the AVX state).
var hasStream = cpu.X86.HasAVX2

// blockBytes is what stream moves per iteration.
const blockBytes = 128

// stream copies n bytes, a multiple of blockBytes, from src to dst (64-byte
// aligned) with non-temporal stores, then SFENCE.
//
//go:noescape
func stream(dst, src *byte, n int)
