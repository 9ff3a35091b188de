package namespace

import (
	"encoding/binary"
	"slices"

	"github.com/minio/sha256-simd"
)

// Native page keys (docs/design.md §3):
//
//	key_-1 = namespace ID
//	key_i  = SHA-256(key_{i-1} || LE-uint32(tokens of page i))
//
// Seeding the chain with the namespace ID means keys of different
// namespaces never alias, and chaining means a key names its whole token
// prefix, not just its page. Only full pages get keys.

// stackTokens is the page size up to which key hashing needs no heap
// buffer at all.
const stackTokens = 256

// NextKey returns the key of the page holding pageTokens whose parent key
// (or, for the first page, namespace ID converted to a Key) is prev. It
// hashes exactly the tokens given, however many: callers pass one full
// page.
func NextKey(prev Key, pageTokens []uint32) Key {
	var stack [KeySize + 4*stackTokens]byte
	buf := stack[:]
	if n := KeySize + 4*len(pageTokens); n > len(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:KeySize+4*len(pageTokens)]
	copy(buf, prev[:])
	putTokens(buf[KeySize:], pageTokens)
	return sha256.Sum256(buf)
}

// PageKeys returns one key per full page of tokens in the namespace id,
// pageTokens tokens a page. A trailing partial page gets no key. It panics
// if pageTokens <= 0.
func PageKeys(id ID, tokens []uint32, pageTokens int) []Key {
	return AppendPageKeys(nil, Key(id), tokens, pageTokens)
}

// AppendPageKeys continues a key chain: it appends to dst the keys of the
// full pages of tokens, the first of which has parent key prev (the
// namespace ID as a Key for a chain's first page), and returns the extended
// slice. A trailing partial page gets no key. It allocates nothing per
// page: at most one grow of dst and, for pages over 256 tokens, one
// scratch buffer. It panics if pageTokens <= 0.
//
// Where the CPU has the x86 SHA extensions and pages are a multiple of 4
// tokens, the whole chain is hashed in assembly (keys_shani_amd64.s); the
// keys are the same either way.
func AppendPageKeys(dst []Key, prev Key, tokens []uint32, pageTokens int) []Key {
	if pageTokens <= 0 {
		panic("namespace: AppendPageKeys with pageTokens <= 0")
	}
	pages := len(tokens) / pageTokens
	if pages == 0 {
		return dst
	}
	dst = slices.Grow(dst, pages)
	if pageTokens%4 == 0 && haveSHANI {
		return appendChainSHANI(dst, prev, tokens, pageTokens, pages)
	}
	return appendPageKeysGeneric(dst, prev, tokens, pageTokens, pages)
}

// appendPageKeysGeneric is AppendPageKeys one sha256.Sum256 a page, for
// any page size and CPU: it appends the keys of the first pages pages of
// tokens.
func appendPageKeysGeneric(dst []Key, prev Key, tokens []uint32, pageTokens, pages int) []Key {
	var stack [KeySize + 4*stackTokens]byte
	buf := stack[:]
	if n := KeySize + 4*pageTokens; n > len(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:KeySize+4*pageTokens]
	copy(buf, prev[:])
	for p := range pages {
		putTokens(buf[KeySize:], tokens[p*pageTokens:(p+1)*pageTokens])
		k := Key(sha256.Sum256(buf))
		dst = append(dst, k)
		copy(buf, k[:])
	}
	return dst
}

// putTokens writes tokens little-endian into b, which holds 4*len(tokens)
// bytes.
func putTokens(b []byte, tokens []uint32) {
	b = b[:4*len(tokens)]
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[4*i:], t)
	}
}

// engineKeyDomain separates keys derived from engine hashes from native
// keys: a native hash input starts with a namespace ID or a key (SHA-256
// outputs), this one with a fixed ASCII label, so the two kinds of key
// cannot collide even when they share a namespace.
const engineKeyDomain = "strata/engine-hash/v1\x00"

// KeyFromEngineHash scopes a hash an engine computed itself (an SGLang page
// hash, a vLLM block hash) to a namespace:
//
//	SHA-256("strata/engine-hash/v1" || 0x00 || namespace ID || engineHash)
//
// engineHash is the raw digest: bytes.fromhex(hash) for SGLang's hex
// strings, the BlockHash bytes as they are for vLLM. Engine hashes chain
// on their own, so the result names the same prefix the engine hash does.
func KeyFromEngineHash(id ID, engineHash []byte) Key {
	var stack [len(engineKeyDomain) + IDSize + 64]byte
	buf := append(append(append(stack[:0], engineKeyDomain...), id[:]...), engineHash...)
	return sha256.Sum256(buf)
}
