package main

import (
	"maps"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// The -o json documents. Field names are the proto's snake_case names and
// stay stable; bytes are lowercase hex, enums lowercase words ("host",
// "crc32c"), times Unix milliseconds.

// namespaceJSON is a NamespaceInfo.
type namespaceJSON struct {
	ID            string         `json:"id"`
	Descriptor    descriptorJSON `json:"descriptor"`
	PageBytes     uint64         `json:"page_bytes"`
	Pages         uint64         `json:"pages"`
	Bytes         uint64         `json:"bytes"`
	CreatedUnixMs int64          `json:"created_unix_ms"`
	Lookups       uint64         `json:"lookups"`
	LookupKeys    uint64         `json:"lookup_keys"`
	HitKeys       uint64         `json:"hit_keys"`
	HitRate       *float64       `json:"hit_rate"` // percent; null before any lookup
	LeasesActive  uint64         `json:"leases_active"`
	Tiers         []tierJSON     `json:"tiers"`
}

// descriptorJSON is a Descriptor.
type descriptorJSON struct {
	Tenant            string            `json:"tenant"`
	Model             string            `json:"model"`
	ModelRevision     string            `json:"model_revision"`
	Adapter           string            `json:"adapter"`
	AdapterRevision   string            `json:"adapter_revision"`
	TokenizerRevision string            `json:"tokenizer_revision"`
	Engine            string            `json:"engine"`
	KVFormatVersion   uint32            `json:"kv_format_version"`
	DType             string            `json:"dtype"`
	KVDType           string            `json:"kv_dtype"`
	Layout            string            `json:"layout"`
	PageTokens        uint32            `json:"page_tokens"`
	NumLayers         uint32            `json:"num_layers"`
	NumKVHeads        uint32            `json:"num_kv_heads"`
	HeadDim           uint32            `json:"head_dim"`
	MLALatentDim      uint32            `json:"mla_latent_dim"`
	TPSize            uint32            `json:"tp_size"`
	TPRank            uint32            `json:"tp_rank"`
	PPSize            uint32            `json:"pp_size"`
	PPRank            uint32            `json:"pp_rank"`
	CPSize            uint32            `json:"cp_size"`
	CPRank            uint32            `json:"cp_rank"`
	Quantization      string            `json:"quantization"`
	Extra             map[string]string `json:"extra"`
	PageBytes         uint64            `json:"page_bytes"` // declared; 0 = derived from the geometry
	Checksum          string            `json:"checksum"`
	Compute           computeJSON       `json:"compute"`
}

// computeJSON is a ComputeProfile.
type computeJSON struct {
	Params           uint64 `json:"params"`
	AttentionHeads   uint32 `json:"attention_heads"`
	AttentionHeadDim uint32 `json:"attention_head_dim"`
}

// tierJSON is a TierStats.
type tierJSON struct {
	Tier          string `json:"tier"`
	CapacityBytes uint64 `json:"capacity_bytes"`
	UsedBytes     uint64 `json:"used_bytes"`
	Pages         uint64 `json:"pages"`
}

// keyJSON is a KeyInfo.
type keyJSON struct {
	Key              string `json:"key"`
	ParentKey        string `json:"parent_key"` // "" for the first page of a sequence
	Depth            uint32 `json:"depth"`
	Size             uint64 `json:"size"`
	Checksum         string `json:"checksum"`
	Tier             string `json:"tier"`
	CreatedUnixMs    int64  `json:"created_unix_ms"`
	LastAccessUnixMs int64  `json:"last_access_unix_ms"`
	Leases           uint32 `json:"leases"`
	Hits             uint64 `json:"hits"`
	ResidentChildren uint32 `json:"resident_children"`
}

func namespaceView(n *pb.NamespaceInfo) namespaceJSON {
	v := namespaceJSON{
		ID: hexOf(n.GetId()), Descriptor: descriptorView(n.GetDescriptor_()),
		PageBytes: n.GetPageBytes(), Pages: n.GetPages(), Bytes: n.GetBytes(),
		CreatedUnixMs: n.GetCreatedUnixMs(), Lookups: n.GetLookups(), LookupKeys: n.GetLookupKeys(),
		HitKeys: n.GetHitKeys(), LeasesActive: n.GetLeasesActive(), Tiers: []tierJSON{},
	}
	if pct, ok := hitRate(n); ok {
		v.HitRate = &pct
	}
	for _, t := range n.GetTiers() {
		v.Tiers = append(v.Tiers, tierJSON{Tier: tierName(t.GetTier()), CapacityBytes: t.GetCapacityBytes(),
			UsedBytes: t.GetUsedBytes(), Pages: t.GetPages()})
	}
	return v
}

func descriptorView(d *pb.Descriptor) descriptorJSON {
	extra := maps.Clone(d.GetExtra())
	if extra == nil {
		extra = map[string]string{}
	}
	c := d.GetCompute()
	return descriptorJSON{
		Tenant: d.GetTenant(), Model: d.GetModel(), ModelRevision: d.GetModelRevision(),
		Adapter: d.GetAdapter(), AdapterRevision: d.GetAdapterRevision(),
		TokenizerRevision: d.GetTokenizerRevision(), Engine: d.GetEngine(),
		KVFormatVersion: d.GetKvFormatVersion(), DType: d.GetDtype(), KVDType: d.GetKvDtype(),
		Layout: d.GetLayout(), PageTokens: d.GetPageTokens(), NumLayers: d.GetNumLayers(),
		NumKVHeads: d.GetNumKvHeads(), HeadDim: d.GetHeadDim(), MLALatentDim: d.GetMlaLatentDim(),
		TPSize: d.GetTpSize(), TPRank: d.GetTpRank(), PPSize: d.GetPpSize(), PPRank: d.GetPpRank(),
		CPSize: d.GetCpSize(), CPRank: d.GetCpRank(), Quantization: d.GetQuantization(), Extra: extra,
		PageBytes: d.GetPageBytes(), Checksum: checksumName(d.GetChecksum()),
		Compute: computeJSON{Params: c.GetParams(), AttentionHeads: c.GetAttentionHeads(),
			AttentionHeadDim: c.GetAttentionHeadDim()},
	}
}

func keyView(k *pb.KeyInfo) keyJSON {
	return keyJSON{
		Key: hexOf(k.GetKey()), ParentKey: hexOf(k.GetParentKey()), Depth: k.GetDepth(), Size: k.GetSize(),
		Checksum: hexOf(k.GetChecksum()), Tier: tierName(k.GetTier()), CreatedUnixMs: k.GetCreatedUnixMs(),
		LastAccessUnixMs: k.GetLastAccessUnixMs(), Leases: k.GetLeases(), Hits: k.GetHits(),
		ResidentChildren: k.GetResidentChildren(),
	}
}
