package client

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
)

// The shmLoc cache: where in the mapped arena a page was last seen, so a
// repeated Get without a lease copies it with no round trip at all.
//
// Why a cached shmLoc is safe to read: an extent's generation is odd and
// unique while that allocation lives, and a published page's allocation
// holds that page's bytes, unchanged, until it is freed (delete, eviction,
// demotion); freeing moves the generation on for good. A copy followed by
// an unchanged generation is therefore the page the shmLoc was cached
// for; a changed one is a miss, and the client then asks the node. A stale
// entry costs one wasted check, never wrong bytes. Entries come only from
// the node's answers to this client (Get, Put), so they carry its tenant's
// authorisation. The node does not see these reads, so the client reports
// them (pages and bytes per namespace, a one-way Served frame) at most
// every servedEvery and when the session closes, for the node's transfer
// metrics. Gets under a lease always ask the node, which checks the
// lease is still live. This client's Delete forgets the keys; a page
// another client deletes while a lease pins it still reads (its bytes,
// which are exactly the page's) until the lease ends and it is freed.

// shmCacheShards and shmCacheShardSize bound the cache: a full shard is
// emptied (entries are cheap to learn again, with one round trip).
const (
	shmCacheShards    = 16
	shmCacheShardSize = 4096
)

type locKey struct {
	ns  namespace.ID
	key namespace.Key
}

type shmLoc struct {
	ext frame.Extent
	sum []byte // the page's checksum, for ShmVerifyChecksums
}

type locShard struct {
	mu sync.RWMutex // guards m
	m  map[locKey]shmLoc
}

type locCache struct {
	shards [shmCacheShards]locShard
}

// shard picks by the key's first byte: keys are hashes.
func (c *locCache) shard(k namespace.Key) *locShard { return &c.shards[k[0]%shmCacheShards] }

func (c *locCache) get(ns namespace.ID, k namespace.Key) (shmLoc, bool) {
	sh := c.shard(k)
	sh.mu.RLock()
	l, ok := sh.m[locKey{ns, k}]
	sh.mu.RUnlock()
	return l, ok
}

func (c *locCache) put(ns namespace.ID, k namespace.Key, l shmLoc) {
	sh := c.shard(k)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= shmCacheShardSize {
		sh.m = make(map[locKey]shmLoc, 64)
	}
	sh.m[locKey{ns, k}] = l
	sh.mu.Unlock()
}

func (c *locCache) forget(ns namespace.ID, k namespace.Key) {
	sh := c.shard(k)
	sh.mu.Lock()
	delete(sh.m, locKey{ns, k})
	sh.mu.Unlock()
}

// forgetShm drops the cached locations of keys.
func (n *nodeNS) forgetShm(keys []namespace.Key) {
	s := n.c.shm.Load()
	if s == nil {
		return
	}
	for _, k := range keys {
		s.locs.forget(n.id, k)
	}
}

// servedEvery is the least time between two Served reports of a namespace.
const servedEvery = 100 * time.Millisecond

// served counts the cache reads of one namespace not yet reported.
type served struct {
	pages, bytes atomic.Int64
	last         atomic.Int64 // unix nanoseconds of the last report
}

// countServed records cache reads of ns and reports them when the last
// report is old enough.
func (s *shmSession) countServed(ns namespace.ID, pages int, bytes int64) {
	v, ok := s.served.Load(ns)
	if !ok {
		v, _ = s.served.LoadOrStore(ns, &served{})
	}
	c := v.(*served)
	c.pages.Add(int64(pages))
	c.bytes.Add(bytes)
	now := time.Now().UnixNano()
	if last := c.last.Load(); now-last >= int64(servedEvery) && c.last.CompareAndSwap(last, now) {
		s.reportServed(ns, c)
	}
}

// reportServed sends what c counted, on an idle connection; a report that
// cannot be sent is dropped (it only feeds metrics).
func (s *shmSession) reportServed(ns namespace.ID, c *served) {
	pages, bytes := c.pages.Swap(0), c.bytes.Swap(0)
	if pages == 0 {
		return
	}
	conn, _ := s.pool.take()
	if conn == nil {
		return
	}
	err := conn.Send(s.ids.Add(1), &frame.Served{NS: ns, Pages: uint32(min(pages, 1<<31)), Bytes: bytes})
	s.pool.give(conn, err != nil)
}

// flushServed reports every namespace's count (at close).
func (s *shmSession) flushServed() {
	s.served.Range(func(k, v any) bool {
		s.reportServed(k.(namespace.ID), v.(*served))
		return true
	})
}
