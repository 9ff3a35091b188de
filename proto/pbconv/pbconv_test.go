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

func TestEnums(t *testing.T) {
	checkEnum(t, ChecksumProto, Checksum, 9, namespace.UnknownChecksum, map[namespace.Checksum]stratav1.ChecksumAlgorithm{
		0:                stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_UNSPECIFIED,
		namespace.CRC32C: stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_CRC32C,
		namespace.SHA256: stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_SHA256,
	})
	checkEnum(t, KeyFormatProto, KeyFormat, 7, namespace.UnknownKeyFormat, map[namespace.KeyFormat]stratav1.KeyFormat{
		0:                   stratav1.KeyFormat_KEY_FORMAT_UNSPECIFIED,
		namespace.KeyChain:  stratav1.KeyFormat_KEY_FORMAT_SHA256_CHAIN,
		namespace.KeyBlocks: stratav1.KeyFormat_KEY_FORMAT_SHA256_BLOCKS,
	})
	// A descriptor with a wire value this build does not know is invalid.
	for name, p := range map[string]*stratav1.Descriptor{
		"checksum":   {Tenant: "t", Model: "m", PageTokens: 1, PageBytes: 1, Checksum: 9},
		"key format": {Tenant: "t", Model: "m", PageTokens: 16, PageBytes: 1, KeyFormat: 7},
	} {
		if err := Descriptor(p).Validate(); !errors.Is(err, namespace.ErrInvalid) {
			t.Errorf("unknown wire %s validates: %v", name, err)
		}
	}
}

// checkEnum checks that toWire and fromWire map each pair onto each other,
// that each wire value is its core value's number (some callers convert the
// wire enum numerically), and that fromWire maps the wire value unknownWire,
// which this build does not know, to unknown.
func checkEnum[C ~uint8, W ~int32](t *testing.T, toWire func(C) W, fromWire func(W) C, unknownWire W, unknown C, pairs map[C]W) {
	t.Helper()
	for c, w := range pairs {
		if toWire(c) != w || fromWire(w) != c {
			t.Errorf("%T %d <-> %v do not map onto each other", c, c, w)
		}
		if C(w) != c {
			t.Errorf("wire value %d is not %T %d", w, c, c)
		}
	}
	if got := fromWire(unknownWire); got != unknown {
		t.Errorf("unknown wire %T %d maps to %d, want %d", unknownWire, unknownWire, got, unknown)
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
