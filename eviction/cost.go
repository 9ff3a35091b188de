package eviction

import (
	"cmp"
	"fmt"
)

// ComputeProfile describes the model whose KV the pages hold, enough to price
// recomputing them. Zero fields take the defaults of a 70B-class dense model
// (Llama-3-70B shaped): 70e9 parameters, 80 layers, 64 attention heads of
// dimension 128, 8 KV heads, 2-byte KV, 512-token pages.
type ComputeProfile struct {
	Params     float64 // parameter count N; default 70e9
	Layers     int     // transformer layers L; default 80
	Heads      int     // attention (query) heads h; default 64
	HeadDim    int     // head dimension d_h; default 128
	KVHeads    int     // KV heads (GQA); default 8
	KVBytes    int     // bytes per KV element; default 2 (bf16)
	PageTokens int     // tokens per page P; default 512
}

// DefaultProfile is the 70B-class profile every zero field falls back to.
func DefaultProfile() ComputeProfile { return ComputeProfile{}.withDefaults() }

func (c ComputeProfile) withDefaults() ComputeProfile {
	c.Params = cmp.Or(c.Params, 70e9)
	c.Layers = cmp.Or(c.Layers, 80)
	c.Heads = cmp.Or(c.Heads, 64)
	c.HeadDim = cmp.Or(c.HeadDim, 128)
	c.KVHeads = cmp.Or(c.KVHeads, 8)
	c.KVBytes = cmp.Or(c.KVBytes, 2)
	c.PageTokens = cmp.Or(c.PageTokens, 512)
	return c
}

// Validate reports a profile with a negative or non-finite field.
func (c ComputeProfile) Validate() error {
	if !(c.Params >= 0 && c.Params < 1e16) || c.Layers < 0 || c.Heads < 0 ||
		c.HeadDim < 0 || c.KVHeads < 0 || c.KVBytes < 0 || c.PageTokens < 0 {
		return fmt.Errorf("%w: %+v", ErrBadProfile, c)
	}
	return nil
}

// PrefillFLOPs is the cost of a prefill over s tokens from scratch:
//
//	F(s) = 2·N·s + 2·L·h·d_h·s²
//
// the weight GEMMs (2 FLOPs per parameter per token) plus causal attention
// (QKᵀ and AV over an s×s triangle, 2·2·s²/2 per head dimension per layer).
func (c ComputeProfile) PrefillFLOPs(s float64) float64 {
	c = c.withDefaults()
	attn := 2 * float64(c.Layers) * float64(c.Heads) * float64(c.HeadDim)
	return 2*c.Params*s + attn*s*s
}

// PageFLOPs is the marginal recompute cost of the page at depth d holding
// tokens tokens (0 means PageTokens), i.e. of tokens [d·P, d·P+tokens) given
// the prefix before them:
//
//	F(d·P + n) − F(d·P) = 2·N·n + 2·L·h·d_h·(2·d·P·n + n²)
//
// It grows linearly with depth: a deep page attends over a long prefix.
func (c ComputeProfile) PageFLOPs(depth uint32, tokens int) float64 {
	c = c.withDefaults()
	n := float64(tokens)
	if tokens <= 0 {
		n = float64(c.PageTokens)
	}
	start := float64(depth) * float64(c.PageTokens)
	attn := 2 * float64(c.Layers) * float64(c.Heads) * float64(c.HeadDim)
	return 2*c.Params*n + attn*(2*start*n+n*n)
}

// KVBytesPerToken is 2 (K and V) · layers · kv_heads · head_dim · KVBytes:
// 327,680 bytes (320 KiB) for the default profile.
func (c ComputeProfile) KVBytesPerToken() int64 {
	c = c.withDefaults()
	return 2 * int64(c.Layers) * int64(c.KVHeads) * int64(c.HeadDim) * int64(c.KVBytes)
}

// PageBytes is the KV size of a page of tokens tokens (0 means PageTokens).
func (c ComputeProfile) PageBytes(tokens int) int64 {
	c = c.withDefaults()
	if tokens <= 0 {
		tokens = c.PageTokens
	}
	return int64(tokens) * c.KVBytesPerToken()
}
