package namespace

import "encoding/binary"

// shaChunkBlocks is the most SHA-256 blocks one call of the assembly key
// chain (keys_shani_amd64.s) hashes, about 35 µs of work: the goroutine
// cannot be preempted inside it.
const shaChunkBlocks = 1024

// shaChunkPages is how many pages one call of the assembly key chain
// hashes when a page is blocks SHA-256 blocks: at least one.
func shaChunkPages(blocks int) int {
	return max(1, shaChunkBlocks/blocks)
}

// shaPad returns the SHA-256 padding (FIPS 180-4 §5.1.1) of one page's
// message, 32+4*pageTokens bytes: 0x80, zeros and the message's length in
// bits, filling its last 64-byte block. It returns the message's block
// count too. The padding is the first 64*blocks-32-4*pageTokens bytes of
// pad, whole 16-byte groups when pageTokens is a multiple of 4.
func shaPad(pageTokens int) (pad [64]byte, blocks int) {
	n := KeySize + 4*pageTokens
	blocks = (n + 9 + 63) / 64
	padLen := 64*blocks - n
	pad[0] = 0x80
	binary.BigEndian.PutUint64(pad[padLen-8:], uint64(n)*8)
	return pad, blocks
}
