package server

import (
	"math"
	"reflect"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// TestSpecsFromEitherWire: a page spec sent over gRPC or in a frame
// becomes the same store.PageSpec, every field carried. The sample sets
// every field, so a field added to the store's spec fails here until both
// decoders carry it.
func TestSpecsFromEitherWire(t *testing.T) {
	want := store.PageSpec{Key: namespace.Key{1}, Parent: namespace.Key{2}, HasParent: true, Depth: 3, Size: 4096,
		CostHint: 5e9, ChainDepth: 7, Info: &store.PutInfo{Tokens: []uint32{8, 9}, LoraName: "l", ExtraKeys: []byte{0x90}}}
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the sample leaves %s unset", v.Type().Field(i).Name)
		}
	}
	got, err := pageSpec(&pb.PageSpec{Key: want.Key[:], ParentKey: want.Parent[:], Depth: want.Depth,
		Size: uint64(want.Size), CostHint: want.CostHint, ChainDepth: want.ChainDepth,
		EventInfo: &pb.PageEventInfo{TokenIds: want.Info.Tokens, LoraName: want.Info.LoraName, ExtraKeys: want.Info.ExtraKeys}})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("from gRPC: %+v, %v; want %+v", got, err, want)
	}
	// Info (the KV event stream's tokens, LoRA and extra keys) rides the
	// frame planes from frame.EventVersion.
	if got := frameSpec(frame.PageSpec{Key: want.Key, Parent: want.Parent, HasParent: true, Depth: want.Depth,
		Size: want.Size, ChainDepth: want.ChainDepth, CostHint: want.CostHint, Tokens: want.Info.Tokens,
		LoraName: want.Info.LoraName, ExtraKeys: want.Info.ExtraKeys}); !reflect.DeepEqual(got, want) {
		t.Errorf("from a frame: %+v; want %+v", got, want)
	}
	noInfo := want
	noInfo.Info = nil
	if got := frameSpec(frame.PageSpec{Key: want.Key, Parent: want.Parent, HasParent: true, Depth: want.Depth,
		Size: want.Size, ChainDepth: want.ChainDepth, CostHint: want.CostHint}); got != noInfo {
		t.Errorf("from a frame without event info: %+v; want %+v", got, noInfo)
	}
	if err := checkSpec(want); err != nil {
		t.Errorf("valid spec refused: %v", err)
	}
}

// TestCheckSpec: what checkSpec refuses, whichever wire the spec came from.
func TestCheckSpec(t *testing.T) {
	ok := store.PageSpec{Key: namespace.Key{1}, Depth: 2, Size: 4096}
	for name, mod := range map[string]func(*store.PageSpec){
		"no size":        func(p *store.PageSpec) { p.Size = 0 },
		"negative size":  func(p *store.PageSpec) { p.Size = -1 },
		"huge size":      func(p *store.PageSpec) { p.Size = maxPageSize + 1 },
		"its own parent": func(p *store.PageSpec) { p.Parent, p.HasParent = p.Key, true },
		"chain too deep": func(p *store.PageSpec) { p.ChainDepth = p.Depth + maxChainAhead + 1 },
		"negative cost":  func(p *store.PageSpec) { p.CostHint = -1 },
		"not a number":   func(p *store.PageSpec) { p.CostHint = math.NaN() },
		"infinite cost":  func(p *store.PageSpec) { p.CostHint = math.Inf(1) },
		"too many tokens": func(p *store.PageSpec) {
			p.Info = &store.PutInfo{Tokens: make([]uint32, maxEventTokens+1)}
		},
		"huge extra keys": func(p *store.PageSpec) { p.Info = &store.PutInfo{ExtraKeys: make([]byte, maxExtraKeys+1)} },
	} {
		p := ok
		mod(&p)
		if err := checkSpec(p); err == nil {
			t.Errorf("%s: accepted", name)
		} else if c, _ := grpcCode(err); c.String() != "InvalidArgument" || frameError(err).Code != frame.CodeBadRequest {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := checkSpec(ok); err != nil {
		t.Errorf("valid spec refused: %v", err)
	}
}
