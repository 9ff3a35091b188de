package client

import (
	"encoding/binary"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/stratakv/strata/namespace"
)

// The location cache (docs/design.md §8.2: "a small existence/ownership cache whose
// staleness only ever costs a miss").
//
// What it holds: "page (namespace, key) was present on node N", learned
// from Lookup answers, committed or existing Puts, and verified Gets, for
// CacheTTL. Nothing else:
//
//   - Ownership (key → owner) is not cached: placement computes it in tens
//     of nanoseconds from the view, cheaper than a cache probe, and is never
//     stale.
//   - Absence is not cached: other clients publish all the time, and a
//     cached "absent" would hide their pages for the TTL.
//   - Lookup never answers "present" from the cache alone. The node must be
//     asked anyway to lease the prefix; its answer keeps its LRU recency and
//     per-namespace hit statistics honest; and a stale "present" would make
//     the hit prefix too long, turning a clean lookup miss into a failed
//     load the engine would have to handle.
//
// How it is used:
//
//   - Routing: where a key's cached node differs from its placement owner
//     (the page was spilled to its next candidate, or the view changed
//     since: a joining node takes over keys whose pages stay where they
//     were), Lookup asks both nodes and Get reads from the cached one
//     first, falling back to the owner. This keeps those pages reachable
//     for this client.
//   - Put skips pages cached present on a node of the view that is not in
//     quarantine, reporting them Exists without a round trip.
//
// Why staleness only costs a miss: a stale entry names a node that no
// longer has the page (evicted, deleted, restarted). Lookup and Get ask that
// node, which answers absent; the entry is then dropped, and the key is a
// miss for that one call. A stale entry naming a node outside the view or
// in quarantine is ignored. A Put skipped because of a stale entry leaves
// the page absent until the entry is dropped by the next Lookup or Get of
// the key, or expires: a miss again. Bytes are never taken from the cache:
// Get verifies every page against its checksum, from whichever node.
type locations struct {
	c   *ristretto.Cache[uint64, location]
	ttl time.Duration
}

// location is one entry; ns and key are kept whole so that a hash collision
// reads as a cache miss.
type location struct {
	ns   namespace.ID
	key  namespace.Key
	node string
}

func newLocations(entries int64, ttl time.Duration) (*locations, error) {
	c, err := ristretto.NewCache(&ristretto.Config[uint64, location]{
		NumCounters:        10 * entries,
		MaxCost:            entries,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, err
	}
	return &locations{c: c, ttl: ttl}, nil
}

// word is the cache key: keys are SHA-256 outputs, so their first bytes
// are already uniform; the namespace is folded in for keys that were not
// derived from it.
func word(ns namespace.ID, key namespace.Key) uint64 {
	return binary.LittleEndian.Uint64(key[:8]) ^ binary.LittleEndian.Uint64(ns[:8])
}

// get returns the node the page was last seen on.
func (l *locations) get(ns namespace.ID, key namespace.Key) (string, bool) {
	if l == nil {
		return "", false
	}
	v, ok := l.c.Get(word(ns, key))
	if !ok || v.ns != ns || v.key != key {
		return "", false
	}
	return v.node, true
}

// seen records that node has the page. Sets are asynchronous and may be
// dropped: the cache is a hint.
func (l *locations) seen(ns namespace.ID, key namespace.Key, node string) {
	if l == nil {
		return
	}
	l.c.SetWithTTL(word(ns, key), location{ns: ns, key: key, node: node}, 1, l.ttl)
}

// gone drops the entry if it names node (or any node, with node "").
func (l *locations) gone(ns namespace.ID, key namespace.Key, node string) {
	if l == nil {
		return
	}
	if at, ok := l.get(ns, key); ok && (node == "" || at == node) {
		l.c.Del(word(ns, key))
	}
}

// wait applies buffered sets (for tests).
func (l *locations) wait() {
	if l != nil {
		l.c.Wait()
	}
}

func (l *locations) close() {
	if l != nil {
		l.c.Close()
	}
}
