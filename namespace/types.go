package namespace

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"

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
func IDFromBytes(b []byte) (ID, error) {
	var id ID
	if len(b) != IDSize {
		return id, fmt.Errorf("namespace id is %d bytes, want %d: %w", len(b), IDSize, ErrBadID)
	}
	copy(id[:], b)
	return id, nil
}

// ParseID parses a 64-digit hex namespace ID.
func ParseID(s string) (ID, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return ID{}, fmt.Errorf("parsing namespace id %q: %w", s, ErrBadID)
	}
	return IDFromBytes(b)
}

// Key names a page inside its namespace.
type Key [KeySize]byte

// String returns the key in lower-case hex.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// KeyFromBytes converts a wire key, checking its length.
func KeyFromBytes(b []byte) (Key, error) {
	var k Key
	if len(b) != KeySize {
		return k, fmt.Errorf("page key is %d bytes, want %d: %w", len(b), KeySize, ErrBadKey)
	}
	copy(k[:], b)
	return k, nil
}

// ParseKey parses a 64-digit hex page key.
func ParseKey(s string) (Key, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return Key{}, fmt.Errorf("parsing page key %q: %w", s, ErrBadKey)
	}
	return KeyFromBytes(b)
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

// String returns the name used in descriptors and tables.
func (c Checksum) String() string {
	switch c {
	case CRC32C:
		return "crc32c"
	case SHA256:
		return "sha256"
	}
	return "unknown"
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
