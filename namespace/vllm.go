package namespace

import (
	"encoding/binary"
	"sync"

	"github.com/fxamacker/cbor/v2"
	"github.com/minio/sha256-simd"
)

// vLLM's sha256_cbor block hash (prefix caching, V1 engine), checked
// against the installed vllm==0.33.0 wheel (vllm/utils/hashing.py
// sha256_cbor; vllm/v1/core/kv_cache_utils.py init_none_hash,
// resolve_none_hash_seed, hash_block_tokens, get_request_block_hasher) by
// python/tests/test_vllm.py:
//
//	sha256_cbor(x) = SHA-256(cbor2.dumps(x, canonical=True))
//	NONE_HASH      = hash_fn(seed)   (seed a str)
//	block_i        = hash_fn((block_{i-1} or NONE_HASH,
//	                          tuple(tokens of block i), extra_keys))
//
// The seed is PYTHONHASHSEED when it is set. When it is unset, vLLM 0.33
// uses the fixed VLLMDefaultNoneHashSeed for its cryptographic hashes
// (sha256, sha256_cbor), so independent processes share hashes without
// configuration; only xxhash and xxhash_cbor draw a random per-process seed
// (their hashes cannot be reproduced anywhere else). vLLM's default
// prefix_caching_hash_algo is "sha256": SHA-256 of pickle.dumps(x,
// HIGHEST_PROTOCOL) of the same tuple, which this package does not
// reproduce (Python's strata_client.descriptor does, with pickle itself);
// engines that need Go-side keys configure sha256_cbor.
//
// The tuple is a CBOR array of three items: the parent as a byte string,
// the tokens as an array of unsigned integers (shortest form), and the
// extra keys (None -> null; otherwise a tuple of LoRA name, multimodal
// (identifier, offset) pairs, cache salt and prompt-embeds digests, in
// that order; with speculative-decoding lookahead, (extra, *lookahead
// tokens)). Only full blocks are hashed. blockSize is vLLM's hash block
// size (KVCacheConfig.hash_block_size): with one KV cache group it is
// cache_config.block_size times the decode-context-parallel size; with
// several groups it may be smaller than a group's block (their GCD, or
// cache_config.prefix_match_unit), and a block of such a group is then
// named by the hash that ends it. Older vLLM versions with integer block
// hashes (BlockHash.hash_value, sha256_cbor_64bit) are not reproduced.

// VLLMDefaultNoneHashSeed is the seed vLLM 0.33 derives NONE_HASH from
// when PYTHONHASHSEED is unset and the hash is sha256 or sha256_cbor
// (DEFAULT_NONE_HASH_SEED in vllm/v1/core/kv_cache_utils.py).
const VLLMDefaultNoneHashSeed = "vllm-none-hash"

// VLLMNoneHash returns vLLM's NONE_HASH under sha256_cbor for the given
// PYTHONHASHSEED value: SHA-256 of the seed string encoded as a CBOR text
// string. For "0" it is 4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e.
func VLLMNoneHash(pythonHashSeed string) []byte {
	b := appendCBORHead(make([]byte, 0, 9+len(pythonHashSeed)), cborText, uint64(len(pythonHashSeed)))
	b = append(b, pythonHashSeed...)
	s := sha256.Sum256(b)
	return s[:]
}

// VLLMBlockHash returns hash_block_tokens(sha256_cbor, parent, tokens,
// extraKeys): the hash of one full block whose parent block hash is parent
// (NONE_HASH for the first block: vLLM substitutes it for a missing
// parent, this function does not).
//
// extraKeys is nil for vLLM's None; otherwise the Go value whose CBOR
// encoding equals cbor2's canonical encoding of the Python tuple: a []any
// (or []string) for a tuple, string for str, []byte for bytes, Go integers
// for int. Use an empty, non-nil slice for an empty tuple: a nil slice
// encodes as null. It panics if extraKeys has no CBOR encoding (a channel,
// a func), which is a programmer error.
func VLLMBlockHash(parent []byte, tokens []uint32, extraKeys any) []byte {
	var stack [64 + 5*stackTokens]byte
	b := appendVLLMBlock(stack[:0], parent, tokens)
	if extraKeys == nil {
		b = append(b, cborNull)
	} else {
		x, err := vllmCBOR().Marshal(extraKeys)
		if err != nil {
			panic("namespace: VLLMBlockHash: extra keys have no CBOR encoding: " + err.Error())
		}
		b = append(b, x...)
	}
	s := sha256.Sum256(b)
	return s[:]
}

// VLLMBlockHashes returns the sha256_cbor block hash of every full block
// of tokens, blockSize tokens a block, without extra keys, chained from
// noneHash (VLLMNoneHash of the engine's PYTHONHASHSEED). A trailing
// partial block gets no hash. The hashes share one backing array. It
// panics if blockSize <= 0.
func VLLMBlockHashes(noneHash []byte, tokens []uint32, blockSize int) [][]byte {
	if blockSize <= 0 {
		panic("namespace: VLLMBlockHashes with blockSize <= 0")
	}
	blocks := len(tokens) / blockSize
	out := make([][]byte, blocks)
	sums := make([]byte, blocks*32)
	buf := make([]byte, 0, 16+len(noneHash)+5*blockSize)
	parent := noneHash
	for i := range blocks {
		buf = appendVLLMBlock(buf[:0], parent, tokens[i*blockSize:(i+1)*blockSize])
		buf = append(buf, cborNull)
		s := sha256.Sum256(buf)
		h := sums[i*32 : (i+1)*32 : (i+1)*32]
		copy(h, s[:])
		out[i] = h
		parent = h
	}
	return out
}

// CBOR major types and simple values used by the hand-rolled encoder.
const (
	cborUint  = 0 << 5
	cborBytes = 2 << 5
	cborText  = 3 << 5
	cborArray = 4 << 5
	cborNull  = 0xf6
)

// appendVLLMBlock appends the first two items of the three-item array
// (parent, tokens, extra_keys); the caller appends the third. Encoding the
// common part by hand keeps block hashing free of per-block allocations; a
// test checks it against the CBOR library.
func appendVLLMBlock(b, parent []byte, tokens []uint32) []byte {
	b = append(b, cborArray|3)
	b = appendCBORHead(b, cborBytes, uint64(len(parent)))
	b = append(b, parent...)
	b = appendCBORHead(b, cborArray, uint64(len(tokens)))
	for _, t := range tokens {
		b = appendCBORHead(b, cborUint, uint64(t))
	}
	return b
}

// appendCBORHead appends the shortest head for major type m and argument n
// (RFC 8949 §3), as cbor2 always emits.
func appendCBORHead(b []byte, m byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

// vllmCBOR is the encoder for extra keys: RFC 7049 canonical CBOR
// (shortest integers, lengths and floats; map keys sorted length-first,
// then bytewise; definite lengths), which is what cbor2.dumps(...,
// canonical=True) emits for these types.
var vllmCBOR = sync.OnceValue(func() cbor.EncMode {
	em, err := cbor.CanonicalEncOptions().EncMode()
	if err != nil {
		panic("namespace: canonical CBOR options: " + err.Error())
	}
	return em
})
