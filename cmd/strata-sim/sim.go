package main

import (
	"fmt"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/placement"
)

// variant is one policy configuration the simulator compares. A variant
// with store set runs real stores (stores.go); the others are baselines
// replayed over bare eviction queues (baseline.go).
type variant struct {
	name string
	kind eviction.Kind
	// store: each node is a store.Store (the shipped bookkeeping: leaf-first
	// links, evictions, orphans, hints, admission) over a heap tier.
	store bool
	// hints: the stores' child, value and parent-gone hints reach the nodes
	// they are for (as the node's hint sender routes them), and clients
	// tell nodes of the pages they find past a miss (store.MarkOrphans).
	hints bool
	// noWorth: with hints, value hints (ChildHint.Worth) are not delivered;
	// worth still passes up to parents on the same node.
	noWorth bool
	// noNotice: with hints, parent-gone notices are not delivered: a page
	// learns it is an orphan only from a client's lookup.
	noNotice bool
	// flatCost: every put carries a cost hint of the same FLOPs per token
	// (depth-0 pages' cost), i.e. the cost model switched off.
	flatCost bool
	// capAdmit: the stores also refuse a put worth less than their victim
	// (store.EvictionTuning.CapacityAdmission).
	capAdmit bool
	// global: a coordinator merges the stores' summaries into cutoffs
	// (coord.Compute) every epoch and the stores take them as their
	// admission floor, as nodes do by default; a client puts a page its
	// owner refuses on the second placement candidate.
	global bool
	// plain: a baseline queue without leaf-first ordering.
	plain bool
	// belady: offline, evicts the page whose next use is farthest.
	belady bool
	// single: one cache of the whole cluster's capacity instead of one
	// per node (every page has the same owner).
	single bool
	// bypass: with belady, a put whose next use is no sooner than the
	// victim's is not stored (nor the rest of its request's pages, whose
	// next uses are no sooner), and puts are not pinned: the bound for
	// policies that may refuse a put.
	bypass bool
	// infinite: no capacity limit.
	infinite bool
	// halfLife, when > 0, fixes the cost policy's half-life for this
	// variant whatever --half-life says: the sweep's candidates (sweep.go).
	halfLife float64
}

// bound is the Belady form a variant is measured against: belady-bypass
// (one cache that may refuse a put) for policies that refuse puts or move
// them to another node, belady (per node, storing every put) for the
// others; "" for the bounds themselves.
func (v variant) bound() string {
	switch {
	case v.belady || v.infinite:
		return ""
	case v.store && v.kind == eviction.KindCost:
		return "belady-bypass"
	}
	return "belady"
}

// variants is every policy the simulator knows, in report order.
func variants() []variant {
	return []variant{
		{name: "lru", kind: eviction.KindLRU, plain: true},
		{name: "lfu", kind: eviction.KindLFU, plain: true},
		{name: "gdsf-bytes", kind: eviction.KindGDSFBytes, plain: true},
		{name: "lru-leaf", kind: eviction.KindLRU, store: true, hints: true},
		{name: "ours-nohints", kind: eviction.KindCost, store: true},
		{name: "ours-noworth", kind: eviction.KindCost, store: true, hints: true, noWorth: true},
		{name: "ours-costblind", kind: eviction.KindCost, store: true, hints: true, flatCost: true},
		{name: "ours-admit", kind: eviction.KindCost, store: true, hints: true, capAdmit: true},
		{name: "ours-nonotice", kind: eviction.KindCost, store: true, hints: true, noNotice: true},
		{name: "ours-node", kind: eviction.KindCost, store: true, hints: true},
		{name: "ours-global", kind: eviction.KindCost, store: true, hints: true, global: true},
		{name: "belady", kind: eviction.KindOffline, plain: true, belady: true},
		{name: "belady-bypass", kind: eviction.KindOffline, plain: true, belady: true, single: true, bypass: true},
		{name: "infinite", kind: eviction.KindLRU, plain: true, infinite: true},
	}
}

func variantByName(name string) (variant, bool) {
	for _, v := range variants() {
		if v.name == name {
			return v, true
		}
	}
	return variant{}, false
}

// simConfig is one replay: a variant over a cluster of given capacities.
type simConfig struct {
	variant    variant
	profile    eviction.ComputeProfile
	capacities []int64 // bytes per node
	epoch      int     // requests between cutoff recomputations (global)
	sizePct    float64 // for the report
	seed       int     // placement seed: changes the node IDs, so which node owns what
	equalPlace bool    // placement weights all equal instead of the capacities
	halfLife   float64 // KindCost half-life in page operations per page of capacity; 0 default
	history    float64 // KindCost frequency history in keys per page of capacity; 0 default
	admitShare float64 // share of the cutoff below which puts are refused (global); 0 default
}

// result is what one replay measured.
type result struct {
	variant     string
	seed        int
	sizePct     float64
	flopsSaved  float64 // Σ F(hit tokens)
	flopsTotal  float64 // Σ F(input tokens)
	hitTokens   int64
	tokens      int64
	orphanMean  float64 // mean over requests of orphaned bytes / capacity
	orphanMax   float64
	evictions   int64 // pages dropped: to make room, or as orphans
	rejected    int64 // puts not admitted anywhere
	spilled     int64 // puts placed on the second candidate
	capacity    int64 // bytes, all nodes
	blocks      int64 // pages, all nodes
	reqs        int
	pagesStored int64
	// choices is, per node, the setting its queue held (last tier;
	// eviction.Candidate.String) at each of plotColumns points of the
	// replay, for the variants whose queues choose one (choices.go).
	choices [][]string
}

func (r result) savedFrac() float64 { return r.flopsSaved / r.flopsTotal }
func (r result) hitFrac() float64   { return float64(r.hitTokens) / float64(r.tokens) }

// replay runs one configuration over the trace.
func replay(t *trace, cfg simConfig) (result, error) {
	if cfg.variant.single {
		var sum int64 // the nodes' whole pages: the same capacity
		page := cfg.profile.PageBytes(0)
		for _, c := range cfg.capacities {
			sum += c / page * page
		}
		cfg.capacities = []int64{sum}
	}
	if cfg.variant.store {
		c, err := newStoreCluster(t, cfg)
		if err != nil {
			return result{}, err
		}
		defer c.close()
		return c.run()
	}
	c, err := newBaseline(t, cfg)
	if err != nil {
		return result{}, err
	}
	return c.run(), nil
}

// nodeID names node i; IDs sort in index order, so View indices match.
func nodeID(seed, i int) string {
	if seed == 0 {
		return fmt.Sprintf("node-%03d", i)
	}
	return fmt.Sprintf("s%d-node-%03d", seed, i)
}

// layout is what both engines share: the placement of every block, the
// page size, the nodes' capacities in whole pages, and the measurement of
// residency and orphaned bytes.
type layout struct {
	t        *trace
	cfg      simConfig
	view     *placement.View
	owner    []int8 // placement owner of each block
	pageSize int64  // KV bytes of a whole page: every block is stored whole
	pages    []int64
	capTotal int64 // bytes, all nodes
	res      residency
	out      result
	cand     [2]int
}

func newLayout(t *trace, cfg simConfig) (layout, error) {
	l := layout{t: t, cfg: cfg, pageSize: cfg.profile.PageBytes(0)}
	nodes := make([]placement.Node, len(cfg.capacities))
	for i, capacity := range cfg.capacities {
		w := float64(capacity)
		if cfg.equalPlace {
			w = 1
		}
		nodes[i] = placement.Node{ID: nodeID(cfg.seed, i), Weight: w}
		l.pages = append(l.pages, capacity/l.pageSize)
		l.capTotal += capacity / l.pageSize * l.pageSize
	}
	view, err := placement.NewView(nodes)
	if err != nil {
		return layout{}, err
	}
	l.view = view
	l.owner = make([]int8, len(t.blocks))
	for i := range l.owner {
		l.owner[i] = int8(view.Owner(t.blocks[i].key))
	}
	l.res = newResidency(t, l.pageSize)
	l.out = result{variant: cfg.variant.name, seed: cfg.seed, sizePct: cfg.sizePct, capacity: l.capTotal,
		blocks: l.capTotal / l.pageSize, reqs: len(t.reqs)}
	return l, nil
}

// count adds request req's figures given its hit prefix of hit blocks.
func (l *layout) count(req *request, hit int) {
	hitTok := 0
	for _, b := range req.blocks[:hit] {
		hitTok += int(l.t.blocks[b].tokens)
	}
	hitTok = min(hitTok, req.tokens)
	prof := l.cfg.profile
	l.out.flopsSaved += prof.PrefillFLOPs(float64(hitTok))
	l.out.flopsTotal += prof.PrefillFLOPs(float64(req.tokens))
	l.out.hitTokens += int64(hitTok)
	l.out.tokens += int64(req.tokens)
}

// measure records the orphaned bytes after a request.
func (l *layout) measure() {
	frac := float64(l.res.orphaned) / float64(l.capTotal)
	l.out.orphanMean += frac / float64(len(l.t.reqs))
	l.out.orphanMax = max(l.out.orphanMax, frac)
}

// residency is where each block is resident, for the figures: which node
// holds it, how many of its children are resident anywhere, and the bytes
// of resident blocks whose parent is resident nowhere.
type residency struct {
	t        *trace
	size     int64 // bytes per block
	where    []int8
	resKids  []int32
	orphaned int64
}

func newResidency(t *trace, size int64) residency {
	r := residency{t: t, size: size, where: make([]int8, len(t.blocks)), resKids: make([]int32, len(t.blocks))}
	for i := range r.where {
		r.where[i] = -1
	}
	return r
}

// arrive records that b became resident on node.
func (r *residency) arrive(b int32, node int) {
	r.where[b] = int8(node)
	bl := &r.t.blocks[b]
	if p := bl.parent; p >= 0 {
		if r.where[p] >= 0 {
			r.resKids[p]++
		} else {
			r.orphaned += r.size
		}
	}
	for _, k := range bl.children {
		if r.where[k] >= 0 {
			r.resKids[b]++
			r.orphaned -= r.size
		}
	}
}

// leave records that b stopped being resident.
func (r *residency) leave(b int32) {
	r.where[b] = -1
	bl := &r.t.blocks[b]
	if p := bl.parent; p >= 0 {
		if r.where[p] >= 0 {
			r.resKids[p]--
		} else {
			r.orphaned -= r.size
		}
	}
	if r.resKids[b] > 0 {
		for _, k := range bl.children {
			if r.where[k] >= 0 {
				r.orphaned += r.size
			}
		}
		r.resKids[b] = 0
	}
}
