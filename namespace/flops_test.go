package namespace

import "testing"

func TestPrefillFLOPs(t *testing.T) {
	d := Descriptor{NumLayers: 80, Compute: ComputeProfile{Params: 70e9, AttentionHeads: 64, AttentionHeadDim: 128}}
	// 8,192 tokens: 2·70e9·8192 + 2·80·64·128·8192² = 1.14688e15 + 8.796e13.
	want := 2*70e9*8192 + 2*80*64*128*8192.0*8192
	if got := d.PrefillFLOPs(8192); got != want {
		t.Fatalf("PrefillFLOPs(8192) = %g, want %g", got, want)
	}
	d.TPSize = 8
	if got := d.PrefillFLOPs(8192); got != want/8 {
		t.Fatalf("TP8 shard: %g, want %g", got, want/8)
	}
	if (Descriptor{}).PrefillFLOPs(100) != 0 {
		t.Fatal("no profile should price at 0")
	}
}
