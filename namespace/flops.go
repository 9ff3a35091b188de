package namespace

// PrefillFLOPs estimates the FLOPs one shard of this namespace spends on
// the prefill of tokens tokens: 2·P·S + 2·L·h·d_h·S² for the whole model
// (P parameters, L layers, h attention heads of width d_h, S tokens),
// divided over the tp·pp·cp shards that each hold a namespace of their own.
// It is 0 when the descriptor has no compute profile.
func (d Descriptor) PrefillFLOPs(tokens int) float64 {
	p := d.Compute
	if p.Params == 0 {
		return 0
	}
	s := float64(tokens)
	flops := 2 * float64(p.Params) * s
	flops += 2 * float64(d.NumLayers) * float64(p.AttentionHeads) * float64(p.AttentionHeadDim) * s * s
	shards := float64(max(1, d.TPSize) * max(1, d.PPSize) * max(1, d.CPSize))
	return flops / shards
}
