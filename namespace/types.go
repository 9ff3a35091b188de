package namespace

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/minio/sha256-simd"

	"github.com/stratakv/strata/internal/crc32c"
)

// IDSize and KeySize are the byte lengths of namespace IDs and page keys.
const (
	IDSize  = 32
	KeySize = 32
)

// ID identifies a namespace: SHA-256 of the descriptor's canonical encoding.
type ID [IDSize]byte

// String returns the ID in lower-case hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short returns the first 12 hex digits, for tables.
func (id ID) Short() string { return id.String()[:12] }

// IDFromBytes converts a wire ID, checking its length.
func IDFromBytes(b []byte) (ID, error) { return fromBytes[ID](b, "namespace id", ErrBadID) }

// ParseID parses a 64-digit hex namespace ID.
func ParseID(s string) (ID, error) { return parseHex[ID](s, "namespace id", ErrBadID) }

// Key names a page inside its namespace.
type Key [KeySize]byte

// String returns the key in lower-case hex.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// KeyFromBytes converts a wire key, checking its length.
func KeyFromBytes(b []byte) (Key, error) { return fromBytes[Key](b, "page key", ErrBadKey) }

// ParseKey parses a 64-digit hex page key.
func ParseKey(s string) (Key, error) { return parseHex[Key](s, "page key", ErrBadKey) }

// fromBytes converts b to an ID or a Key (what names it in the error),
// checking its length; errors wrap bad.
func fromBytes[T ~[32]byte](b []byte, what string, bad error) (T, error) {
	var v T
	if len(b) != len(v) {
		return v, fmt.Errorf("%s is %d bytes, want %d: %w", what, len(b), len(v), bad)
	}
	copy(v[:], b)
	return v, nil
}

// parseHex parses an ID or a Key in hex (what names it in the error);
// errors wrap bad.
func parseHex[T ~[32]byte](s, what string, bad error) (T, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("parsing %s %q: %w", what, s, bad)
	}
	return fromBytes[T](b, what, bad)
}

// Checksum names the algorithm that guards a namespace's pages.
type Checksum uint8

// Checksum algorithms.
const (
	CRC32C Checksum = iota + 1 // default: 4 bytes, big-endian
	SHA256                     // 32 bytes

	// UnknownChecksum stands for a wire checksum value this build does not
	// know (proto/pbconv maps one to it); Validate rejects it.
	UnknownChecksum Checksum = 0xff
)

// checksumNames are the checksum names used in descriptors and tables.
var checksumNames = [...]string{CRC32C: "crc32c", SHA256: "sha256"}

// String returns the name used in descriptors and tables.
func (c Checksum) String() string { return enumName(checksumNames[:], c) }

// enumName is v's name in names (indexed by value), or "unknown".
func enumName[T ~uint8](names []string, v T) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return "unknown"
}

// parseEnum is the value named s in names (indexed by value); the error
// for any other s lists the names and wraps ErrInvalid.
func parseEnum[T ~uint8](names []string, what, s string) (T, error) {
	var known []string
	for v, name := range names {
		if name == "" {
			continue
		}
		if name == s {
			return T(v), nil
		}
		known = append(known, name)
	}
	return 0, fmt.Errorf("%s %q: want %s: %w", what, s, strings.Join(known, " or "), ErrInvalid)
}

// Size is the byte length of a checksum of this algorithm.
func (c Checksum) Size() int {
	if c == SHA256 {
		return 32
	}
	return 4
}

// Sum returns the checksum of p under this algorithm: CRC-32C as 4 bytes
// big-endian, or SHA-256. An unset algorithm means CRC-32C.
func (c Checksum) Sum(p []byte) []byte {
	if c == SHA256 {
		s := sha256.Sum256(p)
		return s[:]
	}
	return binary.BigEndian.AppendUint32(make([]byte, 0, 4), crc32c.Checksum(p))
}
