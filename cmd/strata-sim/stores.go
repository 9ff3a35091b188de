package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// simPageBytes is the size of a page in the simulated stores. A trace's
// pages are far too large to hold (a 512-token page of the default model
// is 160 MiB, and the trace has 6.5 TiB of them), so each page holds
// simPageBytes (its block id and zeros) and each node's tier holds as many
// of them as the node's capacity holds whole pages. Every page has the same
// size, so this changes no decision: worth is reuse × cost ÷ bytes, and
// every cutoff and capacity is scaled alike. Figures are reported in the
// trace's bytes.
const simPageBytes = 64

// maxHintRounds bounds the rounds of hint delivery after one step: a
// parent-gone notice can drop pages whose own notices go on (an orphaned
// sequence unravels across nodes), a few hops at most in practice.
const maxHintRounds = 64

// storeCluster replays a trace over real stores, one per node, each over a
// heap tier of its capacity in pages, as a cluster of nodes and clients
// would drive them:
//
//   - lookup: each page is asked of the node that holds it (the client's
//     location cache) or else its owner, with a lease; the hit prefix is
//     the run of present pages from the first; with hints, the pages found
//     past it are reported to their nodes (MarkOrphans);
//   - put: the pages from the first miss on that are not resident, each on
//     its owner, one Reserve per node; a page the node does not admit goes
//     to its second placement candidate; the pages stored past one that no
//     candidate admitted are deleted (they could never be hit);
//   - the leases end, and with hints every store's hints reach the nodes
//     they are for, routed as the node's hint sender routes them
//     (peer.Coalesce, peer.RouteKnown with each node's peer.Holders),
//     after the lookups and again after the puts;
//   - global: every epoch requests the coordinator's round logic
//     (coord.Compute) turns the stores' summaries into cutoffs, which the
//     stores take as their admission floor (global.go).
//
// The figures come from the stores' answers and from their tiers, which
// report every page that leaves (simTier).
type storeCluster struct {
	layout
	ns    store.Namespace
	nodes []*simNode
	page  []byte // the page being written
	// leased is the current request's hit prefix, leased until its puts
	// are done; onLeave, when set, sees every page that leaves a node
	// (tests check invariants there).
	leased  []int32
	onLeave func(b int32, node int)
}

// simNode is one simulated node.
type simNode struct {
	idx  int
	st   *store.Store
	tier *simTier

	mu      sync.Mutex // guards pending: the store's hinter may hand hints over too
	pending []store.ChildHint
	spare   []store.ChildHint // the slice delivered last time, deliver's own

	// known is who sent this node child or value hints, by parent: its
	// parent-gone notices go there, as a node's sender sends them.
	known peer.Holders
}

func newStoreCluster(t *trace, cfg simConfig) (*storeCluster, error) {
	l, err := newLayout(t, cfg)
	if err != nil {
		return nil, err
	}
	c := &storeCluster{layout: l, page: make([]byte, simPageBytes)}
	prof := cfg.profile
	f1, f2 := prof.PrefillFLOPs(1), prof.PrefillFLOPs(2)
	quad := (f2 - 2*f1) / 2 // F(s) = a·s + b·s²
	c.ns = store.Namespace{ID: namespace.ID{1}, Tenant: "sim", PageBytes: simPageBytes, Checksum: namespace.CRC32C,
		PageTokens: uint32(prof.PageTokens), FLOPsLinear: f1 - quad, FLOPsQuadratic: quad}
	v := cfg.variant
	for i, pages := range l.pages {
		heap, err := tiers.NewHeap(max(pages, 1) * simPageBytes)
		if err != nil {
			c.close()
			return nil, err
		}
		n := &simNode{idx: i, tier: &simTier{Heap: heap, node: i, blocks: make(map[int64]int32), left: c.left}}
		// ReserveShare 1: the trace's one tenant has no other to keep room
		// for (store/quota.go, "The reservation share").
		scfg := store.Config{Tiers: []tiers.Tier{n.tier}, Eviction: v.kind, OrphanGrace: -1, ReserveShare: 1,
			Tuning: store.EvictionTuning{HalfLife: cfg.halfLife, History: cfg.history, AdmitShare: cfg.admitShare, CapacityAdmission: v.capAdmit},
			Logger: slog.New(slog.DiscardHandler)}
		if v.hints {
			scfg.OnRemoteParent = n.queue
		}
		if n.st, err = store.New(scfg); err != nil {
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		if err := n.st.AddNamespace(c.ns); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

func (c *storeCluster) close() {
	for _, n := range c.nodes {
		n.st.Close()
		n.tier.Close()
	}
}

// queue is a store's Config.OnRemoteParent: hints wait for deliver.
func (n *simNode) queue(h []store.ChildHint) {
	n.mu.Lock()
	n.pending = append(n.pending, h...)
	n.mu.Unlock()
}

// left is told by a node's tier that block b's extent was freed there.
func (c *storeCluster) left(b int32, node int) {
	if int(c.res.where[b]) != node {
		return // a reservation that was never published here
	}
	if c.onLeave != nil {
		c.onLeave(b, node)
	}
	c.res.leave(b)
	c.out.evictions++
}

// run replays every request.
func (c *storeCluster) run() (result, error) {
	for i := range c.t.reqs {
		if c.cfg.variant.global && i%c.cfg.epoch == 0 {
			if err := c.coordinate(uint64(i / c.cfg.epoch)); err != nil {
				return result{}, err
			}
		}
		if err := c.request(i); err != nil {
			return result{}, fmt.Errorf("request %d: %w", i, err)
		}
		c.measure()
		if n := len(c.t.reqs); (i+1)*plotColumns/n > i*plotColumns/n {
			c.recordChoices() // plotColumns times, evenly
		}
	}
	return c.out, nil
}

// request replays one request.
func (c *storeCluster) request(ri int) error {
	req := &c.t.reqs[ri]
	present, leases, err := c.lookup(req)
	if err != nil {
		return err
	}
	hit := len(req.blocks)
	for i, p := range present {
		if !p {
			hit = i
			break
		}
	}
	c.count(req, hit)
	c.leased = req.blocks[:hit]
	if c.cfg.variant.hints {
		if err := c.reportOrphans(req, present, hit); err != nil {
			return err
		}
		c.deliver()
	}
	if err := c.put(req, hit); err != nil {
		return err
	}
	for node, id := range leases {
		if id != 0 {
			if err := c.nodes[node].st.Reader().ReleaseLease(c.ns.ID, id); err != nil {
				return err
			}
		}
	}
	c.leased = nil
	c.deliver()
	return nil
}

// holder is the node a client asks for block b: where it is, else its
// owner.
func (c *storeCluster) holder(b int32) int {
	if w := c.res.where[b]; w >= 0 {
		return int(w)
	}
	return int(c.owner[b])
}

// lookup asks every page's holder, with a lease per node, and returns
// which pages are present and each node's lease (0: none).
func (c *storeCluster) lookup(req *request) ([]bool, []uint64, error) {
	all := make([]int, len(req.blocks))
	for i := range all {
		all[i] = i
	}
	groups := c.group(req.blocks, c.holder, all)
	present := make([]bool, len(req.blocks))
	leases := make([]uint64, len(c.nodes))
	for node, idx := range groups {
		if len(idx) == 0 {
			continue
		}
		keys := c.keys(req.blocks, idx)
		lr, err := c.nodes[node].st.Reader().Lookup(c.ns.ID, keys, true, 0)
		if err != nil {
			return nil, nil, err
		}
		for j, i := range idx {
			present[i] = lr.Present[j]
			if lr.Present[j] != (c.res.where[req.blocks[i]] >= 0) {
				return nil, nil, fmt.Errorf("block %d: node %d answers present %v, its tier says resident %v",
					req.blocks[i], node, lr.Present[j], c.res.where[req.blocks[i]] >= 0)
			}
		}
		if lr.Lease != nil {
			leases[node] = lr.Lease.ID
		}
	}
	return present, leases, nil
}

// reportOrphans tells the nodes holding pages present past the hit prefix
// that they are orphans, as a cluster client does.
func (c *storeCluster) reportOrphans(req *request, present []bool, hit int) error {
	var past []int
	for i := hit + 1; i < len(req.blocks); i++ {
		if present[i] {
			past = append(past, i)
		}
	}
	return c.onHolders(req, past, func(st *store.Store, keys []namespace.Key) error {
		_, err := st.Reader().MarkOrphans(c.ns.ID, keys)
		return err
	})
}

// onHolders calls f on each node holding some of the request's pages idx
// (indices into req.blocks) with their keys.
func (c *storeCluster) onHolders(req *request, idx []int, f func(*store.Store, []namespace.Key) error) error {
	if len(idx) == 0 {
		return nil
	}
	for node, g := range c.group(req.blocks, c.holder, idx) {
		if len(g) > 0 {
			if err := f(c.nodes[node].st, c.keys(req.blocks, g)); err != nil {
				return err
			}
		}
	}
	return nil
}

// put publishes the request's pages from the first miss on that are not
// resident (a cluster client's location cache answers EXISTS for those
// without asking): each on its owner, then the pages a node did not admit
// on their second placement candidate, as client.Namespace.Put
// does (in parallel per node: a page refused everywhere does not keep its
// descendants on other nodes from being stored, so they are deleted after
// the put, dropPast).
func (c *storeCluster) put(req *request, hit int) error {
	todo := make([]int, 0, len(req.blocks)-hit)
	for i := hit; i < len(req.blocks); i++ {
		if c.res.where[req.blocks[i]] < 0 { // the location cache answers EXISTS for the others
			todo = append(todo, i)
		}
	}
	refused, err := c.publish(req, c.group(req.blocks, c.holder, todo))
	if err != nil || len(refused) == 0 {
		return err
	}
	second := func(b int32) int {
		cand := c.view.Candidates(c.t.blocks[b].key, c.cand[:])
		if len(cand) < 2 {
			return -1
		}
		return cand[1]
	}
	gap := len(req.blocks) // the first page stored nowhere
	for _, i := range refused {
		if second(req.blocks[i]) < 0 {
			c.out.rejected++
			gap = min(gap, i)
		}
	}
	again, err := c.publish(req, c.group(req.blocks, second, refused))
	if err != nil {
		return err
	}
	c.out.rejected += int64(len(again))
	for _, i := range refused {
		if !slices.Contains(again, i) && c.res.where[req.blocks[i]] >= 0 {
			c.out.spilled++
		}
	}
	for _, i := range again {
		gap = min(gap, i)
	}
	return c.dropPast(req, todo, gap)
}

// dropPast deletes the pages the put stored past index gap, a page it
// stored nowhere, as client.Namespace.Put does: the put stores a
// sequence in parallel per node, so the descendants of a page every
// candidate refused are stored all the same, orphans from birth that no
// parent-gone notice ever names (their parent never was anywhere). todo
// is the put's pages, in sequence order.
func (c *storeCluster) dropPast(req *request, todo []int, gap int) error {
	var past []int
	for _, i := range slices.Backward(todo) { // leaf first, as the stores drop pages
		if i > gap && c.res.where[req.blocks[i]] >= 0 {
			past = append(past, i)
		}
	}
	return c.onHolders(req, past, func(st *store.Store, keys []namespace.Key) error {
		_, err := st.Publisher().Delete(c.ns.ID, keys)
		return err
	})
}

// publish reserves, writes and commits the pages groups name (indices into
// req.blocks, by node) and returns those that were not admitted.
func (c *storeCluster) publish(req *request, groups [][]int) (refused []int, err error) {
	leaf := c.t.blocks[req.blocks[len(req.blocks)-1]].depth
	for node, idx := range groups {
		if len(idx) == 0 {
			continue
		}
		specs := make([]store.PageSpec, len(idx))
		for j, i := range idx {
			specs[j] = c.spec(req.blocks[i], leaf)
		}
		st := c.nodes[node].st
		rs, err := st.Publisher().Reserve(c.ns.ID, specs, 0)
		if err != nil {
			return nil, err
		}
		for j, r := range rs {
			b := req.blocks[idx[j]]
			switch r.Status {
			case store.Exists:
			case store.Rejected:
				if !errors.Is(r.Err, store.ErrNotAdmitted) && !errors.Is(r.Err, store.ErrNoSpace) {
					return nil, fmt.Errorf("block %d on node %d: %w", b, node, r.Err)
				}
				refused = append(refused, idx[j])
			case store.Reserved:
				if err := c.write(st, node, b, r.WriteID); err != nil {
					return nil, err
				}
			}
		}
	}
	return refused, nil
}

// write writes and commits block b's page under a reservation.
func (c *storeCluster) write(st *store.Store, node int, b int32, wid uint64) error {
	clear(c.page)
	binary.LittleEndian.PutUint32(c.page, uint32(b)+1)
	if err := st.Publisher().Write(c.ns.ID, wid, 0, c.page); err != nil {
		return err
	}
	cs, err := st.Publisher().Commit(c.ns.ID, wid, simPageBytes, namespace.CRC32C.Sum(c.page))
	if err != nil {
		return err
	}
	if cs != store.CommitCommitted {
		return fmt.Errorf("block %d on node %d: commit %s", b, node, cs)
	}
	c.res.arrive(b, node)
	c.out.pagesStored++
	return nil
}

// spec is block b's page spec; leaf is the depth of the deepest page of
// its request (the put's sequence).
func (c *storeCluster) spec(b int32, leaf uint32) store.PageSpec {
	bl := &c.t.blocks[b]
	s := store.PageSpec{Key: namespace.Key(bl.key), Depth: bl.depth, Size: simPageBytes}
	if bl.parent >= 0 {
		s.Parent, s.HasParent = namespace.Key(c.t.blocks[bl.parent].key), true
	}
	if leaf > bl.depth {
		s.ChainDepth = leaf
	}
	prof := c.cfg.profile
	switch {
	case c.cfg.variant.flatCost:
		s.CostHint = prof.PageFLOPs(0, 0) * float64(bl.tokens) / float64(prof.PageTokens)
	case int(bl.tokens) < prof.PageTokens:
		s.CostHint = prof.PageFLOPs(bl.depth, int(bl.tokens)) // a partial last page: what it really saves
	}
	return s
}

// group splits the indices idx of blocks by the node at returns for each
// (skipping -1), in order.
func (c *storeCluster) group(blocks []int32, at func(int32) int, idx []int) [][]int {
	groups := make([][]int, len(c.nodes))
	for _, i := range idx {
		if n := at(blocks[i]); n >= 0 {
			groups[n] = append(groups[n], i)
		}
	}
	return groups
}

func (c *storeCluster) keys(blocks []int32, idx []int) []namespace.Key {
	keys := make([]namespace.Key, len(idx))
	for j, i := range idx {
		keys[j] = namespace.Key(c.t.blocks[blocks[i]].key)
	}
	return keys
}

// deliver hands every store's pending hints to the nodes they are for,
// round after round until none are left (applying hints can drop pages,
// whose notices go on).
func (c *storeCluster) deliver() {
	if !c.cfg.variant.hints {
		return
	}
	for range maxHintRounds {
		moved := false
		for _, n := range c.nodes {
			n.st.Evictor().FlushHints()
			n.mu.Lock()
			hs := n.pending
			n.pending = n.spare[:0]
			n.mu.Unlock()
			n.spare = hs // reused once delivered: ApplyHints keeps nothing
			hs = c.filter(hs)
			if len(hs) == 0 {
				continue
			}
			moved = true
			hs = peer.Coalesce(hs)
			groups, _ := peer.RouteKnown(len(c.nodes), n.idx, c.candidatesOf, n.holders, hs)
			for to, g := range groups {
				if len(g) > 0 {
					c.nodes[to].known.Record(strconv.Itoa(n.idx), g)
					c.nodes[to].st.Evictor().ApplyHints(g)
				}
			}
		}
		if !moved {
			return
		}
	}
}

// holders is the nodes n knows to hold children of parent (peer.Holders
// by node index), which its parent-gone notice goes to.
func (n *simNode) holders(ns namespace.ID, parent namespace.Key, dst []int) []int {
	for _, id := range n.known.Take(ns, parent) {
		if i, err := strconv.Atoi(id); err == nil {
			dst = append(dst, i)
		}
	}
	return dst
}

// candidatesOf is the placement candidates of key (its owner, then the
// second candidate), as the node's hint sender finds them.
func (c *storeCluster) candidatesOf(key namespace.Key, dst []int) []int {
	return c.view.Candidates(key, dst)
}

// filter drops the hints the variant does without.
func (c *storeCluster) filter(hs []store.ChildHint) []store.ChildHint {
	v := c.cfg.variant
	if !v.noWorth && !v.noNotice {
		return hs
	}
	out := hs[:0]
	for _, h := range hs {
		if (v.noWorth && h.Worth > 0 && !h.Gone) || (v.noNotice && h.Gone) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// simTier is a node's heap tier that tells the cluster which block's page
// left whenever an extent is freed: it reads the block id from the page's
// first bytes as they are written.
type simTier struct {
	*tiers.Heap
	node   int
	blocks map[int64]int32 // block by extent offset, for extents written
	left   func(b int32, node int)
}

// WriteAt implements tiers.Tier.
func (t *simTier) WriteAt(ext tiers.Extent, p []byte, off int64) error {
	if off == 0 && len(p) >= 4 {
		t.blocks[ext.Off] = int32(binary.LittleEndian.Uint32(p)) - 1
	}
	return t.Heap.WriteAt(ext, p, off)
}

// Free implements tiers.Tier.
func (t *simTier) Free(ext tiers.Extent) {
	t.Heap.Free(ext)
	if b, ok := t.blocks[ext.Off]; ok {
		delete(t.blocks, ext.Off)
		t.left(b, t.node)
	}
}
