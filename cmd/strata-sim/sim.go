package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/placement"
)

// variant is one policy configuration the simulator compares.
type variant struct {
	name string
	kind eviction.Kind
	// plain: the textbook algorithm, no leaf-first (what a plain store does).
	plain bool
	// hints: parents learn of resident children on other nodes; a page
	// that loses its parent, and every resident descendant, learns it is an
	// orphan (the node's parent-gone notices); clients mark the resident
	// pages they find past a broken chain as orphans.
	hints bool
	// worthHints: with hints, each page's Worth is passed up to its
	// parent's owner (SetChildWorth) whenever it changes, so that a page is
	// valued at least as much as its best resident descendant.
	worthHints bool
	// capAdmit: KindCost's Admit also compares a put with the victim
	// (eviction.Config.CapacityAdmission).
	capAdmit bool
	// global: a coordinator merges node summaries into cutoffs every epoch;
	// puts spill to the second placement candidate by pressure or when the
	// owner refuses them.
	global bool
	// floor: with global, nodes also refuse puts worth less than the
	// cluster-wide cutoff.
	floor bool
	// belady: offline, evicts the page whose next use is farthest.
	belady bool
	// infinite: no capacity limit.
	infinite bool
	// flatCost: pass every page a cost hint of the same FLOPs per token
	// (depth-0 pages' cost), i.e. the cost model switched off.
	flatCost bool
	// dropOrphans: with hints, a page is dropped as soon as its parent's
	// drop reaches it (unless pinned), not only first when room is needed;
	// pages a client reports past a miss are only marked.
	dropOrphans bool
	// noNotice: with hints, a page learns it is an orphan only from a
	// client's lookup, not when its parent is dropped (no parent-gone
	// notices).
	noNotice bool
}

// variants is every policy the simulator knows, in report order.
func variants() []variant {
	return []variant{
		{name: "lru", kind: eviction.KindLRU, plain: true},
		{name: "lfu", kind: eviction.KindLFU, plain: true},
		{name: "gdsf-bytes", kind: eviction.KindGDSFBytes, plain: true},
		{name: "lru-leaf", kind: eviction.KindLRU, hints: true},
		{name: "ours-nohints", kind: eviction.KindCost},
		{name: "ours-noworth", kind: eviction.KindCost, hints: true, dropOrphans: true},
		{name: "ours-costblind", kind: eviction.KindCost, hints: true, worthHints: true, flatCost: true, dropOrphans: true},
		{name: "ours-admit", kind: eviction.KindCost, hints: true, worthHints: true, capAdmit: true, dropOrphans: true},
		{name: "ours-nonotice", kind: eviction.KindCost, hints: true, worthHints: true, dropOrphans: true, noNotice: true},
		{name: "ours-node", kind: eviction.KindCost, hints: true, worthHints: true, dropOrphans: true},
		{name: "ours-global", kind: eviction.KindCost, hints: true, worthHints: true, global: true, dropOrphans: true},
		{name: "ours-global-floor", kind: eviction.KindCost, hints: true, worthHints: true, global: true, floor: true, dropOrphans: true},
		{name: "belady", kind: eviction.KindOffline, hints: true, belady: true},
		{name: "infinite", kind: eviction.KindLRU, infinite: true},
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
	admitShare float64 // share of the cutoff below which puts are refused (floor variants); 0 default
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
	evictions   int64
	rejected    int64 // puts not admitted anywhere
	spilled     int64 // puts placed on the second candidate
	capacity    int64
	reqs        int
	pagesStored int64
}

func (r result) savedFrac() float64 { return r.flopsSaved / r.flopsTotal }
func (r result) hitFrac() float64   { return float64(r.hitTokens) / float64(r.tokens) }

type simNode struct {
	q        *eviction.Queue
	capacity int64
	used     int64
	block    []int32 // block id by handle
}

// cluster replays a trace over simulated nodes.
type cluster struct {
	t     *trace
	cfg   simConfig
	view  *placement.View
	nodes []simNode
	bpt   int64 // KV bytes per token

	owner    []int8 // placement owner of each block
	where    []int8 // node holding each block, -1 if none
	handle   []eviction.Handle
	resKids  []int32 // resident children of each block, cluster-wide
	orphaned int64   // bytes resident whose parent is not
	capTotal int64

	cand   [2]int
	pinned []int32
	stack  []int32 // markOrphans' work list
	// Global variant: the nodes' summaries and what the coordinator made
	// of them.
	sums        []eviction.Summary
	caps        []int64
	lastEvicted []int64
	cutoffs     eviction.Cutoffs

	res result

	// onEvict, when set, is called before a block is evicted (tests check
	// invariants there).
	onEvict func(node int, b int32)
}

func newCluster(t *trace, cfg simConfig) (*cluster, error) {
	c := &cluster{t: t, cfg: cfg, bpt: cfg.profile.KVBytesPerToken()}
	nodes := make([]placement.Node, len(cfg.capacities))
	for i, capacity := range cfg.capacities {
		w := float64(capacity)
		if cfg.equalPlace {
			w = 1
		}
		nodes[i] = placement.Node{ID: nodeID(cfg.seed, i), Weight: w}
		c.capTotal += capacity
	}
	view, err := placement.NewView(nodes)
	if err != nil {
		return nil, err
	}
	c.view = view
	// View indices are in ID order, which is the order above.
	for i := range cfg.capacities {
		pages := int(cfg.capacities[i] / cfg.profile.PageBytes(0))
		q, err := eviction.New(eviction.Config{Kind: cfg.variant.kind, Profile: cfg.profile, Plain: cfg.variant.plain,
			Capacity: pages, CapacityAdmission: cfg.variant.capAdmit, HalfLife: int(cfg.halfLife * float64(pages)),
			AdmitShare: cfg.admitShare})
		if err != nil {
			return nil, err
		}
		capacity := cfg.capacities[i]
		if cfg.variant.infinite {
			capacity = math.MaxInt64
		} else {
			q.SetCapacity(capacity)
		}
		c.nodes = append(c.nodes, simNode{q: q, capacity: capacity, block: make([]int32, 1, 1024)})
	}
	c.where = make([]int8, len(t.blocks))
	c.owner = make([]int8, len(t.blocks))
	for i := range c.where {
		c.where[i] = -1
		c.owner[i] = int8(view.Owner(t.blocks[i].key))
	}
	c.handle = make([]eviction.Handle, len(t.blocks))
	c.resKids = make([]int32, len(t.blocks))
	c.res = result{variant: cfg.variant.name, seed: cfg.seed, sizePct: cfg.sizePct, capacity: c.capTotal, reqs: len(t.reqs)}
	return c, nil
}

// nodeID names node i; IDs sort in index order, so View indices match.
func nodeID(seed, i int) string {
	if seed == 0 {
		return fmt.Sprintf("node-%03d", i)
	}
	return fmt.Sprintf("s%d-node-%03d", seed, i)
}

// keyWord is the 64-bit key hash policies take: the key's first 8 bytes.
func keyWord(k [32]byte) uint64 { return binary.LittleEndian.Uint64(k[:8]) }

func (c *cluster) blockBytes(b int32) int64 { return int64(c.t.blocks[b].tokens) * c.bpt }

func (c *cluster) page(b int32) eviction.Page {
	bl := &c.t.blocks[b]
	p := eviction.Page{Key: keyWord(bl.key), Bytes: c.blockBytes(b), Depth: bl.depth, Tokens: int(bl.tokens)}
	if c.cfg.variant.flatCost {
		p.Cost = c.cfg.profile.PageFLOPs(0, 0) * float64(bl.tokens) / float64(c.cfg.profile.PageTokens)
	}
	return p
}

// run replays every request.
func (c *cluster) run() result {
	for i := range c.t.reqs {
		if c.cfg.variant.global && i%c.cfg.epoch == 0 {
			c.coordinate()
		}
		c.request(i)
		frac := float64(c.orphaned) / float64(c.capTotal)
		c.res.orphanMean += frac / float64(len(c.t.reqs))
		c.res.orphanMax = max(c.res.orphanMax, frac)
	}
	return c.res
}

// request replays one request: look up its pages, count the hit prefix,
// then put the pages it had to recompute.
func (c *cluster) request(ri int) {
	req := &c.t.reqs[ri]
	for _, b := range req.blocks {
		// The client asks every page's owner; owners count the demand.
		c.nodes[c.owner[b]].q.Record(keyWord(c.t.blocks[b].key))
	}
	hitTok := 0
	hit := 0
	for _, b := range req.blocks {
		if c.where[b] < 0 {
			break
		}
		n := &c.nodes[c.where[b]]
		h := c.handle[b]
		n.q.Hit(h)
		n.q.Pin(h) // the engine's lease while it loads the prefix
		c.pinned = append(c.pinned, b)
		hitTok += int(c.t.blocks[b].tokens)
		hit++
	}
	hitTok = min(hitTok, req.tokens)
	prof := c.cfg.profile
	c.res.flopsSaved += prof.PrefillFLOPs(float64(hitTok))
	c.res.flopsTotal += prof.PrefillFLOPs(float64(req.tokens))
	c.res.hitTokens += int64(hitTok)
	c.res.tokens += int64(req.tokens)

	if c.cfg.variant.belady {
		for _, b := range req.blocks {
			if c.where[b] >= 0 {
				c.nodes[c.where[b]].q.SetPriority(c.handle[b], c.offlinePrio(b, ri))
			}
		}
	}
	for _, b := range req.blocks[hit:] {
		if c.where[b] >= 0 {
			continue // published already; re-attached by its parent's put
		}
		if !c.put(b, ri, req.blocks[len(req.blocks)-1]) {
			c.res.rejected++
			break // the chain is cut: later pages could never be hit
		}
	}
	if c.cfg.variant.worthHints {
		// The hits and puts changed the worth of the request's resident
		// chain: pass it up from its deepest resident page.
		for i := len(req.blocks) - 1; i >= 0; i-- {
			if b := req.blocks[i]; c.where[b] >= 0 {
				c.passWorth(b, false)
				break
			}
		}
	}
	for _, b := range c.pinned {
		c.nodes[c.where[b]].q.Unpin(c.handle[b])
	}
	c.pinned = c.pinned[:0]
	if c.cfg.variant.hints {
		// The client saw which pages are present; a present page whose
		// parent is not is an orphan, and it tells the page's owner.
		for _, b := range req.blocks {
			if p := c.t.blocks[b].parent; c.where[b] >= 0 && p >= 0 && c.where[p] < 0 {
				c.markOrphans(b, true, false)
			}
		}
	}
}

// offlinePrio is Belady's priority: minus the index of the next request
// that uses b after ri (farthest first), deeper pages first among equals.
func (c *cluster) offlinePrio(b int32, ri int) float64 {
	u := c.t.blocks[b].uses
	i, _ := slices.BinarySearch(u, int32(ri+1))
	next := float64(math.MaxInt32)
	if i < len(u) {
		next = float64(u[i])
	}
	return -next*1024 - float64(min(c.t.blocks[b].depth, 1023))
}

// put stores block b (recomputed by request ri, whose last block is leaf)
// on its owner, evicting as the owner's policy says, or reports that it was
// not admitted. Like a client's put, it tells the policy how deep the
// sequence put along with b goes (Page.ChainDepth).
func (c *cluster) put(b int32, ri int, leaf int32) bool {
	p := c.page(b)
	if l := c.page(leaf); l.Depth > p.Depth {
		p.ChainDepth, p.ChainCost = l.Depth, l.Cost
	}
	cand := c.view.Candidates(c.t.blocks[b].key, c.cand[:])
	target := cand[0]
	if c.cfg.variant.global {
		var ok bool
		if target, p, ok = c.place(p, cand); !ok {
			return false
		}
	} else if !c.nodes[target].q.Admit(p) {
		return false
	}
	n := &c.nodes[target]
	for n.used+p.Bytes > n.capacity {
		h, ok := n.q.Victim()
		if !ok {
			return false
		}
		c.evict(target, h)
	}
	h := n.q.Insert(p)
	if c.cfg.variant.belady {
		n.q.SetPriority(h, c.offlinePrio(b, ri))
	}
	for int(h) >= len(n.block) {
		n.block = append(n.block, -1)
	}
	n.block[h] = b
	n.used += p.Bytes
	c.where[b], c.handle[b] = int8(target), h
	c.res.pagesStored++
	n.q.Pin(h) // the writer's reservation until the request ends
	c.pinned = append(c.pinned, b)
	c.link(b, target, h)
	return true
}

// link does the parent/child bookkeeping of a newly resident block.
func (c *cluster) link(b int32, node int, h eviction.Handle) {
	hints := c.cfg.variant.hints
	bl := &c.t.blocks[b]
	if p := bl.parent; p >= 0 {
		if pn := c.where[p]; pn >= 0 {
			c.resKids[p]++
			if local := int(pn) == node; local || hints {
				c.nodes[pn].q.ChildAdded(c.handle[p], local)
			}
			if hints && c.nodes[pn].q.Orphan(c.handle[p]) {
				c.nodes[node].q.SetOrphan(h, true) // an ancestor is absent
			}
		} else {
			c.orphaned += c.blockBytes(b)
			if hints {
				c.nodes[node].q.SetOrphan(h, true)
			}
		}
	}
	for _, k := range bl.children {
		kn := c.where[k]
		if kn < 0 {
			continue
		}
		c.resKids[b]++
		c.orphaned -= c.blockBytes(k)
		if local := int(kn) == node; local || hints {
			c.nodes[node].q.ChildAdded(h, local)
		}
		if hints {
			c.markOrphans(k, c.nodes[node].q.Orphan(h), false)
		}
	}
}

// evict drops the block behind handle h from node ni.
func (c *cluster) evict(ni int, h eviction.Handle) {
	n := &c.nodes[ni]
	b := n.block[h]
	if c.onEvict != nil {
		c.onEvict(ni, b)
	}
	n.q.Evict(h)
	n.block[h] = -1
	n.used -= c.blockBytes(b)
	c.where[b] = -1
	c.res.evictions++
	bl := &c.t.blocks[b]
	if p := bl.parent; p >= 0 {
		if pn := c.where[p]; pn >= 0 {
			c.resKids[p]--
			if local := int(pn) == ni; local || c.cfg.variant.hints {
				c.nodes[pn].q.ChildRemoved(c.handle[p], local)
			}
			if c.cfg.variant.worthHints {
				c.passWorth(p, true)
			}
		} else {
			c.orphaned -= c.blockBytes(b)
		}
	}
	if c.resKids[b] > 0 {
		for _, k := range bl.children {
			if c.where[k] >= 0 {
				c.orphaned += c.blockBytes(k)
				if c.cfg.variant.hints && !c.cfg.variant.noNotice {
					c.markOrphans(k, true, c.cfg.variant.dropOrphans)
				}
			}
		}
		c.resKids[b] = 0
	}
}

// markOrphans sets the orphan mark of resident block b and, where it
// changes, of its resident descendants: a page is an orphan while any
// ancestor is absent (its owner learns it from its parent's owner, who
// learnt it from the grandparent's, and so on). With dropNow (a parent-gone
// notice, not a client's report), the pages newly marked are dropped,
// deepest first, unless pinned.
func (c *cluster) markOrphans(b int32, orphan, dropNow bool) {
	stack := append(c.stack[:0], b)
	var drop []int32
	for len(stack) > 0 {
		b := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		q := c.nodes[c.where[b]].q
		if q.Orphan(c.handle[b]) == orphan {
			continue
		}
		q.SetOrphan(c.handle[b], orphan)
		if orphan && dropNow && !q.Pinned(c.handle[b]) {
			drop = append(drop, b)
		}
		for _, k := range c.t.blocks[b].children {
			if c.where[k] >= 0 {
				stack = append(stack, k)
			}
		}
	}
	c.stack = stack
	// Descendants come after their ancestors in drop: evict from the end,
	// leaves first.
	for i := len(drop) - 1; i >= 0; i-- {
		if b := drop[i]; c.where[b] >= 0 {
			c.evict(int(c.where[b]), c.handle[b])
		}
	}
}

// passWorth recomputes the best Worth among resident block b's resident
// children, tells b's owner (SetChildWorth), and carries on with b's parent
// while there is one (the value hints, idealised as instant); with
// stopEarly, only while b's own Worth changes (after an eviction: nothing
// else moved).
func (c *cluster) passWorth(b int32, stopEarly bool) {
	for ; b >= 0 && c.where[b] >= 0; b = c.t.blocks[b].parent {
		w := 0.0
		if c.resKids[b] > 0 {
			for _, k := range c.t.blocks[b].children {
				if kn := c.where[k]; kn >= 0 {
					w = max(w, c.nodes[kn].q.Worth(c.handle[k]))
				}
			}
		}
		q, h := c.nodes[c.where[b]].q, c.handle[b]
		before := q.Value(h)
		q.SetChildWorth(h, w)
		if stopEarly && q.Value(h) == before {
			return
		}
	}
}
