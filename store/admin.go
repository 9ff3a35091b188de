package store

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// KeyInfo describes one published page for inspection.
type KeyInfo struct {
	Key       namespace.Key
	Parent    namespace.Key
	HasParent bool
	Depth     uint32
	Size      int64
	Checksum  []byte
	Tier      tiers.Kind
	Created   time.Time
	Accessed  time.Time
	Hits      uint32
	Leases    int
	Children  int  // resident children in this namespace
	Orphan    bool // an ancestor is known absent (MarkOrphans, or a lookup here)
	// CostHint is the writer's recompute cost (PageSpec.CostHint) as the
	// entry keeps it (a float32); 0: none.
	CostHint float64
}

func (s *Store) keyInfoLocked(e *entry) KeyInfo {
	parent, hasParent := s.parentKeyLocked(e)
	return KeyInfo{Key: e.key, Parent: parent, HasParent: hasParent, Depth: e.depth,
		Size: e.size(), Checksum: e.checksum(), Tier: s.cfg.Tiers[e.tier].Kind(),
		Created: s.timeOf(e.create), Accessed: s.timeOf(e.access),
		Hits: e.hits, Leases: int(e.leases), Children: int(e.kids[0] + e.kids[1] + e.kids[2] + e.kids[3]),
		Orphan: s.policy.pol[e.tier].Orphan(e.h), CostHint: float64(e.cost)}
}

// Stat describes the given keys; ok[i] is false for keys not published.
func (a Admin) Stat(id namespace.ID, keys []namespace.Key) (infos []KeyInfo, ok []bool, err error) {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return nil, nil, err
	}
	infos, ok = make([]KeyInfo, len(keys)), make([]bool, len(keys))
	s.lock()
	defer s.unlock()
	for i, k := range keys {
		if e := n.shard(k).get(k); e != nil {
			infos[i], ok[i] = s.keyInfoLocked(e), true
		}
	}
	return infos, ok, nil
}

// ListKeys returns up to limit published pages of a namespace in key order,
// starting after the key given (nil: from the start). next is the last key
// returned when more may follow, nil when the listing is complete.
func (a Admin) ListKeys(id namespace.ID, after *namespace.Key, limit int) (infos []KeyInfo, next *namespace.Key, err error) {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return nil, nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	// The limit+1 smallest keys after the cursor, kept in a max-heap: a
	// page of a large namespace costs O(n log limit), not a sort of all n.
	keys, more := smallestKeys(n, after, limit+1), false
	if len(keys) > limit {
		keys, more = keys[:limit], true
	}
	infos, ok, err := a.Stat(id, keys)
	if err != nil {
		return nil, nil, err
	}
	out := infos[:0]
	for i := range infos {
		if ok[i] {
			out = append(out, infos[i])
		}
	}
	if more && len(keys) > 0 {
		last := keys[len(keys)-1]
		next = &last
	}
	return out, next, nil
}

// IndexShards is how many shards a namespace's index has (ShardKeys).
const IndexShards = shardCount

// ShardKeys is the keys of index shard i (0 ≤ i < IndexShards) of
// namespace id, in no order. A walk over every page of a namespace a
// shard at a time costs O(pages) in all, where ListKeys's sorted pages
// cost O(pages) each.
func (a Admin) ShardKeys(id namespace.ID, i int) ([]namespace.Key, error) {
	n, err := a.s.namespace(id)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= shardCount {
		return nil, fmt.Errorf("index shard %d of %d", i, shardCount)
	}
	sh := &n.shards[i]
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	keys := make([]namespace.Key, 0, sh.m.len())
	for e := range sh.m.all() {
		keys = append(keys, e.key)
	}
	return keys, nil
}

// NamespaceStats is what a namespace holds and how it is used.
type NamespaceStats struct {
	Namespace
	Created    time.Time
	Pages      int64
	Bytes      int64
	Lookups    uint64
	LookupKeys uint64
	HitKeys    uint64 // keys inside returned hit prefixes
	Leases     int64
	// TierPages counts the namespace's pages per tier, in tier order.
	TierPages []int64
	// Puts counts finished reservations by outcome (indexed by
	// CommitStatus; index 0 unused).
	Puts          [numCommitStatus]uint64
	Rejected      uint64 // pages Reserve refused (size, no space)
	Evicted       uint64 // pages dropped to make room
	Demoted       uint64 // pages moved one tier down
	Corrupt       uint64 // pages dropped failing to read or verify
	Deleted       uint64 // pages removed by Delete
	Handed        uint64 // pages removed by Handed: given to their owner
	LeasesExpired uint64 // leases that ran out
	Expired       uint64 // pages removed idle past the TTL
	Orphaned      uint64 // pages dropped as orphans (ParentsGone)
	TTL           time.Duration
	// SavedFLOPs is the prefill the hit prefixes of lookups saved, priced
	// by the namespace's compute profile (0 without one).
	SavedFLOPs float64
	// HitTokens is the tokens in lookups' hit prefixes (0 when the page's
	// token count is unknown).
	HitTokens uint64
}

func (s *Store) nsStats(n *nsState) NamespaceStats {
	st := NamespaceStats{Namespace: n.Namespace, Created: time.UnixMilli(n.created),
		Pages: n.pages.Load(), Bytes: n.bytes.Load(), Lookups: n.lookups.Load(),
		LookupKeys: n.lookupKeys.Load(), HitKeys: n.hitKeys.Load(), Leases: n.leases.Load(),
		TierPages: make([]int64, len(s.cfg.Tiers))}
	for i := range st.TierPages {
		st.TierPages[i] = n.tierPages[i].Load()
	}
	for i := range st.Puts {
		st.Puts[i] = n.outcomes[i].Load()
	}
	st.Rejected, st.Evicted, st.Demoted = n.rejected.Load(), n.evicted.Load(), n.demoted.Load()
	st.Corrupt, st.Deleted, st.LeasesExpired = n.corrupt.Load(), n.deleted.Load(), n.leasesExpired.Load()
	st.Handed = n.handed.Load()
	st.Expired, st.TTL, st.Orphaned = n.expired.Load(), time.Duration(n.ttl.Load()), n.orphaned.Load()
	st.HitTokens = n.hitTokens.Load()
	s.lock()
	st.SavedFLOPs = n.savedFLOPs
	s.unlock()
	return st
}

// NamespaceStats reports one namespace.
func (a Admin) NamespaceStats(id namespace.ID) (NamespaceStats, error) {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return NamespaceStats{}, err
	}
	return s.nsStats(n), nil
}

// Namespaces reports every namespace the store knows, by ID.
func (a Admin) Namespaces() []NamespaceStats {
	s := a.s
	s.nsMu.RLock()
	out := make([]NamespaceStats, 0, len(s.ns))
	for _, n := range s.ns {
		out = append(out, s.nsStats(n))
	}
	s.nsMu.RUnlock()
	slices.SortFunc(out, func(a, b NamespaceStats) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// TierKinds names the store's tiers, in order.
func (a Admin) TierKinds() []tiers.Kind {
	s := a.s
	kinds := make([]tiers.Kind, len(s.cfg.Tiers))
	for i, t := range s.cfg.Tiers {
		kinds[i] = t.Kind()
	}
	return kinds
}

// Durable says whether this store's tier of kind k keeps its pages across
// a kill -9 (it is a tiers.Durable: the SSD tier seals every page); false
// for a kind the store has no tier of.
func (h Handoff) Durable(k tiers.Kind) bool {
	s := h.s
	for _, t := range s.cfg.Tiers {
		if t.Kind() == k {
			_, ok := t.(tiers.Durable)
			return ok
		}
	}
	return false
}

// Stats is what the whole store holds.
type Stats struct {
	Pages        int64
	Bytes        int64
	Reservations int
	Leases       int
	Tiers        []tiers.Stats
	TierPages    []int64 // published pages per tier
	Evictions    uint64  // pages dropped to make room
	Demotions    uint64  // pages moved one tier down
	Corrupt      uint64  // pages dropped because they failed to read or verify
}

// Stats reports the store and its tiers.
func (a Admin) Stats() Stats {
	s := a.s
	s.lock()
	st := Stats{Pages: s.pages, Bytes: s.bytes, Reservations: len(s.reservations), Leases: len(s.leases),
		Evictions: s.evictions.Load(), Demotions: s.demotions.Load(), Corrupt: s.corrupt.Load()}
	s.unlock()
	st.TierPages = make([]int64, len(s.cfg.Tiers))
	s.nsMu.RLock()
	for _, n := range s.ns {
		for i := range st.TierPages {
			st.TierPages[i] += n.tierPages[i].Load()
		}
	}
	s.nsMu.RUnlock()
	for _, t := range s.cfg.Tiers {
		st.Tiers = append(st.Tiers, t.Stats())
	}
	return st
}

// OpenCounts is what a set of open reservations holds, split by kind: those
// Reserve made for a known page (committing ones included) and the slots
// Grant set aside ahead of pages (slots.go). Both are reservations to the
// quotas (Usage counts them together); OpenCounts tells them apart for an
// operator, who would otherwise read a connection's idle slots as puts in
// flight.
type OpenCounts struct {
	Reservations int
	ReserveBytes int64 // page bytes
	Slots        int
	SlotBytes    int64 // page bytes
}

// OpenStats is the store's open reservations, split (OpenCounts).
type OpenStats struct {
	OpenCounts
	// Tenants splits each tenant's: only tenants with an open reservation
	// or slot are present.
	Tenants map[string]OpenCounts
	// TierSlotBytes is the bytes the slots hold per tier, in tier order,
	// with size-class rounding: the part of the tier's Used that no page
	// has yet.
	TierSlotBytes []int64
}

// OpenReservations reports the open reservations, split into reservations
// and slots, from one reading of the reservation table: it walks every
// open reservation under the store's lock, for an admin call or a metrics
// scrape, not for a request path.
func (a Admin) OpenReservations() OpenStats {
	s := a.s
	st := OpenStats{Tenants: map[string]OpenCounts{}, TierSlotBytes: make([]int64, len(s.cfg.Tiers))}
	s.lock()
	defer s.unlock()
	for _, r := range s.reservations {
		t := st.Tenants[r.ns.Tenant]
		t.addLocked(r)
		st.Tenants[r.ns.Tenant] = t
		st.addLocked(r)
		if r.slot {
			st.TierSlotBytes[r.tier] += r.ext.Cap
		}
	}
	return st
}

// addLocked counts r as a slot or a reservation.
func (o *OpenCounts) addLocked(r *reservation) {
	if r.slot {
		o.Slots++
		o.SlotBytes += r.spec.Size
	} else {
		o.Reservations++
		o.ReserveBytes += r.spec.Size
	}
}

// smallestKeys returns, in order, the k smallest keys of n greater than
// after (nil: all).
func smallestKeys(n *nsState, after *namespace.Key, k int) []namespace.Key {
	cmp := func(a, b namespace.Key) int { return bytes.Compare(a[:], b[:]) }
	h := make([]namespace.Key, 0, min(k, 1024)) // max-heap of the k smallest so far
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.RLock()
		for e := range sh.m.all() {
			key := e.key
			if after != nil && cmp(key, *after) <= 0 {
				continue
			}
			if len(h) < k {
				h = append(h, key)
				siftUp(h, len(h)-1, cmp)
			} else if cmp(key, h[0]) < 0 {
				h[0] = key
				siftDown(h, 0, cmp)
			}
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(h, cmp)
	return h
}

func siftUp(h []namespace.Key, i int, cmp func(a, b namespace.Key) int) {
	for i > 0 {
		p := (i - 1) / 2
		if cmp(h[p], h[i]) >= 0 {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func siftDown(h []namespace.Key, i int, cmp func(a, b namespace.Key) int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && cmp(h[c+1], h[c]) > 0 {
			c++
		}
		if cmp(h[i], h[c]) >= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
