package namespace

// PrefillFLOPs estimates the FLOPs one shard of this namespace spends on
// the prefill of tokens tokens: 2·P·S + 2·L·h·d_h·S² for the whole model
// (P parameters, L layers, h attention heads of width d_h, S tokens),
// divided over the tp·pp·cp shards that each hold a namespace of their own.
// It is 0 when the descriptor has no compute profile.
func (d Descriptor) PrefillFLOPs(tokens int) float64 {
	lin, quad := d.PrefillCoefficients()
	s := float64(tokens)
	return lin*s + quad*s*s
}

// PrefillCoefficients returns PrefillFLOPs as lin·S + quad·S²: what the
// store needs to price each page by its depth. Both are 0 when the
// descriptor has no compute profile.
func (d Descriptor) PrefillCoefficients() (lin, quad float64) {
	p := d.Compute
	if p.Params == 0 {
		return 0, 0
	}
	shards := float64(max(1, d.TPSize) * max(1, d.PPSize) * max(1, d.CPSize))
	lin = 2 * float64(p.Params) / shards
	quad = 2 * float64(d.NumLayers) * float64(p.AttentionHeads) * float64(p.AttentionHeadDim) / shards
	return lin, quad
}
