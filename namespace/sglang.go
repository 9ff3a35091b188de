package namespace

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/minio/sha256-simd"
)

// SGLang's HiCache page hash, matched against sgl-project/sglang
// python/sglang/srt/utils/hashing.py get_hash_str (commit 4d374af2, where
// it moved from mem_cache/hicache_storage.py) and
// python/sglang/srt/mem_cache/radix_cache.py compute_node_hash_values:
//
//	h_0 = SHA-256(LE-uint32 tokens of page 0)
//	h_i = SHA-256(bytes.fromhex(h_{i-1}) || LE-uint32 tokens of page i)
//
// Each hash is carried as a 64-digit lower-case hex string; the prior is
// fed to the next page as its raw 32 bytes, not as hex text. The first page
// has no prior (SGLang passes None and `if prior_hash:` skips it), so the
// chain is not scoped by anything: use KeyFromEngineHash to put it in a
// namespace. SGLang's EAGLE bigram mode hashes each (a, b) pair as a then
// b, which is the same as passing the flattened pairs here. The opt-in
// SGLANG_USE_XXH3_HASH variant some versions carry is not reproduced.

// SGLangPageHash returns get_hash_str(tokens, prior): the lower-case hex
// SHA-256 of the raw bytes of prior (skipped when prior is "") followed by
// the tokens as little-endian uint32. prior is a hash this function
// returned (hex without whitespace); it panics on anything else.
func SGLangPageHash(prior string, tokens []uint32) string {
	var stack [KeySize + 4*stackTokens]byte
	buf := stack[:0]
	if prior != "" {
		var err error
		if buf, err = hex.AppendDecode(buf, []byte(prior)); err != nil {
			panic("namespace: SGLangPageHash: prior is not a hex hash: " + err.Error())
		}
	}
	for _, t := range tokens {
		buf = binary.LittleEndian.AppendUint32(buf, t)
	}
	s := sha256.Sum256(buf)
	return hex.EncodeToString(s[:])
}

// SGLangPageHashes returns the SGLang page hash of every full page of
// tokens, pageTokens tokens a page, chained from no prior, as HiCache
// computes them for a radix-tree path from the root. A trailing partial
// page gets no hash (HiCache only stores page-aligned prefixes). It panics
// if pageTokens <= 0.
func SGLangPageHashes(tokens []uint32, pageTokens int) []string {
	if pageTokens <= 0 {
		panic("namespace: SGLangPageHashes with pageTokens <= 0")
	}
	pages := len(tokens) / pageTokens
	out := make([]string, pages)
	buf := make([]byte, KeySize+4*pageTokens)
	for p := range pages {
		putTokens(buf[KeySize:], tokens[p*pageTokens:(p+1)*pageTokens])
		in := buf
		if p == 0 {
			in = buf[KeySize:]
		}
		s := sha256.Sum256(in)
		copy(buf, s[:])
		out[p] = hex.EncodeToString(s[:])
	}
	return out
}
