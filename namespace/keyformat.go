package namespace

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"fmt"
	"slices"
)

// KeyFormat names how a namespace chains its native page keys: descriptor
// field "key_format", fixed when the namespace is created, so that every
// engine sharing the namespace computes the same keys.
//
//   - KeyChain, "sha256-chain" (the default, and every namespace's format
//     before key_format existed):
//     key_i = SHA-256(key_{i-1} || LE-uint32 tokens of page i).
//   - KeyBlocks, "sha256-blocks": key_i is the SHA-256 compression function
//     (FIPS 180-4 §6.2.2) run over the LE-uint32 tokens of page i, 64 bytes
//     a block, from the hash value key_{i-1} (its bytes as 8 big-endian
//     words) instead of the standard initial value, with no padding and no
//     length block; the key is the resulting hash value, big-endian. A
//     page must be a whole number of blocks, so page_tokens is a multiple
//     of 16.
//
// Both seed the chain with the namespace ID (key_-1) and name a whole
// token prefix. sha256-blocks is the Merkle-Damgård chain SHA-256 itself
// runs, stopped at page boundaries: it hashes 4 bytes a token and nothing
// else, where sha256-chain hashes the parent key and the padding again on
// every page (two blocks for 64 bytes of tokens at 16 tokens a page). Every
// page of a namespace has the same length, so leaving out SHA-256's length
// padding lets no two token sequences of whole pages share a chain
// unless the compression function collides.
type KeyFormat uint8

// Key formats.
const (
	KeyChain  KeyFormat = iota + 1 // default: SHA-256 of parent key and tokens
	KeyBlocks                      // SHA-256 compression over the tokens from the parent key

	// UnknownKeyFormat stands for a wire key format this build does not
	// know (proto/pbconv maps one to it); Validate rejects it.
	UnknownKeyFormat KeyFormat = 0xff
)

// keyBlockTokens is how many tokens fill one SHA-256 block in the
// sha256-blocks format: a page holds a multiple of it.
const keyBlockTokens = 16

// keyFormatNames are the key format names used in descriptors and tables.
var keyFormatNames = [...]string{KeyChain: "sha256-chain", KeyBlocks: "sha256-blocks"}

// String returns the name used in descriptors and tables.
func (f KeyFormat) String() string { return enumName(keyFormatNames[:], f) }

// ParseKeyFormat parses a key format name as used in descriptors:
// "sha256-chain" or "sha256-blocks". Errors wrap ErrInvalid.
func ParseKeyFormat(s string) (KeyFormat, error) {
	return parseEnum[KeyFormat](keyFormatNames[:], "key format", s)
}

// PageKeys returns one key per full page of tokens in the namespace with
// ID id and descriptor d, whose KeyFormat decides the chain (0 means
// KeyChain). A trailing partial page gets no key. It panics where
// d.Validate would fail on PageTokens or KeyFormat.
func (d Descriptor) PageKeys(id ID, tokens []uint32) []Key {
	return d.KeyFormat.AppendPageKeys(nil, Key(id), tokens, int(d.PageTokens))
}

// AppendPageKeys continues a key chain of format f (0 means KeyChain): it
// appends to dst the keys of the full pages of tokens, the first of which
// has parent key prev (the namespace ID as a Key for a chain's first page),
// and returns the extended slice. A trailing partial page gets no key. It
// panics if pageTokens <= 0, if f is KeyBlocks and pageTokens is not a
// multiple of 16, or if f is unknown.
//
// Where the CPU has the x86 SHA extensions, sha256-blocks chains are
// hashed in assembly (keys_shani_amd64.s); the keys are the same either
// way.
func (f KeyFormat) AppendPageKeys(dst []Key, prev Key, tokens []uint32, pageTokens int) []Key {
	switch f {
	case 0, KeyChain:
		return AppendPageKeys(dst, prev, tokens, pageTokens)
	case KeyBlocks:
	default:
		panic(fmt.Sprintf("namespace: AppendPageKeys with unknown key format %d", f))
	}
	if pageTokens <= 0 || pageTokens%keyBlockTokens != 0 {
		panic(fmt.Sprintf("namespace: sha256-blocks keys need pages of a positive multiple of %d tokens, not %d", keyBlockTokens, pageTokens))
	}
	pages := len(tokens) / pageTokens
	if pages == 0 {
		return dst
	}
	dst = slices.Grow(dst, pages)
	if haveSHANI {
		return appendBlockKeysSHANI(dst, prev, tokens, pageTokens, pages)
	}
	return appendBlockKeysGeneric(dst, prev, tokens, pageTokens, pages)
}

// The standard library's SHA-256 marshals its state (and takes it back) as
// "sha\x03", the 8 hash-value words big-endian, the 64-byte block buffer
// and the message length, big-endian: appendBlockKeysGeneric sets the hash
// value to the first page's parent key there, with an empty buffer and a
// length that is a whole number of blocks. Each page's Write is then whole
// blocks, which the compression function takes from the hash value the
// page before left, and that value is the page's key.
const (
	shaStateMagic = "sha\x03"
	shaStateSize  = len(shaStateMagic) + KeySize + 64 + 8
)

// appendBlockKeysGeneric is the sha256-blocks chain on any CPU, through the
// standard library's SHA-256 (which uses the CPU's SHA instructions where
// it has them): it appends the keys of the first pages pages of tokens.
func appendBlockKeysGeneric(dst []Key, prev Key, tokens []uint32, pageTokens, pages int) []Key {
	h := sha256.New()
	var state [shaStateSize]byte
	copy(state[:], shaStateMagic)
	copy(state[len(shaStateMagic):], prev[:])
	binary.BigEndian.PutUint64(state[shaStateSize-8:], 64)
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state[:]); err != nil {
		panic("namespace: crypto/sha256 rejects its own state encoding: " + err.Error())
	}
	get := h.(encoding.BinaryAppender)

	var stack [4 * stackTokens]byte
	buf := stack[:]
	if n := 4 * pageTokens; n > len(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:4*pageTokens]
	for p := range pages {
		putTokens(buf, tokens[p*pageTokens:(p+1)*pageTokens])
		h.Write(buf)
		s, err := get.AppendBinary(state[:0])
		if err != nil || len(s) != shaStateSize {
			panic("namespace: crypto/sha256 state encoding changed")
		}
		dst = append(dst, Key(s[len(shaStateMagic):len(shaStateMagic)+KeySize]))
	}
	return dst
}
