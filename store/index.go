package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

const shardCount = 64

// MaxTiers is the most tiers a store takes.
const MaxTiers = 4

// nsState is a namespace's index and counters.
type nsState struct {
	Namespace
	created int64 // unix ms
	// placeholder marks a namespace known only from recovered pages; the
	// first AddNamespace with the same ID, page size and checksum completes
	// it. Guarded by Store.nsMu.
	placeholder bool

	shards [shardCount]shard

	// dropping is set while DropNamespace removes the namespace's pages:
	// they send no parent-gone notices. Guarded by Store.mu.
	dropping bool
	// cuts are the snapshots in progress (Admin.Snapshot). Guarded by
	// Store.mu.
	cuts []*cut
	// extCap is, per tier, what the last extent allocated there for one
	// of the namespace's pages took (its size class; 0: none yet), for
	// the reservation share's check before allocating (quota.go).
	// Guarded by Store.mu.
	extCap [MaxTiers]int64

	// Counters for the admin API and metrics; atomics, no lock.
	lookups    atomic.Uint64
	lookupKeys atomic.Uint64
	hitKeys    atomic.Uint64
	pages      atomic.Int64
	bytes      atomic.Int64
	leases     atomic.Int64
	pins       atomic.Int64 // transfer pins (Reader.Pin)
	tierPages  [MaxTiers]atomic.Int64

	// Outcomes, for metrics.
	outcomes      [numCommitStatus]atomic.Uint64 // finished reservations by outcome
	rejected      atomic.Uint64                  // pages Reserve refused
	evicted       atomic.Uint64                  // pages dropped to make room
	demoted       atomic.Uint64                  // pages moved one tier down
	corrupt       atomic.Uint64                  // pages dropped failing to read or verify
	deleted       atomic.Uint64                  // pages removed by Delete
	handed        atomic.Uint64                  // pages removed by Handed (their owner holds them)
	leasesExpired atomic.Uint64                  // leases that ran out (not released)
	expired       atomic.Uint64                  // pages removed idle past the TTL
	orphaned      atomic.Uint64                  // pages dropped as orphans (ParentsGone)
	ttl           atomic.Int64                   // idle TTL of pages (time.Duration); 0 = none
	hitTokens     atomic.Uint64                  // tokens of lookups' hit prefixes

	// Guarded by Store.mu.
	savedFLOPs float64 // prefill FLOPs the hit prefixes of lookups saved
	// waiting holds, by parent key, the waiters of the resident children
	// whose parent is not resident here: their counts by tier, which the
	// parent's start from when it arrives, and their list (see policy.go,
	// kids.go and waiters.go).
	waiting waiters
	// remoteWaiting holds the child and value hints that arrived for
	// parents not resident here yet (see policy.go).
	remoteWaiting map[namespace.Key]remoteKids
}

func newNSState(n Namespace) *nsState {
	st := &nsState{Namespace: n, created: time.Now().UnixMilli(), waiting: newWaiters(),
		remoteWaiting: make(map[namespace.Key]remoteKids)}
	for i := range st.shards {
		st.shards[i].m = newTable()
	}
	return st
}

func (n *nsState) shard(k namespace.Key) *shard {
	// Keys are hashes: any byte is uniform.
	return &n.shards[k[0]%shardCount]
}

type shard struct {
	// mu guards m. Inserting or removing also requires Store.mu (held first).
	mu sync.RWMutex
	m  table
}

// getAll looks up every key into found (nil for absent), taking each
// shard's read lock once rather than once per key: a 1,000-key lookup
// touches each of the 64 shards about 16 times.
func (n *nsState) getAll(keys []namespace.Key, found []*entry) {
	if len(keys) < 2*shardCount {
		for i, k := range keys {
			found[i] = n.shard(k).get(k)
		}
		return
	}
	var start [shardCount + 1]int32
	for _, k := range keys {
		start[k[0]%shardCount+1]++
	}
	for i := 1; i <= shardCount; i++ {
		start[i] += start[i-1]
	}
	// order holds the key positions, shard by shard: on the stack for a
	// lookup of up to 1,024 keys (a heap list of 4 KB a 1,000-key lookup
	// was half of a node's garbage per lookup).
	var stack [1024]int32
	order := stack[:min(len(keys), len(stack))]
	if len(keys) > len(stack) {
		order = make([]int32, len(keys))
	}
	next := start
	for i, k := range keys {
		j := k[0] % shardCount
		order[next[j]] = int32(i)
		next[j]++
	}
	for j := range shardCount {
		if start[j] == start[j+1] {
			continue
		}
		sh := &n.shards[j]
		sh.mu.RLock()
		sh.m.getBatch(keys, order[start[j]:start[j+1]], found)
		sh.mu.RUnlock()
	}
}

func (sh *shard) get(k namespace.Key) *entry {
	sh.mu.RLock()
	e := sh.m.get(k)
	sh.mu.RUnlock()
	return e
}

// entry is one published page. Fields marked "mu" are guarded by
// Store.mu; the rest are immutable after publication.
//
// Fields are ordered to pack tightly (the size is a Go size class:
// TestEntrySize): times are seconds on the store's clock (Store.clock),
// the parent and child links are 4-byte refs rather than pointers or keys
// (see kids.go), the extent keeps neither its length (every page of a
// namespace is PageBytes long) nor a second 8-byte size (its capacity is
// kept as the slack over the length).
type entry struct {
	ns     *nsState
	tier   uint8  // mu: index into Config.Tiers
	dead   bool   // mu: removed from the index; its extent is freed once unpinned
	leases uint16 // mu: leases among pins
	access int32  // mu: store clock of the last hit
	key    namespace.Key
	hits   uint32          // mu
	h      eviction.Handle // mu: the page's state in its tier's policy
	depth  uint32
	pins   int32 // mu: leases + in-flight reads
	// mu: the extent (extent, setExtent): Off and Gen (and slack).
	off    int64
	gen    uint64
	slack  uint32           // mu: the extent's Cap less Len
	crc    uint32           // CRC-32C namespaces only (SHA-256: shaEntry)
	create int32            // store clock
	cost   float32          // the writer's measured recompute cost (PageSpec.CostHint), FLOPs; 0: the profile's
	kids   [MaxTiers]uint16 // mu: resident children in this namespace, by the tier they are in
	// mu: the resident children of a page, in any tier, form a list
	// (kids.go): kidHead is the first of e's own children while e is
	// resident; sibPrev and sibNext link e among its parent's children.
	kidHead, sibPrev, sibNext ref
	// mu: up names the parent page while e is resident (kids.go): 0 for a
	// page without one; else, when upWaits is set, the parent key's
	// waiter (nsState.waiters: the parent is not resident here), else the
	// resident parent's ref.
	up      ref
	upWaits bool
	put     int32 // mu: store clock of the last put: the commit, or a Reserve answered EXISTS
}

// shaEntry is how the entry of a page of a SHA-256 namespace is allocated:
// its sum follows it (entry.sha), so that an entry keeps no 8-byte pointer
// to a sum that CRC-32C namespaces, the default, do not have.
type shaEntry struct {
	entry
	sum [32]byte
}

// newEntry is the entry of a page of n at ext; insertLocked links it to
// its parent and sets its checksum.
func newEntry(n *nsState, key namespace.Key, ext tiers.Extent) *entry {
	var e *entry
	if n.Checksum == namespace.SHA256 {
		e = &new(shaEntry).entry
	} else {
		e = new(entry)
	}
	e.ns, e.key = n, key
	e.setExtent(ext)
	return e
}

// sha is the SHA-256 sum of a page of a SHA-256 namespace: newEntry made
// its entry the first field of a shaEntry.
func (e *entry) sha() *[32]byte {
	if e.ns.Checksum != namespace.SHA256 {
		panic(fmt.Sprintf("store: page %s of a %v namespace has no SHA-256 sum", e.key, e.ns.Checksum))
	}
	return &(*shaEntry)(unsafe.Pointer(e)).sum
}

// hasParent reports whether the page has a parent page; only while e is
// resident.
func (e *entry) hasParent() bool { return e.up != 0 }

// size is the page's length in bytes.
func (e *entry) size() int64 { return e.ns.PageBytes }

// extent is where the page's bytes lie in its tier.
func (e *entry) extent() tiers.Extent {
	n := e.ns.PageBytes
	return tiers.Extent{Off: e.off, Len: n, Cap: n + int64(e.slack), Gen: e.gen}
}

// setExtent moves the page to x, which must be a page of its namespace.
func (e *entry) setExtent(x tiers.Extent) {
	if x.Len != e.ns.PageBytes || x.Cap < x.Len || x.Cap-x.Len > math.MaxUint32 {
		panic(fmt.Sprintf("store: extent %+v for page %s of a %d-byte namespace", x, e.key, e.ns.PageBytes))
	}
	e.off, e.gen, e.slack = x.Off, x.Gen, uint32(x.Cap-x.Len)
}

// setChecksum records sum, the page's checksum in its namespace's
// algorithm.
func (e *entry) setChecksum(sum []byte) {
	if e.ns.Checksum == namespace.SHA256 {
		*e.sha() = [32]byte(sum)
		return
	}
	e.crc = binary.BigEndian.Uint32(sum)
}

func (e *entry) checksum() []byte {
	if e.ns.Checksum == namespace.SHA256 {
		return e.sha()[:]
	}
	return []byte{byte(e.crc >> 24), byte(e.crc >> 16), byte(e.crc >> 8), byte(e.crc)}
}
