//go:build amd64 && !purego

package namespace

import "github.com/stratakv/strata/internal/cpuid"

// The key chain with the x86 SHA extensions (keys_shani_amd64.s).
//
// A page of pageTokens tokens (a multiple of 4) is the SHA-256 message
// parent key || LE-uint32 tokens, 32+4*pageTokens bytes, padded (FIPS
// 180-4 §5.1.1) to whole 64-byte blocks. The assembly hashes many pages
// per call and never stores a key it needs again: the parent key of page i
// is the final state of page i-1, so the first 8 message words of page i
// are that state's words, rearranged in registers. The token words are
// loaded straight from the token slice (byte-swapped, as SHA-256 reads
// big-endian words), and since a multiple of 4 tokens ends on a 16-byte
// boundary of the message, the padding is whole 16-byte groups that are
// the same for every page: shaPad (keys_shapad.go) builds them once per
// call.

// haveSHANI says whether the CPU runs keys_shani_amd64.s: it needs the SHA
// extensions (SHA256RNDS2, SHA256MSG1, SHA256MSG2), SSSE3 (PSHUFB,
// PALIGNR) and SSE2 (the rest).
var haveSHANI = detectSHANI()

func detectSHANI() bool {
	maxLeaf, _, _, _ := cpuid.Query(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, edx1 := cpuid.Query(1, 0)
	_, ebx7, _, _ := cpuid.Query(7, 0)
	sse2 := edx1&(1<<26) != 0
	ssse3 := ecx1&(1<<9) != 0
	sha := ebx7&(1<<29) != 0
	return sse2 && ssse3 && sha
}

// chainSHANI hashes pages pages of a key chain: the key of page i goes to
// dst[i], the first page's parent key is *prev, the pages' tokens start at
// tokens, groups 16-byte groups (4 tokens) a page. Each page's message is
// blocks 64-byte blocks, its padding the 64*blocks-32-16*groups bytes at
// the start of *pad. The caller checks haveSHANI and pages >= 1.
//
//go:noescape
func chainSHANI(dst *Key, prev *Key, tokens *uint32, pages, groups, blocks int, pad *[64]byte)

// appendChainSHANI appends the keys of pages pages of tokens to dst, whose
// capacity holds them; pageTokens is a multiple of 4.
func appendChainSHANI(dst []Key, prev Key, tokens []uint32, pageTokens, pages int) []Key {
	pad, blocks := shaPad(pageTokens)
	return shaChunks(dst, prev, tokens, pageTokens, pages, blocks, &pad)
}

// shaChunks appends the keys of pages pages of tokens to dst, whose
// capacity holds them, hashing at most shaChunkPages(blocks) pages a call
// (blocks SHA-256 blocks a page) with the last key of one call as the
// parent key of the next: sha256-chain pages (chainSHANI) padded with
// *pad, or with pad nil sha256-blocks pages (blockChainSHANI).
func shaChunks(dst []Key, prev Key, tokens []uint32, pageTokens, pages, blocks int, pad *[64]byte) []Key {
	n := len(dst)
	dst = dst[:n+pages]
	out := dst[n:]
	chunk := shaChunkPages(blocks)
	for len(out) > 0 {
		c := min(len(out), chunk)
		if pad != nil {
			chainSHANI(&out[0], &prev, &tokens[0], c, pageTokens/4, blocks, pad)
		} else {
			blockChainSHANI(&out[0], &prev, &tokens[0], c, blocks)
		}
		prev = out[c-1]
		out = out[c:]
		tokens = tokens[c*pageTokens:]
	}
	return dst
}

// blockChainSHANI hashes pages pages of a sha256-blocks chain: the key of
// page i goes to dst[i], the first page's parent key is *prev, the pages'
// tokens start at tokens, blocks 64-byte blocks (16 tokens) a page. The
// caller checks haveSHANI and pages >= 1.
//
//go:noescape
func blockChainSHANI(dst *Key, prev *Key, tokens *uint32, pages, blocks int)

// appendBlockKeysSHANI appends the keys of pages pages of a sha256-blocks
// chain to dst, whose capacity holds them; pageTokens is a multiple of 16.
func appendBlockKeysSHANI(dst []Key, prev Key, tokens []uint32, pageTokens, pages int) []Key {
	return shaChunks(dst, prev, tokens, pageTokens, pages, pageTokens/keyBlockTokens, nil)
}

// The SHA-256 constants (FIPS 180-4 §4.2.2, §5.3.3), read by the assembly.
// TestSHAConstants derives them from the primes.
var (
	// shaK holds the round constants: the first 32 bits of the fractional
	// parts of the cube roots of the first 64 primes.
	shaK = [64]uint32{
		0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5,
		0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
		0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
		0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
		0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
		0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
		0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
		0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
		0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
		0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
		0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
		0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
		0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
		0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
		0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
		0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
	}
	// shaIV is the initial hash value H0..H7: the first 32 bits of the
	// fractional parts of the square roots of the first 8 primes.
	shaIV = [8]uint32{
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	}
	// shaBswap is the PSHUFB control that reverses the bytes of each
	// 32-bit lane: SHA-256 words are big-endian.
	shaBswap = [16]byte{3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12}
)
