package namespace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// The canonical encoding of a descriptor is canonical JSON; README.md
// documents it byte for byte. In short: one object holding every field of
// the normalized descriptor, zero values included, keys sorted, no
// whitespace, integers as decimal numbers, strings escaped as Python's
// json.dumps(..., ensure_ascii=False) escapes them, plus "v":1.
//
// Adding a field to Descriptor is a versioned decision: a field that
// appears in every encoding changes every namespace ID, and
// canonicalVersion must change with it. A field added later may instead
// be written only when it is not its default (key_format, absent for
// sha256-chain; page_format, absent when empty): every namespace that
// existed before keeps its ID and its encoding, and a build that does not
// know the field rejects an encoding that has it instead of misreading it.

// canonicalVersion is the value of the "v" field.
const canonicalVersion = 1

// MaxCanonicalLen is the largest input Decode accepts. A descriptor that
// passes Validate encodes to far fewer bytes.
const MaxCanonicalLen = 1 << 20

// canonicalField is one top-level field of the canonical encoding.
type canonicalField struct {
	name        string
	appendValue func(dst []byte, d *Descriptor) []byte
	// omit, when set, says the normalized d leaves the field out: it has
	// its default value.
	omit func(d *Descriptor) bool
}

// canonicalFields lists the fields in canonical (sorted) order. A test pins
// the order and checks that every Descriptor field appears.
var canonicalFields = [...]canonicalField{
	strField("adapter", func(d *Descriptor) string { return d.Adapter }),
	strField("adapter_revision", func(d *Descriptor) string { return d.AdapterRevision }),
	strField("checksum", func(d *Descriptor) string { return d.Checksum.String() }),
	{name: "compute", appendValue: appendCompute},
	uintField("cp_rank", func(d *Descriptor) uint64 { return uint64(d.CPRank) }),
	uintField("cp_size", func(d *Descriptor) uint64 { return uint64(d.CPSize) }),
	strField("dtype", func(d *Descriptor) string { return d.DType }),
	strField("engine", func(d *Descriptor) string { return d.Engine }),
	{name: "extra", appendValue: appendExtra},
	uintField("head_dim", func(d *Descriptor) uint64 { return uint64(d.HeadDim) }),
	{
		name:        "key_format",
		appendValue: func(b []byte, d *Descriptor) []byte { return appendJSONString(b, d.KeyFormat.String()) },
		omit:        func(d *Descriptor) bool { return d.KeyFormat == KeyChain },
	},
	strField("kv_dtype", func(d *Descriptor) string { return d.KVDType }),
	uintField("kv_format_version", func(d *Descriptor) uint64 { return uint64(d.KVFormatVersion) }),
	strField("layout", func(d *Descriptor) string { return d.Layout }),
	uintField("mla_latent_dim", func(d *Descriptor) uint64 { return uint64(d.MLALatentDim) }),
	strField("model", func(d *Descriptor) string { return d.Model }),
	strField("model_revision", func(d *Descriptor) string { return d.ModelRevision }),
	uintField("num_kv_heads", func(d *Descriptor) uint64 { return uint64(d.NumKVHeads) }),
	uintField("num_layers", func(d *Descriptor) uint64 { return uint64(d.NumLayers) }),
	uintField("page_bytes", func(d *Descriptor) uint64 { return d.PageBytes }),
	{
		name:        "page_format",
		appendValue: func(b []byte, d *Descriptor) []byte { return appendJSONString(b, d.PageFormat) },
		omit:        func(d *Descriptor) bool { return d.PageFormat == "" },
	},
	uintField("page_tokens", func(d *Descriptor) uint64 { return uint64(d.PageTokens) }),
	uintField("pp_rank", func(d *Descriptor) uint64 { return uint64(d.PPRank) }),
	uintField("pp_size", func(d *Descriptor) uint64 { return uint64(d.PPSize) }),
	strField("quantization", func(d *Descriptor) string { return d.Quantization }),
	strField("tenant", func(d *Descriptor) string { return d.Tenant }),
	strField("tokenizer_revision", func(d *Descriptor) string { return d.TokenizerRevision }),
	uintField("tp_rank", func(d *Descriptor) uint64 { return uint64(d.TPRank) }),
	uintField("tp_size", func(d *Descriptor) uint64 { return uint64(d.TPSize) }),
	uintField("v", func(*Descriptor) uint64 { return canonicalVersion }),
}

func strField(name string, get func(*Descriptor) string) canonicalField {
	return canonicalField{name: name, appendValue: func(b []byte, d *Descriptor) []byte { return appendJSONString(b, get(d)) }}
}

func uintField(name string, get func(*Descriptor) uint64) canonicalField {
	return canonicalField{name: name, appendValue: func(b []byte, d *Descriptor) []byte { return strconv.AppendUint(b, get(d), 10) }}
}

func appendCompute(b []byte, d *Descriptor) []byte {
	b = append(b, `{"attention_head_dim":`...)
	b = strconv.AppendUint(b, uint64(d.Compute.AttentionHeadDim), 10)
	b = append(b, `,"attention_heads":`...)
	b = strconv.AppendUint(b, uint64(d.Compute.AttentionHeads), 10)
	b = append(b, `,"params":`...)
	b = strconv.AppendUint(b, d.Compute.Params, 10)
	return append(b, '}')
}

func appendExtra(b []byte, d *Descriptor) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(d.Extra)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, d.Extra[k])
	}
	return append(b, '}')
}

// Canonical returns the canonical encoding of the normalized descriptor.
// Equal encodings mean the same namespace; ID is its SHA-256.
func (d Descriptor) Canonical() []byte {
	d.normalizeScalars()
	b := append(make([]byte, 0, 640), '{')
	b = appendMembers(b, &d, nil)
	return append(b, '}')
}

// appendMembers appends the members of d's canonical object, in canonical
// order and comma-separated, without the braces: those of the fields keep
// accepts, or of every field when keep is nil.
func appendMembers(b []byte, d *Descriptor, keep func(name string) bool) []byte {
	first := true
	for i := range canonicalFields {
		f := &canonicalFields[i]
		if (f.omit != nil && f.omit(d)) || (keep != nil && !keep(f.name)) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, f.name)
		b = append(b, ':')
		b = f.appendValue(b, d)
	}
	return b
}

// appendJSONString appends s as a JSON string, escaped exactly as Python's
// json.dumps(s, ensure_ascii=False) escapes it: '"' and '\' are
// backslash-escaped; \b \f \n \r \t use their short forms; the other bytes
// below 0x20 become \u00XX with lower-case hex digits; everything else,
// including DEL, '<', '>', '&', U+2028 and all non-ASCII text, is copied
// as is (UTF-8).
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// wireDescriptor is the shape Decode parses before it re-encodes.
type wireDescriptor struct {
	Adapter           string            `json:"adapter"`
	AdapterRevision   string            `json:"adapter_revision"`
	Checksum          string            `json:"checksum"`
	Compute           wireCompute       `json:"compute"`
	CPRank            uint32            `json:"cp_rank"`
	CPSize            uint32            `json:"cp_size"`
	DType             string            `json:"dtype"`
	Engine            string            `json:"engine"`
	Extra             map[string]string `json:"extra"`
	HeadDim           uint32            `json:"head_dim"`
	KeyFormat         *string           `json:"key_format"`
	KVDType           string            `json:"kv_dtype"`
	KVFormatVersion   uint32            `json:"kv_format_version"`
	Layout            string            `json:"layout"`
	MLALatentDim      uint32            `json:"mla_latent_dim"`
	Model             string            `json:"model"`
	ModelRevision     string            `json:"model_revision"`
	NumKVHeads        uint32            `json:"num_kv_heads"`
	NumLayers         uint32            `json:"num_layers"`
	PageBytes         uint64            `json:"page_bytes"`
	PageFormat        string            `json:"page_format"`
	PageTokens        uint32            `json:"page_tokens"`
	PPRank            uint32            `json:"pp_rank"`
	PPSize            uint32            `json:"pp_size"`
	Quantization      string            `json:"quantization"`
	Tenant            string            `json:"tenant"`
	TokenizerRevision string            `json:"tokenizer_revision"`
	TPRank            uint32            `json:"tp_rank"`
	TPSize            uint32            `json:"tp_size"`
	V                 uint32            `json:"v"`
}

type wireCompute struct {
	AttentionHeadDim uint32 `json:"attention_head_dim"`
	AttentionHeads   uint32 `json:"attention_heads"`
	Params           uint64 `json:"params"`
}

// Decode parses a canonical encoding. It is the strict inverse of
// Canonical: it accepts exactly the byte strings Canonical produces and
// rejects anything else, including unknown or missing fields, values of
// the wrong type, another encoding version, extra whitespace, another key
// order or escaping, and descriptors that are not normalized (for example
// "tp_size":0). Errors wrap ErrInvalid. Decode does not Validate: a
// descriptor that breaks a rule still has an encoding.
func Decode(canonical []byte) (Descriptor, error) {
	if len(canonical) > MaxCanonicalLen {
		return Descriptor{}, fmt.Errorf("decoding descriptor: %d bytes, at most %d allowed: %w", len(canonical), MaxCanonicalLen, ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	var w wireDescriptor
	if err := dec.Decode(&w); err != nil {
		return Descriptor{}, fmt.Errorf("decoding descriptor: %v: %w", err, ErrInvalid)
	}
	if w.V != canonicalVersion {
		return Descriptor{}, fmt.Errorf("decoding descriptor: encoding version %d, want %d: %w", w.V, canonicalVersion, ErrInvalid)
	}
	c, err := ParseChecksum(w.Checksum)
	if err != nil {
		return Descriptor{}, fmt.Errorf("decoding descriptor: %w", err)
	}
	kf := KeyChain
	if w.KeyFormat != nil {
		if kf, err = ParseKeyFormat(*w.KeyFormat); err != nil {
			return Descriptor{}, fmt.Errorf("decoding descriptor: %w", err)
		}
	}
	d := Descriptor{
		Tenant: w.Tenant, Model: w.Model, ModelRevision: w.ModelRevision,
		Adapter: w.Adapter, AdapterRevision: w.AdapterRevision,
		TokenizerRevision: w.TokenizerRevision, Engine: w.Engine,
		KVFormatVersion: w.KVFormatVersion,
		DType:           w.DType, KVDType: w.KVDType, Layout: w.Layout,
		PageTokens: w.PageTokens, NumLayers: w.NumLayers, NumKVHeads: w.NumKVHeads,
		HeadDim: w.HeadDim, MLALatentDim: w.MLALatentDim,
		TPSize: w.TPSize, TPRank: w.TPRank, PPSize: w.PPSize, PPRank: w.PPRank,
		CPSize: w.CPSize, CPRank: w.CPRank,
		Quantization: w.Quantization, Extra: w.Extra, PageBytes: w.PageBytes, PageFormat: w.PageFormat,
		Checksum: c, KeyFormat: kf,
		Compute: ComputeProfile{
			Params: w.Compute.Params, AttentionHeads: w.Compute.AttentionHeads,
			AttentionHeadDim: w.Compute.AttentionHeadDim,
		},
	}
	if len(d.Extra) == 0 {
		d.Extra = nil
	}
	if !bytes.Equal(d.Canonical(), canonical) {
		return Descriptor{}, fmt.Errorf("decoding descriptor: %s: %w", nonCanonicalReason(canonical), ErrInvalid)
	}
	return d, nil
}

// nonCanonicalReason explains why input that parsed is not canonical.
func nonCanonicalReason(in []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(in, &fields) == nil {
		var missing []string
		for i := range canonicalFields {
			if canonicalFields[i].omit != nil {
				continue
			}
			if _, ok := fields[canonicalFields[i].name]; !ok {
				missing = append(missing, canonicalFields[i].name)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("missing fields %q", missing)
		}
	}
	return "not in canonical form (re-encoding differs: key order or case, whitespace, escaping, duplicate keys, or values that are not normalized)"
}
