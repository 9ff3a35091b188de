package namespace

import (
	"bytes"
	stdsha256 "crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	stratav1 "github.com/stratakv/strata/proto/strata/v1"
)

func TestProtoRoundTrip(t *testing.T) {
	for name, d := range testDescriptors() {
		p := d.Proto()
		// Through the wire and back.
		b, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q stratav1.Descriptor
		if err := proto.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		got := FromProto(&q)
		if !reflect.DeepEqual(got, d) {
			t.Errorf("%s: FromProto(Proto()) =\n%+v\nwant\n%+v", name, got, d)
		}
		if got.ID() != d.ID() {
			t.Errorf("%s: ID changed across the wire", name)
		}
	}
	if got := FromProto(nil); !reflect.DeepEqual(got, Descriptor{}) {
		t.Errorf("FromProto(nil) = %+v", got)
	}
	// The result does not alias the message.
	p := &stratav1.Descriptor{Extra: map[string]string{"k": "v"}}
	d := FromProto(p)
	d.Extra["k"] = "changed"
	if p.Extra["k"] != "v" {
		t.Error("FromProto aliases the message's extra map")
	}
}

func TestChecksumEnum(t *testing.T) {
	for c, a := range map[Checksum]stratav1.ChecksumAlgorithm{
		0:      stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_UNSPECIFIED,
		CRC32C: stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_CRC32C,
		SHA256: stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_SHA256,
	} {
		if c.Proto() != a || ChecksumFromProto(a) != c {
			t.Errorf("checksum %d <-> %v do not map onto each other", c, a)
		}
		// Some callers convert the wire enum numerically.
		if Checksum(a) != c {
			t.Errorf("wire value %d is not Checksum %d", a, c)
		}
	}
	d := FromProto(&stratav1.Descriptor{Tenant: "t", Model: "m", PageTokens: 1, PageBytes: 1, Checksum: 9})
	if err := d.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown wire checksum validates: %v", err)
	}
	for _, s := range []string{"crc32c", "sha256"} {
		c, err := ParseChecksum(s)
		if err != nil || c.String() != s {
			t.Errorf("ParseChecksum(%q) = %v, %v", s, c, err)
		}
	}
	if _, err := ParseChecksum("CRC32C"); !errors.Is(err, ErrInvalid) {
		t.Error("ParseChecksum accepts a non-canonical name")
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
