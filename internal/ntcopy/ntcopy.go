// Package ntcopy copies large buffers with non-temporal stores: the
// destination's cache lines are written straight to memory instead of
// being read in first (read-for-ownership) and then evicted. A 256 KiB
// page copied into a cold shared-memory arena takes about 60% of the time
// of copy on the development VM (ntcopy's BenchmarkCopy), and the copy no
// longer pushes the caller's working set out of the cache.
//
// The price: the destination is not in the cache afterwards. A reader that
// comes soon after (a node verifying a small batch it will find in the
// shared last-level cache otherwise) reads it from memory. Callers use it
// for bytes nobody reads soon, or batches too large for the cache anyway.
//
// Copy orders its stores before it returns (SFENCE): bytes it wrote are
// visible to another core, process or device once the caller's next store
// (a commit sent, a flag set) is.
package ntcopy

import "unsafe"

// MinBytes is the smallest copy that streams; shorter ones use copy, whose
// setup costs less than the stores save.
const MinBytes = 4 << 10

// Streams reports whether Copy streams on this machine: false where the
// CPU lacks the instructions (or a purego build), and Copy is copy.
func Streams() bool { return hasStream }

// Copy copies min(len(dst), len(src)) bytes from src to dst, as copy does,
// and returns their count. dst and src must not overlap. Copies of
// MinBytes or more stream their 64-byte-aligned middle where Streams.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !hasStream || n < MinBytes {
		return copy(dst, src[:n])
	}
	// The head up to dst's first 64-byte boundary, so that every streamed
	// store fills a whole cache line.
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & 63)
	copy(dst[:head], src[:head])
	body := (n - head) &^ (blockBytes - 1)
	stream(unsafe.SliceData(dst[head:]), unsafe.SliceData(src[head:]), body)
	copy(dst[head+body:n], src[head+body:n])
	return n
}
