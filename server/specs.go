package server

import (
	"math"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// Page specs, the one request part both wires carry field by field: each
// wire's spec becomes a store.PageSpec here (pageSpec for gRPC, frameSpec
// for frames), and checkSpec validates it, whichever wire it came from. A
// new page-spec field is added, on the server's side, in this file.

// pageSpec decodes a gRPC page spec; checkSpec validates it.
func pageSpec(p *pb.PageSpec) (store.PageSpec, error) {
	k, err := namespace.KeyFromBytes(p.GetKey())
	if err != nil {
		return store.PageSpec{}, err
	}
	spec := store.PageSpec{Key: k, Depth: p.GetDepth(), Size: int64(min(p.GetSize(), maxPageSize+1)),
		CostHint: p.GetCostHint(), ChainDepth: p.GetChainDepth()}
	if par := p.GetParentKey(); len(par) > 0 {
		if spec.Parent, err = namespace.KeyFromBytes(par); err != nil {
			return store.PageSpec{}, badRequest("parent key: %v", err)
		}
		spec.HasParent = true
	}
	if ei := p.GetEventInfo(); ei != nil {
		spec.Info = &store.PutInfo{Tokens: ei.GetTokenIds(), LoraName: ei.GetLoraName(), ExtraKeys: ei.GetExtraKeys()}
		if len(spec.Info.ExtraKeys) == 0 {
			spec.Info.ExtraKeys = nil
		}
	}
	return spec, nil
}

// frameSpec is a frame's page spec as the store's; checkSpec validates it.
// Event info (frame.EventVersion) becomes PageSpec.Info as gRPC's does.
func frameSpec(p frame.PageSpec) store.PageSpec {
	spec := store.PageSpec{Key: p.Key, Parent: p.Parent, HasParent: p.HasParent, Depth: p.Depth, Size: p.Size,
		ChainDepth: p.ChainDepth, CostHint: p.CostHint}
	if p.HasEvent() {
		spec.Info = &store.PutInfo{Tokens: p.Tokens, LoraName: p.LoraName, ExtraKeys: p.ExtraKeys}
	}
	return spec
}

// maxPageSize bounds a page's declared size.
const maxPageSize = 1 << 40

// maxChainAhead bounds how much deeper than a page its chain depth may
// say the sequence put with it goes: a chain depth prices the page as its
// deepest descendant, so an absurd one would make a page all but
// unevictable.
const maxChainAhead = 1 << 20

// maxEventTokens and maxExtraKeys bound what a page's put carries for the
// KV event stream (store.PutInfo): the tokens of one page, and the
// engine's extra keys, one msgpack value.
const (
	maxEventTokens = 1 << 16
	maxExtraKeys   = 64 << 10
)

// checkSpec validates a page spec, whichever wire it came from: a size in
// (0, maxPageSize] (the store then checks it is the namespace's), a page
// that is not its own parent (the store would treat it as parentless, but
// a writer that sends one has its chain wrong), a chain depth at most
// maxChainAhead past the page's depth, a cost hint that is a finite
// number of FLOPs >= 0, and event info within maxEventTokens tokens and
// maxExtraKeys bytes of extra keys (the publisher checks that these are
// one msgpack value, and leaves an event out that does not).
func checkSpec(spec store.PageSpec) error {
	k := spec.Key
	switch {
	case spec.Size <= 0 || spec.Size > maxPageSize:
		return badRequest("page %x: size %d", k[:6], spec.Size)
	case spec.HasParent && spec.Parent == k:
		return badRequest("page %x is its own parent", k[:6])
	case spec.ChainDepth > spec.Depth && spec.ChainDepth-spec.Depth > maxChainAhead:
		return badRequest("page %x: chain depth %d is more than %d past its depth %d",
			k[:6], spec.ChainDepth, maxChainAhead, spec.Depth)
	case spec.CostHint < 0 || math.IsNaN(spec.CostHint) || math.IsInf(spec.CostHint, 0):
		return badRequest("page %x: cost hint %g is not a finite number of FLOPs >= 0", k[:6], spec.CostHint)
	case spec.Info != nil && (len(spec.Info.Tokens) > maxEventTokens || len(spec.Info.ExtraKeys) > maxExtraKeys):
		return badRequest("page %x: event info of %d tokens and %d bytes of extra keys (at most %d and %d)",
			k[:6], len(spec.Info.Tokens), len(spec.Info.ExtraKeys), maxEventTokens, maxExtraKeys)
	}
	return nil
}
