package eviction

import "fmt"

// Handle names one page's state inside a policy. Insert assigns it; it stays
// valid until Evict or Remove, after which the policy may hand it out again.
// The zero Handle is never assigned, so a zero field in the caller's page
// entry means "not tracked".
type Handle uint32

// Page is what a policy needs to know about a page when it is inserted.
type Page struct {
	// Key is a 64-bit hash of the page key (e.g. its first 8 bytes), for
	// the frequency history: the count a page starts with is how often its
	// key was asked for recently (Record), resident or not.
	Key uint64
	// Bytes is the page's size. Required, > 0.
	Bytes int64
	// Depth is the page's index in its token sequence (0 = first page).
	Depth uint32
	// Tokens is the number of tokens the page holds; 0 means
	// ComputeProfile.PageTokens.
	Tokens int
	// Cost is a measured recompute cost in FLOPs supplied by the engine; 0
	// means ComputeProfile.PageFLOPs(Depth, Tokens).
	Cost float64
	// Freq is the reuse count to start from (a page demoted from a faster
	// tier keeps its count); 0 means 1, or the frequency history's count
	// when the policy keeps one and it is higher.
	Freq uint32
	// Orphan marks a page whose parent is known to be absent everywhere: it
	// cannot be part of any hit prefix, so it is evicted first.
	Orphan bool
	// ChainDepth is, for KindCost, the depth of the deepest page of this
	// page's sequence stored along with it (its descendants in the same
	// put); not above Depth: none. The page starts valued at least as a
	// fresh page at that depth (its best-descendant worth, as SetChildWorth
	// would make it once they are resident), for Admit as for the queue's
	// order: a prefix page is worth what it makes reachable, and judged
	// alone a shallow page is refused or evicted while the deeper pages
	// that need it are kept. A ChainDepth past the deepest page stored is
	// an engine's hint that the sequence will be extended: the page is not
	// the end of its put, so an adaptive queue's Admit does not refuse it
	// for its worth. Ignored by the other kinds.
	ChainDepth uint32
	// ChainCost is that deepest page's recompute cost in FLOPs; 0 means
	// ComputeProfile.PageFLOPs(ChainDepth, Tokens).
	ChainCost float64
	// FlatCost is, for KindCost, what the page would cost at depth 0 (its
	// tokens' weight GEMMs and their own attention): the part of Cost that
	// does not grow with depth, so that an adaptive queue can weigh the
	// rest by what it learns. 0 means ComputeProfile.PageFLOPs(0, Tokens)
	// when Cost is 0, and Cost (nothing to weigh) when Cost is set.
	FlatCost float64
	// Group is the namespace (or any other population) the page belongs
	// to: an adaptive KindCost queue learns the reuse of first-timers per
	// group. Default 0.
	Group uint32
}

// Kind names a policy.
type Kind string

const (
	// KindLRU drops the least recently used page (inserts and hits count as
	// uses): what a plain store does.
	KindLRU Kind = "lru"
	// KindLFU drops the least frequently hit page, the least recent among
	// equals; counts never age.
	KindLFU Kind = "lfu"
	// KindGDSFBytes is Greedy-Dual-Size-Frequency with cost = bytes, i.e.
	// value = L + freq (LFU with dynamic aging; sizes cancel out): byte-hit
	// ratio, blind to what the bytes are worth.
	KindGDSFBytes Kind = "gdsf-bytes"
	// KindCost is strata's policy: value = reuse count decaying with a
	// half-life × recompute FLOPs of the page at its depth ÷ bytes, a page
	// valued at least as much as its best resident descendant (see the
	// package documentation).
	KindCost Kind = "cost"
	// KindOffline orders pages by a priority the caller sets (SetPriority),
	// for offline bounds such as Belady's in the simulator.
	KindOffline Kind = "offline"
)

// Config configures New.
type Config struct {
	// Kind selects the value model. Default KindCost.
	Kind Kind
	// Profile prices recomputation for KindCost. Zero fields default to
	// DefaultProfile.
	Profile ComputeProfile
	// Plain disables leaf-first and orphan-first ordering, giving the
	// textbook algorithm for comparisons. Default false. A store must not set
	// it: it breaks invariant 5 (no page dropped before its resident
	// children on the same node).
	Plain bool
	// Capacity is a hint for how many pages the tier holds: state for that
	// many is preallocated and the frequency history is sized from it. The
	// heap, which holds only the pages that may be evicted now (unpinned,
	// without resident children), grows as they come: a tier of prefix
	// chains has few. Default 0.
	Capacity int
	// History is how many distinct recent keys the frequency history
	// remembers (KindCost only; TinyLFU-style count-min sketch of 4-bit
	// counters, 2 to 4 bytes per remembered key). Default 8 × Capacity, or
	// 32768 when Capacity is 0; negative disables it.
	History int
	// CapacityBytes is the tier's size for Admit; see SetCapacity. Default 0:
	// unknown, Admit checks the cutoff only.
	CapacityBytes int64
	// HalfLife is, for KindCost, how many page operations (inserts, hits
	// and refusals on this queue) halve a page's reuse count, fixed: a
	// queue given one does not choose its half-life (the rest of its
	// adaptation goes on unless Static). Default 0: an adaptive queue
	// with a CapacityBytes chooses it, and its admission rule, by
	// miniature simulation (mini.go), from 0.25 capacities; one without
	// starts at DefaultHalfLife(Capacity) and keeps it.
	HalfLife int
	// Static turns KindCost's adaptation off (adapt.go: the ghost list,
	// the chosen half-life, the learned reuse of first-timers and the
	// comparison with the victim in Admit): the policy with constants,
	// for comparison. Default false.
	Static bool
	// CapacityAdmission makes a Static KindCost queue's Admit refuse, when
	// the tier is full, a page worth less than the victim (the other kinds
	// always do), and an adaptive one compare first-timers with
	// descendants in their put too, not only those that end it. Default
	// false.
	CapacityAdmission bool
	// AdmitShare is the share of the cutoff (SetCutoff) below which Admit
	// refuses a page; 0 means DefaultAdmitShare.
	AdmitShare float64
	// Ident, when set, answers for a tracked page (by its handle) the Key,
	// Group and Bytes that Insert was given for it, exactly; the queue then
	// keeps no copy (IdentBytes a page less). A caller that keeps them
	// anyway (the store's index) sets it. The queue calls it only from its
	// own methods, while the page is tracked (before Evict or Remove
	// returns). Default nil: the queue keeps them.
	Ident func(Handle) Ident
}

// Ident is what Config.Ident answers: a tracked page's Page.Key, Group and
// Bytes.
type Ident struct {
	Key   uint64
	Group uint32
	Bytes int64
}

// HalfLifeCapacities is the default half-life of KindCost's reuse counts
// in tier capacities for a queue that does not choose one (Static, or no
// CapacityBytes): see DefaultHalfLife.
const HalfLifeCapacities = 1

// unknownCapacity is the page capacity DefaultHalfLife assumes for a tier
// whose page count is not known yet (its page size is not).
const unknownCapacity = 4096

// DefaultHalfLife is the default Config.HalfLife of a tier that holds pages
// pages: HalfLifeCapacities × pages page operations, where a page used
// once a tier's turnover ago counts half, for a queue that does not
// choose its half-life by miniature simulation. A tier whose page
// count is unknown (pages <= 0) counts as 4096 pages. The store and the
// simulator (cmd/strata-sim, which runs the store) both use it.
func DefaultHalfLife(pages int64) int {
	if pages <= 0 {
		pages = unknownCapacity
	}
	return int(HalfLifeCapacities * min(pages, 1<<40))
}

// New returns the policy cfg describes.
func New(cfg Config) (*Queue, error) {
	if cfg.Kind == "" {
		cfg.Kind = KindCost
	}
	switch cfg.Kind {
	case KindLRU, KindLFU, KindGDSFBytes, KindCost, KindOffline:
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownKind, cfg.Kind)
	}
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	cfg.Profile = cfg.Profile.withDefaults()
	if cfg.HalfLife < 0 {
		return nil, fmt.Errorf("%w: half-life %d", ErrBadConfig, cfg.HalfLife)
	}
	if !(cfg.AdmitShare >= 0 && cfg.AdmitShare <= 1) {
		return nil, fmt.Errorf("%w: admit share %g not in [0, 1]", ErrBadConfig, cfg.AdmitShare)
	}
	if cfg.AdmitShare == 0 {
		cfg.AdmitShare = DefaultAdmitShare
	}
	q := &Queue{kind: cfg.Kind, prof: cfg.Profile, plain: cfg.Plain, capacity: cfg.CapacityBytes,
		admitCap: cfg.CapacityAdmission, halfLife: float64(cfg.HalfLife), admitShare: cfg.AdmitShare,
		identFn: cfg.Ident}
	if q.halfLife == 0 {
		q.halfLife = float64(DefaultHalfLife(int64(cfg.Capacity)))
	}
	if cfg.Kind == KindCost && cfg.History >= 0 {
		h := cfg.History
		if h == 0 {
			h = 8 * cfg.Capacity
			if h == 0 {
				h = 32768
			}
		}
		q.hist = newSketch(h)
	}
	if cfg.Kind == KindCost && !cfg.Static {
		pages := cfg.Capacity
		if pages <= 0 {
			pages = unknownCapacity
		}
		q.ad = newAdapt(pages)
		if cfg.HalfLife == 0 && cfg.CapacityBytes > 0 {
			q.mini = newMini(q, pages, cfg.CapacityBytes, cfg.Profile)
		}
	}
	q.pages = make([]state, 1, cfg.Capacity+1) // slot 0 is the zero Handle
	if q.identFn == nil {
		q.ids = make([]ident, 1, cfg.Capacity+1)
	}
	return q, nil
}
