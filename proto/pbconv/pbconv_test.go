package pbconv

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/stratakv/strata/namespace"
	stratav1 "github.com/stratakv/strata/proto/strata/v1"
)

func TestProtoRoundTrip(t *testing.T) {
	for name, d := range descriptors() {
		p := DescriptorProto(d)
		// Through the wire and back.
		b, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q stratav1.Descriptor
		if err := proto.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		got := Descriptor(&q)
		if !reflect.DeepEqual(got, d) {
			t.Errorf("%s: Descriptor(Proto()) =\n%+v\nwant\n%+v", name, got, d)
		}
		if got.ID() != d.ID() {
			t.Errorf("%s: ID changed across the wire", name)
		}
	}
	if got := Descriptor(nil); !reflect.DeepEqual(got, namespace.Descriptor{}) {
		t.Errorf("Descriptor(nil) = %+v", got)
	}
	// The result does not alias the message.
	p := &stratav1.Descriptor{Extra: map[string]string{"k": "v"}}
	d := Descriptor(p)
	d.Extra["k"] = "changed"
	if p.Extra["k"] != "v" {
		t.Error("FromProto aliases the message's extra map")
	}
}

func TestChecksumEnum(t *testing.T) {
	for c, a := range map[namespace.Checksum]stratav1.ChecksumAlgorithm{
		0:                stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_UNSPECIFIED,
		namespace.CRC32C: stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_CRC32C,
		namespace.SHA256: stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_SHA256,
	} {
		if ChecksumProto(c) != a || Checksum(a) != c {
			t.Errorf("checksum %d <-> %v do not map onto each other", c, a)
		}
		// Some callers convert the wire enum numerically.
		if namespace.Checksum(a) != c {
			t.Errorf("wire value %d is not Checksum %d", a, c)
		}
	}
	d := Descriptor(&stratav1.Descriptor{Tenant: "t", Model: "m", PageTokens: 1, PageBytes: 1, Checksum: 9})
	if err := d.Validate(); !errors.Is(err, namespace.ErrInvalid) {
		t.Errorf("unknown wire checksum validates: %v", err)
	}
}

func TestKeyFormatEnum(t *testing.T) {
	for f, w := range map[namespace.KeyFormat]stratav1.KeyFormat{
		0:                   stratav1.KeyFormat_KEY_FORMAT_UNSPECIFIED,
		namespace.KeyChain:  stratav1.KeyFormat_KEY_FORMAT_SHA256_CHAIN,
		namespace.KeyBlocks: stratav1.KeyFormat_KEY_FORMAT_SHA256_BLOCKS,
	} {
		if KeyFormatProto(f) != w || KeyFormat(w) != f {
			t.Errorf("key format %d <-> %v do not map onto each other", f, w)
		}
	}
	d := Descriptor(&stratav1.Descriptor{Tenant: "t", Model: "m", PageTokens: 16, PageBytes: 1, KeyFormat: 7})
	if err := d.Validate(); !errors.Is(err, namespace.ErrInvalid) || d.KeyFormat != namespace.UnknownKeyFormat {
		t.Errorf("unknown wire key format validates: %v", err)
	}
}

// descriptors are wire round-trip cases: every field set, MLA, an opaque
// layout, odd strings, and the zero descriptor.
func descriptors() map[string]namespace.Descriptor {
	llama := namespace.Descriptor{Tenant: "acme", Model: "meta-llama/Llama-3.1-8B", ModelRevision: "0e9e39f",
		Adapter: "lora", AdapterRevision: "r1", TokenizerRevision: "t1", Engine: "vllm", KVFormatVersion: 2,
		DType: "bf16", KVDType: "fp8_e4m3", Layout: "NHD", PageTokens: 16, NumLayers: 32, NumKVHeads: 8,
		HeadDim: 128, TPSize: 8, TPRank: 3, PPSize: 2, PPRank: 1, CPSize: 2, CPRank: 1, Quantization: "fp8",
		PageFormat: "kv:L16.S2.T8.H1.D128:fp8_e4m3", Checksum: namespace.SHA256, KeyFormat: namespace.KeyBlocks,
		Extra:   map[string]string{"ctl": "a\x01b", "ünï": "日本語 😀"},
		Compute: namespace.ComputeProfile{Params: 8e9, AttentionHeads: 32, AttentionHeadDim: 128}}
	return map[string]namespace.Descriptor{
		"every field": llama,
		"mla":         {Tenant: "t", Model: "deepseek-ai/DeepSeek-V3", DType: "bf16", PageTokens: 64, NumLayers: 61, MLALatentDim: 576},
		"opaque":      {Tenant: "t", Model: "m", PageTokens: 256, DType: "nvfp4", PageBytes: 1 << 20},
		"zero":        {},
	}
}
