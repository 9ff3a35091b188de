package client

import (
	"slices"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Page is one page to publish.
type Page struct {
	Key       namespace.Key
	Parent    namespace.Key // meaningful when HasParent
	HasParent bool
	Depth     uint32 // page index within its token sequence
	Data      []byte
	// ChainDepth is the depth of the deepest page of this page's sequence
	// published by the same put, on any node. Put fills it in from the
	// batch's parent links (a caller that splits one sequence over several
	// puts may set it). Nodes admit and keep a prefix page at least as they
	// would the deepest page it makes reachable: judged alone, shallow
	// pages are worth less, and a full cluster would keep the deep pages
	// of a sequence while refusing the prefix they need. It is also the
	// hint an engine or router gives for a prefix it expects to be
	// extended (a conversation's next turn): a ChainDepth past the put's
	// last page keeps that page from being refused as a first-time page
	// that ends its sequence (eviction/adapt.go), and values it as the
	// deeper page it will lead to.
	ChainDepth uint32
	// CostHint is the writer's measured cost of recomputing the page, in
	// FLOPs; 0: none (the node prices the page by the namespace's
	// profile). Nodes value a page by it for admission and eviction, and
	// refuse a put whose hint is negative, NaN or infinite (ErrInvalid).
	// Every plane carries it; a node older than frame.CostHintVersion
	// gets hinted pages over gRPC.
	CostHint float64
	// Event is what the put says of the page for the nodes' KV event
	// stream alone (docs/design.md §15): the BlockStored that announces
	// the page carries it, and no node keeps it. nil: none (the event has
	// no tokens). Every plane carries it; a node older than
	// frame.EventVersion gets such pages over gRPC.
	Event *EventInfo
}

// EventInfo is a page's part of vLLM's BlockStored event.
type EventInfo struct {
	// Tokens are the page's token ids (at most 65,536).
	Tokens []uint32
	// LoraName is the LoRA adapter the page was computed with; "" none.
	LoraName string
	// ExtraKeys is the engine's extra keys for the page, one msgpack value
	// (vLLM's BlockStored.extra_keys entry; at most 64 KiB); nil none.
	ExtraKeys []byte
}

// frameVersion is the oldest frame protocol version that carries a put of
// pages: one with event info needs frame.EventVersion, one with a cost
// hint frame.CostHintVersion. A frame plane whose connection is older
// leaves the put to the next plane (gRPC carries everything).
func frameVersion(pages []Page) uint32 {
	switch {
	case slices.ContainsFunc(pages, func(p Page) bool { return p.Event != nil }):
		return frame.EventVersion
	case slices.ContainsFunc(pages, func(p Page) bool { return p.CostHint != 0 }):
		return frame.CostHintVersion
	}
	return 0
}

// pbSpec is p's spec on the gRPC wire, the one place the gRPC plane builds
// it (framePageSpec is the frame planes').
func pbSpec(p Page) *pb.PageSpec {
	spec := &pb.PageSpec{Key: p.Key[:], Depth: p.Depth, Size: uint64(len(p.Data)), ChainDepth: p.ChainDepth, CostHint: p.CostHint}
	if p.HasParent {
		spec.ParentKey = p.Parent[:]
	}
	if e := p.Event; e != nil {
		spec.EventInfo = &pb.PageEventInfo{TokenIds: e.Tokens, LoraName: e.LoraName, ExtraKeys: e.ExtraKeys}
	}
	return spec
}

// chained reports whether every page after the first is the child of the
// one before it.
func chained(pages []Page) bool {
	for i := 1; i < len(pages); i++ {
		if !pages[i].HasParent || pages[i].Parent != pages[i-1].Key {
			return false
		}
	}
	return true
}

// parents returns a function giving the index in pages of page i's parent,
// when pages holds it before i (by parent links, as ChainPages orders a
// sequence).
func parents(pages []Page) func(i int) (int, bool) {
	if chained(pages) { // one sequence in order (ChainPages)
		return func(i int) (int, bool) { return i - 1, i > 0 }
	}
	at := make(map[namespace.Key]int, len(pages))
	for i, p := range pages {
		at[p.Key] = i
	}
	return func(i int) (int, bool) {
		j, ok := at[pages[i].Parent]
		return j, ok && pages[i].HasParent && j < i
	}
}

// withChainDepths returns pages with each ChainDepth raised to the depth of
// its deepest descendant in pages (by parent links; a parent must come
// before its children, as ChainPages orders them), copying pages only if
// something changes.
func withChainDepths(pages []Page) []Page {
	if len(pages) < 2 {
		return pages
	}
	parent := parents(pages)
	out := pages
	for i := len(pages) - 1; i > 0; i-- {
		j, ok := parent(i)
		if !ok {
			continue
		}
		d := max(out[i].ChainDepth, out[i].Depth)
		if d <= max(out[j].ChainDepth, out[j].Depth) {
			continue
		}
		if &out[0] == &pages[0] {
			out = slices.Clone(pages)
		}
		out[j].ChainDepth = d
	}
	return out
}

// ChainPages pairs the keys of one token sequence, from its first page, with
// their bytes, filling in parents and depths.
func ChainPages(keys []namespace.Key, data [][]byte) []Page {
	pages := make([]Page, min(len(keys), len(data)))
	for i := range pages {
		pages[i] = Page{Key: keys[i], Depth: uint32(i), Data: data[i]}
		if i > 0 {
			pages[i].Parent, pages[i].HasParent = keys[i-1], true
		}
	}
	return pages
}

// PutStatus is the outcome of publishing one page.
type PutStatus int

// Put outcomes, as the node reports them.
const (
	Committed        PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_COMMITTED)
	Exists           PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_EXISTS)
	ChecksumMismatch PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_CHECKSUM_MISMATCH)
	SizeMismatch     PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_SIZE_MISMATCH)
	Incomplete       PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_INCOMPLETE)
	UnknownWrite     PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE)
	Expired          PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_EXPIRED)
	Aborted          PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_ABORTED)
	Rejected         PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_REJECTED)
	Failed           PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_FAILED)
)

// String names the outcome.
func (s PutStatus) String() string { return pb.CommitStatus(s).String() }

// Stored reports whether the page is published after the put (by this
// writer or an earlier one).
func (s PutStatus) Stored() bool { return s == Committed || s == Exists }

// PutResult is the outcome of one page.
type PutResult struct {
	Status PutStatus
	Reason string
}
