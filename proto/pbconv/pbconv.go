// Package pbconv converts between strata's core types and their gRPC wire
// messages, so that namespace (and everything below it: store, eviction)
// never links the gRPC packages.
package pbconv

import (
	"maps"

	"github.com/stratakv/strata/namespace"
	stratav1 "github.com/stratakv/strata/proto/strata/v1"
)

// Descriptor converts a wire descriptor. It copies every field as is (no
// normalization); a nil message gives the zero Descriptor. An unknown
// checksum enum value becomes an algorithm that Validate rejects.
func Descriptor(p *stratav1.Descriptor) namespace.Descriptor {
	if p == nil {
		return namespace.Descriptor{}
	}
	d := namespace.Descriptor{
		Tenant:            p.GetTenant(),
		Model:             p.GetModel(),
		ModelRevision:     p.GetModelRevision(),
		Adapter:           p.GetAdapter(),
		AdapterRevision:   p.GetAdapterRevision(),
		TokenizerRevision: p.GetTokenizerRevision(),
		Engine:            p.GetEngine(),
		KVFormatVersion:   p.GetKvFormatVersion(),
		DType:             p.GetDtype(),
		KVDType:           p.GetKvDtype(),
		Layout:            p.GetLayout(),
		PageTokens:        p.GetPageTokens(),
		NumLayers:         p.GetNumLayers(),
		NumKVHeads:        p.GetNumKvHeads(),
		HeadDim:           p.GetHeadDim(),
		MLALatentDim:      p.GetMlaLatentDim(),
		TPSize:            p.GetTpSize(),
		TPRank:            p.GetTpRank(),
		PPSize:            p.GetPpSize(),
		PPRank:            p.GetPpRank(),
		CPSize:            p.GetCpSize(),
		CPRank:            p.GetCpRank(),
		Quantization:      p.GetQuantization(),
		PageBytes:         p.GetPageBytes(),
		PageFormat:        p.GetPageFormat(),
		Checksum:          Checksum(p.GetChecksum()),
		KeyFormat:         KeyFormat(p.GetKeyFormat()),
	}
	if len(p.GetExtra()) > 0 {
		d.Extra = maps.Clone(p.GetExtra())
	}
	if c := p.GetCompute(); c != nil {
		d.Compute = namespace.ComputeProfile{
			Params:           c.GetParams(),
			AttentionHeads:   c.GetAttentionHeads(),
			AttentionHeadDim: c.GetAttentionHeadDim(),
		}
	}
	return d
}

// DescriptorProto converts d to its wire form, field for field (no normalization).
// Compute is always set.
func DescriptorProto(d namespace.Descriptor) *stratav1.Descriptor {
	p := &stratav1.Descriptor{
		Tenant:            d.Tenant,
		Model:             d.Model,
		ModelRevision:     d.ModelRevision,
		Adapter:           d.Adapter,
		AdapterRevision:   d.AdapterRevision,
		TokenizerRevision: d.TokenizerRevision,
		Engine:            d.Engine,
		KvFormatVersion:   d.KVFormatVersion,
		Dtype:             d.DType,
		KvDtype:           d.KVDType,
		Layout:            d.Layout,
		PageTokens:        d.PageTokens,
		NumLayers:         d.NumLayers,
		NumKvHeads:        d.NumKVHeads,
		HeadDim:           d.HeadDim,
		MlaLatentDim:      d.MLALatentDim,
		TpSize:            d.TPSize,
		TpRank:            d.TPRank,
		PpSize:            d.PPSize,
		PpRank:            d.PPRank,
		CpSize:            d.CPSize,
		CpRank:            d.CPRank,
		Quantization:      d.Quantization,
		PageBytes:         d.PageBytes,
		PageFormat:        d.PageFormat,
		Checksum:          ChecksumProto(d.Checksum),
		KeyFormat:         KeyFormatProto(d.KeyFormat),
		Compute: &stratav1.ComputeProfile{
			Params:           d.Compute.Params,
			AttentionHeads:   d.Compute.AttentionHeads,
			AttentionHeadDim: d.Compute.AttentionHeadDim,
		},
	}
	if len(d.Extra) > 0 {
		p.Extra = maps.Clone(d.Extra)
	}
	return p
}

// enumPair is one value of a core enum and the wire enum that carries it.
type enumPair[C, W comparable] struct {
	core C
	wire W
}

// checksums pairs each checksum algorithm with its wire enum; 0 is
// UNSPECIFIED on both sides.
func checksums() []enumPair[namespace.Checksum, stratav1.ChecksumAlgorithm] {
	return []enumPair[namespace.Checksum, stratav1.ChecksumAlgorithm]{
		{0, stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_UNSPECIFIED},
		{namespace.CRC32C, stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_CRC32C},
		{namespace.SHA256, stratav1.ChecksumAlgorithm_CHECKSUM_ALGORITHM_SHA256},
	}
}

// keyFormats pairs each key format with its wire enum; 0 is UNSPECIFIED on
// both sides.
func keyFormats() []enumPair[namespace.KeyFormat, stratav1.KeyFormat] {
	return []enumPair[namespace.KeyFormat, stratav1.KeyFormat]{
		{0, stratav1.KeyFormat_KEY_FORMAT_UNSPECIFIED},
		{namespace.KeyChain, stratav1.KeyFormat_KEY_FORMAT_SHA256_CHAIN},
		{namespace.KeyBlocks, stratav1.KeyFormat_KEY_FORMAT_SHA256_BLOCKS},
	}
}

// wireEnum returns the wire value paired with c, or c's number where pairs
// has no such value.
func wireEnum[C ~uint8, W ~int32](c C, pairs []enumPair[C, W]) W {
	for _, p := range pairs {
		if p.core == c {
			return p.wire
		}
	}
	return W(c)
}

// coreEnum returns the core value paired with w, or unknown where pairs has
// no such value.
func coreEnum[C, W comparable](w W, pairs []enumPair[C, W], unknown C) C {
	for _, p := range pairs {
		if p.wire == w {
			return p.core
		}
	}
	return unknown
}

// ChecksumProto returns the wire enum of c: 0 stays UNSPECIFIED (which means
// CRC32C on the wire too).
func ChecksumProto(c namespace.Checksum) stratav1.ChecksumAlgorithm {
	return wireEnum(c, checksums())
}

// Checksum maps the wire enum: UNSPECIFIED is 0 (CRC32C once
// normalized); a value this build does not know becomes an algorithm that
// Validate rejects and Checksum.String calls "unknown".
func Checksum(a stratav1.ChecksumAlgorithm) namespace.Checksum {
	return coreEnum(a, checksums(), namespace.UnknownChecksum)
}

// KeyFormatProto returns the wire enum of f: 0 stays UNSPECIFIED (which
// means SHA256_CHAIN on the wire too).
func KeyFormatProto(f namespace.KeyFormat) stratav1.KeyFormat {
	return wireEnum(f, keyFormats())
}

// KeyFormat maps the wire enum: UNSPECIFIED is 0 (sha256-chain once
// normalized); a value this build does not know becomes a format that
// Validate rejects, so a node never serves keys it cannot compute the way
// the client does.
func KeyFormat(f stratav1.KeyFormat) namespace.KeyFormat {
	return coreEnum(f, keyFormats(), namespace.UnknownKeyFormat)
}
