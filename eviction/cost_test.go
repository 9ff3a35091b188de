package eviction

import (
	"errors"
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func TestPrefillFLOPs(t *testing.T) {
	// The seeds' worked example: Llama-3-70B at S = 8192 is
	// 1.15e15 (projections) + 8.8e13 (attention) FLOPs.
	p := DefaultProfile()
	got := p.PrefillFLOPs(8192)
	want := 2*70e9*8192 + 2*80*64*128*8192.0*8192
	if !near(got, want) {
		t.Fatalf("F(8192) = %g, want %g", got, want)
	}
	if got < 1.23e15 || got > 1.24e15 {
		t.Fatalf("F(8192) = %g, want ≈ 1.235e15 as in the seeds", got)
	}
}

func TestPageFLOPsTelescopes(t *testing.T) {
	for _, p := range []ComputeProfile{{}, {Params: 8e9, Layers: 32, Heads: 32, PageTokens: 16}} {
		p = p.withDefaults()
		var sum float64
		const pages = 300
		for d := range uint32(pages) {
			sum += p.PageFLOPs(d, 0)
		}
		// A partial last page of 100 tokens.
		sum += p.PageFLOPs(pages, 100)
		want := p.PrefillFLOPs(float64(pages*p.PageTokens + 100))
		if !near(sum, want) {
			t.Errorf("%+v: Σ page costs = %g, F(S) = %g", p, sum, want)
		}
		if p.PageFLOPs(10, 0) <= p.PageFLOPs(9, 0) {
			t.Errorf("%+v: a deeper page must cost more", p)
		}
	}
}

func TestKVBytes(t *testing.T) {
	p := DefaultProfile()
	if got := p.KVBytesPerToken(); got != 327680 {
		t.Fatalf("KV bytes per token = %d, want 327680 (320 KiB)", got)
	}
	if got := p.PageBytes(0); got != 512*327680 {
		t.Fatalf("page bytes = %d", got)
	}
	if got := p.PageBytes(10); got != 10*327680 {
		t.Fatalf("10-token page bytes = %d", got)
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []ComputeProfile{{Params: -1}, {Layers: -1}, {Params: math.NaN()}, {Params: math.Inf(1)}, {PageTokens: -5}} {
		if err := p.Validate(); !errors.Is(err, ErrBadProfile) {
			t.Errorf("Validate(%+v) = %v, want ErrBadProfile", p, err)
		}
		if _, err := New(Config{Profile: p}); !errors.Is(err, ErrBadProfile) {
			t.Errorf("New(%+v) = %v, want ErrBadProfile", p, err)
		}
	}
	if _, err := New(Config{Kind: "nope"}); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("New(kind nope) = %v, want ErrUnknownKind", err)
	}
}
