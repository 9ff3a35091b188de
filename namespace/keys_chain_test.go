package namespace

import (
	"encoding/binary"
	"slices"
	"testing"
)

// The key chain has two implementations: the assembly one where the CPU
// has the SHA extensions and pages are a multiple of 4 tokens
// (keys_shani_amd64.s), and appendPageKeysGeneric, one sha256.Sum256 a
// page. These tests hold AppendPageKeys, whichever it runs, to the generic
// chain and to the standard library.

// chainLengths are the page counts each page size is checked at: short
// chains, and for the page sizes the assembly hashes, chains ending just
// before, at and after the end of its chunks of shaChunkPages pages.
func chainLengths(pageTokens int) []int {
	short := []int{1, 2, 3, 5, 8}
	if pageTokens%4 != 0 {
		return short
	}
	_, blocks := shaPad(pageTokens)
	c := shaChunkPages(blocks)
	return append(short, c-1, c, c+1, 2*c+3)
}

// TestAppendPageKeysMatchesGeneric: for every page size from 1 to 300
// tokens, random tokens at any alignment, chains of many lengths, a parent
// key that is not a namespace ID and a dst that already holds keys, AppendPageKeys gives
// the generic chain's keys, and the last key of each chain is the
// standard library's SHA-256 of its message.
func TestAppendPageKeysMatchesGeneric(t *testing.T) {
	r := testRand(t)
	t.Logf("SHA extensions in use: %v", haveSHANI)
	for pt := 1; pt <= 300; pt++ {
		for _, pages := range chainLengths(pt) {
			// A partial page at the end, and 0..3 tokens cut off the front
			// so that the assembly's 16-byte loads are not all aligned.
			off := r.IntN(4)
			toks := randTokens(r, off+pages*pt+r.IntN(pt))[off:]
			var prev Key
			for i := range prev {
				prev[i] = byte(r.Uint32())
			}
			head := []Key{{1}, {2}}
			got := AppendPageKeys(slices.Clone(head), prev, toks, pt)
			want := appendPageKeysGeneric(slices.Clone(head), prev, toks, pt, pages)
			if len(got) != len(want) {
				t.Fatalf("page_tokens %d, %d pages: %d keys, want %d", pt, pages, len(got), len(want))
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("page_tokens %d, %d pages: key %d (page %d) = %s, want %s",
					pt, pages, i, i-len(head), got[i], want[i])
			}
			last := len(got) - 1
			parent := prev
			if pages > 1 {
				parent = got[last-1]
			}
			if k := refNextKey(parent, toks[(pages-1)*pt:pages*pt]); got[last] != k {
				t.Fatalf("page_tokens %d, %d pages: last key %s, crypto/sha256 says %s", pt, pages, got[last], k)
			}
		}
	}
}

func firstDiff(a, b []Key) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// FuzzChainKeys: AppendPageKeys agrees with the generic chain for any
// tokens, parent key and page size up to 300 tokens.
func FuzzChainKeys(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef"), []byte("parent"), uint16(16))
	f.Add(make([]byte, 4*16*40), []byte{}, uint16(4))
	f.Add(make([]byte, 4*300*3), []byte{0xff}, uint16(299))
	f.Add(make([]byte, 4*12*9+5), []byte{7}, uint16(11))
	f.Fuzz(func(t *testing.T, raw, parent []byte, pt16 uint16) {
		pt := int(pt16%300) + 1
		toks := make([]uint32, len(raw)/4)
		for i := range toks {
			toks[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		prev := Key(sum256(parent))
		got := AppendPageKeys(nil, prev, toks, pt)
		want := appendPageKeysGeneric(nil, prev, toks, pt, len(toks)/pt)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("page_tokens %d, %d tokens: key %d differs from the generic chain", pt, len(toks), i)
		}
	})
}

// TestShaPad: the padding of a page's message is 0x80, zeros and the
// message's length in bits, big-endian, filling its last block.
func TestShaPad(t *testing.T) {
	for _, tc := range []struct{ pt, blocks, padLen int }{
		{4, 1, 16},    // 48-byte message
		{8, 2, 64},    // 64 bytes: the padding is a block of its own
		{12, 2, 48},   // 80
		{16, 2, 32},   // 96
		{20, 2, 16},   // 112
		{24, 3, 64},   // 128
		{256, 17, 32}, // 1056
	} {
		pad, blocks := shaPad(tc.pt)
		if blocks != tc.blocks {
			t.Errorf("page_tokens %d: %d blocks, want %d", tc.pt, blocks, tc.blocks)
		}
		var want [64]byte
		want[0] = 0x80
		bits := 8 * (KeySize + 4*tc.pt)
		want[tc.padLen-2], want[tc.padLen-1] = byte(bits>>8), byte(bits)
		if pad != want {
			t.Errorf("page_tokens %d: padding % x, want % x", tc.pt, pad, want)
		}
	}
}
