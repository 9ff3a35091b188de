package namespace

import (
	"bytes"
	stdsha256 "crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

func TestParseChecksum(t *testing.T) {
	for _, s := range []string{"crc32c", "sha256"} {
		c, err := ParseChecksum(s)
		if err != nil || c.String() != s {
			t.Errorf("ParseChecksum(%q) = %v, %v", s, c, err)
		}
	}
	if _, err := ParseChecksum("CRC32C"); !errors.Is(err, ErrInvalid) {
		t.Error("ParseChecksum accepts a non-canonical name")
	}
	d := Descriptor{Tenant: "t", Model: "m", PageTokens: 1, PageBytes: 1, Checksum: UnknownChecksum}
	if err := d.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown checksum validates: %v", err)
	}
}

func TestChecksumOf(t *testing.T) {
	check := []byte("123456789")
	// CRC-32C check value (RFC 3720 / iSCSI): 0xE3069283, big-endian.
	for _, c := range []Checksum{0, CRC32C} {
		if got := (Descriptor{Checksum: c}).ChecksumOf(check); hex.EncodeToString(got) != "e3069283" {
			t.Errorf("checksum %d: ChecksumOf = %x, want e3069283", c, got)
		}
	}
	want := stdsha256.Sum256(check)
	if got := (Descriptor{Checksum: SHA256}).ChecksumOf(check); !bytes.Equal(got, want[:]) {
		t.Errorf("sha256: ChecksumOf = %x", got)
	}
	if got := (Descriptor{Checksum: 9}).ChecksumOf(check); got != nil {
		t.Errorf("unknown algorithm: ChecksumOf = %x, want nil", got)
	}
	for _, c := range []Checksum{CRC32C, SHA256} {
		if got := len((Descriptor{Checksum: c}).ChecksumOf(nil)); got != c.Size() {
			t.Errorf("%v: %d bytes, Size says %d", c, got, c.Size())
		}
	}
}
