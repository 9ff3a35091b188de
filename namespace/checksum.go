package namespace

import "github.com/minio/sha256-simd"

// ParseChecksum parses a checksum name as used in descriptors: "crc32c" or
// "sha256". Errors wrap ErrInvalid.
func ParseChecksum(s string) (Checksum, error) {
	return parseEnum[Checksum](checksumNames[:], "checksum", s)
}

// ChecksumOf returns the checksum of page bytes p under d.Checksum (0 means
// CRC32C): CRC-32C as 4 bytes big-endian, or the 32-byte SHA-256 digest.
// It returns nil for an unknown algorithm, which Validate rejects.
func (d Descriptor) ChecksumOf(p []byte) []byte {
	c := d.Checksum
	if c == 0 {
		c = CRC32C
	}
	if c != CRC32C && c != SHA256 {
		return nil
	}
	return c.Sum(p)
}

// sum256 is SHA-256 through sha256-simd (SHA-NI / ARMv8 SHA2 where
// present).
func sum256(p []byte) [32]byte { return sha256.Sum256(p) }
