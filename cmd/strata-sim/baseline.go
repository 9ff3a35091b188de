package main

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/stratakv/strata/eviction"
)

// baseline replays a textbook policy (LRU, LFU, GDSF over bytes, Belady,
// an infinite cache) over bare eviction queues, one per node: what a plain
// cache does, with no leaf-first ordering and no hints, to compare the
// shipped store with. Each node holds its capacity in whole pages; a put
// evicts the queue's victims until the page fits.
type baseline struct {
	layout
	nodes  []baseNode
	handle []eviction.Handle
	pinned []int32
}

type baseNode struct {
	q     *eviction.Queue
	pages int64   // capacity
	used  int64   // pages held
	block []int32 // block id by handle
}

func newBaseline(t *trace, cfg simConfig) (*baseline, error) {
	l, err := newLayout(t, cfg)
	if err != nil {
		return nil, err
	}
	c := &baseline{layout: l, handle: make([]eviction.Handle, len(t.blocks))}
	for _, pages := range l.pages {
		q, err := eviction.New(eviction.Config{Kind: cfg.variant.kind, Profile: cfg.profile, Plain: true, Capacity: int(pages)})
		if err != nil {
			return nil, err
		}
		if cfg.variant.infinite {
			pages = math.MaxInt64
		}
		c.nodes = append(c.nodes, baseNode{q: q, pages: pages, block: make([]int32, 1, 1024)})
	}
	return c, nil
}

// keyWord is the 64-bit key hash queues take: the key's first 8 bytes, as
// the store takes them.
func keyWord(k [32]byte) uint64 { return binary.LittleEndian.Uint64(k[:8]) }

func (c *baseline) page(b int32) eviction.Page {
	bl := &c.t.blocks[b]
	return eviction.Page{Key: keyWord(bl.key), Bytes: c.pageSize, Depth: bl.depth, Tokens: int(bl.tokens)}
}

// run replays every request.
func (c *baseline) run() result {
	for i := range c.t.reqs {
		c.request(i)
		c.measure()
	}
	return c.out
}

// request replays one request: look up its pages, count the hit prefix,
// then put the pages it had to recompute; the first put refused ends them.
func (c *baseline) request(ri int) {
	req := &c.t.reqs[ri]
	where := c.res.where
	for _, b := range req.blocks {
		c.nodes[c.owner[b]].q.Record(keyWord(c.t.blocks[b].key))
	}
	hit := 0
	for _, b := range req.blocks {
		if where[b] < 0 {
			break
		}
		n := &c.nodes[where[b]]
		n.q.Hit(c.handle[b])
		n.q.Pin(c.handle[b]) // the engine's lease while it loads the prefix
		c.pinned = append(c.pinned, b)
		hit++
	}
	c.count(req, hit)
	if c.cfg.variant.belady {
		for _, b := range req.blocks {
			if where[b] >= 0 {
				c.nodes[where[b]].q.SetPriority(c.handle[b], c.offlinePrio(b, ri))
			}
		}
	}
	for _, b := range req.blocks[hit:] {
		if where[b] >= 0 {
			continue // published already
		}
		if !c.put(b, ri) {
			c.out.rejected++
			break // the chain is cut: later pages could never be hit
		}
	}
	for _, b := range c.pinned {
		c.nodes[where[b]].q.Unpin(c.handle[b])
	}
	c.pinned = c.pinned[:0]
}

// offlinePrio is Belady's priority: minus the index of the next request
// that uses b after ri (farthest first), deeper pages first among equals.
func (c *baseline) offlinePrio(b int32, ri int) float64 {
	u := c.t.blocks[b].uses
	i, _ := slices.BinarySearch(u, int32(ri+1))
	next := float64(math.MaxInt32)
	if i < len(u) {
		next = float64(u[i])
	}
	return -next*1024 - float64(min(c.t.blocks[b].depth, 1023))
}

// put stores block b (recomputed by request ri) on its owner, evicting as
// the owner's queue says, or reports that it could not.
func (c *baseline) put(b int32, ri int) bool {
	p := c.page(b)
	target := int(c.owner[b])
	n := &c.nodes[target]
	if !n.q.Admit(p) {
		return false
	}
	for n.used+1 > n.pages {
		h, ok := n.q.Victim()
		if !ok {
			return false
		}
		if c.cfg.variant.bypass && n.q.Value(h) >= c.offlinePrio(b, ri) {
			return false // the victim is used again sooner: b is not kept
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
	n.used++
	c.handle[b] = h
	c.res.arrive(b, target)
	c.out.pagesStored++
	if !c.cfg.variant.bypass {
		n.q.Pin(h) // the writer's reservation until the request ends
		c.pinned = append(c.pinned, b)
	}
	return true
}

// evict drops the block behind handle h from node ni.
func (c *baseline) evict(ni int, h eviction.Handle) {
	n := &c.nodes[ni]
	b := n.block[h]
	n.q.Evict(h)
	n.block[h] = -1
	n.used--
	c.res.leave(b)
	c.out.evictions++
}
