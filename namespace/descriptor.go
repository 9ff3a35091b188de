package namespace

import (
	"fmt"
	"maps"
	"math/bits"
)

// Limits that Validate enforces. They bound the canonical encoding (a valid
// descriptor encodes to well under MaxCanonicalLen bytes) and catch
// descriptors filled with the wrong thing.
const (
	MaxStringLen     = 256     // bytes in any string field, after trimming
	MaxExtraEntries  = 32      // entries in Extra
	MaxExtraKeyLen   = 64      // bytes in an Extra key
	MaxExtraValueLen = 256     // bytes in an Extra value
	MaxPageTokens    = 1 << 16 // tokens per page
	MaxPageBytes     = 1 << 30 // bytes per page (1 GiB)
)

// ComputeProfile prices the recomputation of a page (prefill FLOPs): the
// model's parameter count and its attention shape. Zero means unknown.
type ComputeProfile struct {
	Params           uint64 // parameter count
	AttentionHeads   uint32 // query heads
	AttentionHeadDim uint32
}

// Descriptor is everything that decides whether two KV-cache pages are
// interchangeable. Two engines that send equal descriptors (after Normalize)
// share pages; any difference, however small, gives a different namespace.
// Field comments give the canonical JSON name; see README.md for the
// encoding and Normalize and Validate for the rules.
type Descriptor struct {
	Tenant            string // "tenant": authorization domain; required
	Model             string // "model": model name, e.g. a Hugging Face repo id; required
	ModelRevision     string // "model_revision": weight revision (commit hash)
	Adapter           string // "adapter": LoRA adapter id, "" for none
	AdapterRevision   string // "adapter_revision"
	TokenizerRevision string // "tokenizer_revision"
	Engine            string // "engine": e.g. "vllm", "sglang"
	KVFormatVersion   uint32 // "kv_format_version": the engine's KV layout version

	DType   string // "dtype": model activation dtype, e.g. "bf16"
	KVDType string // "kv_dtype": KV-cache element dtype; "" or "auto" means DType
	Layout  string // "layout": e.g. "nhd", "hnd", "layer_first", "page_first"

	PageTokens   uint32 // "page_tokens": tokens per page; required
	NumLayers    uint32 // "num_layers": attention layers of the whole model
	NumKVHeads   uint32 // "num_kv_heads": KV heads of the whole model (not MLA)
	HeadDim      uint32 // "head_dim" (not MLA)
	MLALatentDim uint32 // "mla_latent_dim": MLA compressed KV width per token; 0 = not MLA

	TPSize uint32 // "tp_size": tensor-parallel degree; 0 means 1
	TPRank uint32 // "tp_rank"
	PPSize uint32 // "pp_size": pipeline-parallel degree; 0 means 1
	PPRank uint32 // "pp_rank"
	CPSize uint32 // "cp_size": context-parallel degree; 0 means 1
	CPRank uint32 // "cp_rank"

	Quantization string            // "quantization": weight quantization scheme, "" for none
	Extra        map[string]string // "extra": free-form, engine-specific identity

	PageBytes  uint64         // "page_bytes": explicit page size for opaque layouts; 0 = derive from geometry
	PageFormat string         // "page_format": how a page's bytes are laid out (ParsePageFormat); "" = not stated
	Checksum   Checksum       // "checksum": page checksum algorithm; 0 = CRC32C
	KeyFormat  KeyFormat      // "key_format": how native page keys chain; 0 = KeyChain
	Compute    ComputeProfile // "compute": recomputation cost profile
}

// Normalize returns d with defaults filled in and spellings made canonical,
// so that descriptors that mean the same thing encode (and hash) the same.
// It never changes what d means and it is idempotent. The rules, in order:
//
//  1. Every string field except the Extra keys and values loses leading and
//     trailing ASCII whitespace (space, \t, \n, \v, \f, \r). PageFormat
//     is otherwise kept as is: it must already be canonical.
//  2. Engine, Layout and Quantization are lower-cased (ASCII A-Z only).
//  3. DType and KVDType are lower-cased, lose a "torch." prefix and have
//     unambiguous aliases resolved: float32/float -> fp32, float16/half ->
//     fp16, bfloat16 -> bf16, fp8_e4m3fn/float8_e4m3fn -> fp8_e4m3,
//     float8_e5m2 -> fp8_e5m2, float8_e4m3fnuz -> fp8_e4m3fnuz,
//     float8_e5m2fnuz -> fp8_e5m2fnuz. "fp8" is kept as is.
//  4. KVDType "" or "auto" becomes DType.
//  5. TPSize, PPSize and CPSize 0 become 1.
//  6. Checksum 0 becomes CRC32C; KeyFormat 0 becomes KeyChain.
//  7. An empty Extra becomes nil; a non-empty one is copied, so the result
//     shares no memory with d.
//
// Tenant, Model, revisions and Adapter keep their case: they are opaque
// identifiers.
func (d Descriptor) Normalize() Descriptor {
	d.normalizeScalars()
	if len(d.Extra) == 0 {
		d.Extra = nil
	} else {
		d.Extra = maps.Clone(d.Extra)
	}
	return d
}

// normalizeScalars applies every Normalize rule except the copy of Extra.
func (d *Descriptor) normalizeScalars() {
	d.Tenant = trim(d.Tenant)
	d.Model = trim(d.Model)
	d.ModelRevision = trim(d.ModelRevision)
	d.Adapter = trim(d.Adapter)
	d.AdapterRevision = trim(d.AdapterRevision)
	d.TokenizerRevision = trim(d.TokenizerRevision)
	d.Engine = lower(trim(d.Engine))
	d.Layout = lower(trim(d.Layout))
	d.Quantization = lower(trim(d.Quantization))
	d.PageFormat = trim(d.PageFormat)
	d.DType = normDType(d.DType)
	d.KVDType = normDType(d.KVDType)
	if d.KVDType == "" || d.KVDType == "auto" {
		d.KVDType = d.DType
	}
	d.TPSize = max(d.TPSize, 1)
	d.PPSize = max(d.PPSize, 1)
	d.CPSize = max(d.CPSize, 1)
	if d.Checksum == 0 {
		d.Checksum = CRC32C
	}
	if d.KeyFormat == 0 {
		d.KeyFormat = KeyChain
	}
}

// IsMLA reports whether d describes a multi-head latent attention cache
// (MLALatentDim set), whose per-token KV is one latent vector per layer.
func (d Descriptor) IsMLA() bool { return d.MLALatentDim > 0 }

// ID is the namespace ID: SHA-256 over Canonical().
func (d Descriptor) ID() ID { return ID(sum256(d.Canonical())) }

// PageSize returns the exact byte size of one page of this shard. An
// explicit PageBytes wins. Otherwise the size is derived from the geometry
// of the normalized descriptor, with w = DTypeBytes(KVDType):
//
//	MHA/GQA: 2 × (NumLayers/PPSize) × h × HeadDim × w × (PageTokens/CPSize)
//	MLA:         (NumLayers/PPSize) × MLALatentDim × w × (PageTokens/CPSize)
//
// where h, the KV heads one TP rank holds, is NumKVHeads/TPSize when
// NumKVHeads >= TPSize (heads are split) and 1 when there are fewer heads
// than ranks (each head is replicated over TPSize/NumKVHeads ranks). The
// factor 2 counts K and V; MLA caches one latent vector and is never split
// by TP. Layers are split evenly over pipeline stages and the tokens of a
// page evenly over context-parallel ranks; a model whose split is uneven
// must declare PageBytes.
//
// PageSize returns 0 when the geometry does not give a size (a rule of
// Validate is broken); for a descriptor that passes Validate it is in
// [1, MaxPageBytes].
func (d Descriptor) PageSize() uint64 {
	if d.PageBytes > 0 {
		return d.PageBytes
	}
	d.normalizeScalars()
	n, err := d.derivedPageSize()
	if err != nil {
		return 0
	}
	return n
}

// derivedPageSize computes the geometric page size of a normalized
// descriptor. The error names the field and the broken rule.
func (d *Descriptor) derivedPageSize() (uint64, error) {
	w, ok := DTypeBytes(d.KVDType)
	if !ok {
		return 0, fieldErr("kv_dtype", "%q has no known width (known: %s); declare page_bytes for other dtypes", d.KVDType, knownDTypes)
	}
	if d.NumLayers == 0 {
		return 0, fieldErr("num_layers", "must be > 0 unless page_bytes is set")
	}
	if d.NumLayers%d.PPSize != 0 {
		return 0, fieldErr("num_layers", "%d does not split evenly over pp_size %d; declare page_bytes for uneven pipeline stages", d.NumLayers, d.PPSize)
	}
	if d.PageTokens%d.CPSize != 0 {
		return 0, fieldErr("page_tokens", "%d does not split evenly over cp_size %d", d.PageTokens, d.CPSize)
	}
	f := [6]uint64{uint64(d.NumLayers / d.PPSize), uint64(d.PageTokens / d.CPSize), w, 1, 1, 1}
	if d.IsMLA() {
		f[3] = uint64(d.MLALatentDim)
	} else {
		h, err := d.kvHeadsPerShard()
		if err != nil {
			return 0, err
		}
		f[3], f[4], f[5] = 2, h, uint64(d.HeadDim)
	}
	n := uint64(1)
	for _, x := range f {
		hi, lo := bits.Mul64(n, x)
		if hi != 0 || lo > MaxPageBytes {
			return 0, fieldErr("page_bytes", "geometry gives more than %d bytes per page", MaxPageBytes)
		}
		n = lo
	}
	if n == 0 {
		return 0, fieldErr("page_bytes", "geometry gives an empty page")
	}
	return n, nil
}

// kvHeadsPerShard is the number of KV heads one TP rank holds.
func (d *Descriptor) kvHeadsPerShard() (uint64, error) {
	switch {
	case d.NumKVHeads == 0 || d.HeadDim == 0:
		return 0, fieldErr("num_kv_heads", "num_kv_heads and head_dim must be > 0 (or mla_latent_dim set, or page_bytes declared)")
	case d.NumKVHeads >= d.TPSize:
		if d.NumKVHeads%d.TPSize != 0 {
			return 0, fieldErr("num_kv_heads", "%d heads do not split evenly over tp_size %d", d.NumKVHeads, d.TPSize)
		}
		return uint64(d.NumKVHeads / d.TPSize), nil
	default:
		if d.TPSize%d.NumKVHeads != 0 {
			return 0, fieldErr("num_kv_heads", "%d heads cannot be replicated evenly over tp_size %d", d.NumKVHeads, d.TPSize)
		}
		return 1, nil
	}
}

// ForkKey identifies the cache a namespace belongs to regardless of its
// layout factors (TP/PP/CP, page size, dtypes, engine format): namespaces
// with equal fork keys are forks of one cache. It is the lower-case hex
// SHA-256 of the canonical JSON object (same rules as Canonical) holding the
// normalized "adapter", "adapter_revision", "model", "model_revision",
// "tenant", "tokenizer_revision" and "v":1.
func (d Descriptor) ForkKey() string {
	d.normalizeScalars()
	b := append(make([]byte, 0, 256), '{')
	b = appendMembers(b, &d, forkField)
	b = append(b, `,"v":1}`...)
	s := sum256(b)
	return fmt.Sprintf("%x", s[:])
}

// forkField reports whether a canonical field is one of those that name a
// fork's cache (ForkKey).
func forkField(name string) bool {
	switch name {
	case "adapter", "adapter_revision", "model", "model_revision", "tenant", "tokenizer_revision":
		return true
	}
	return false
}

// LayoutDiff returns the canonical JSON names of the fields in which the
// normalized a and b differ, sorted; nil when they are the same namespace.
// Extra and Compute are compared as a whole ("extra", "compute").
func LayoutDiff(a, b Descriptor) []string {
	a.normalizeScalars()
	b.normalizeScalars()
	var diff []string
	var va, vb []byte
	for _, f := range canonicalFields {
		va = f.appendValue(va[:0], &a)
		vb = f.appendValue(vb[:0], &b)
		if string(va) != string(vb) {
			diff = append(diff, f.name)
		}
	}
	return diff
}
