package store

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// Two reads of the index for cache-aware routers (docs/design.md §15):
// a namespace's whole contents at one point of the KV event stream, and
// how much of a prompt the node holds, per tier. Neither is a use of the
// pages: no hit is counted, no lease taken, nothing moves in the policy.

// Listed is a page as a snapshot lists it.
type Listed struct {
	Key       namespace.Key
	Parent    namespace.Key
	HasParent bool
	Tier      tiers.Kind
}

// Snapshot lists every published page of a namespace, in key order, and
// calls mark under the same hold of the store's lock. Config.OnEvent runs
// under that lock too, in the same section as the change it reports, so
// every change it reported before mark is in the list and none it reports
// after mark is: a KV event stream fed by OnEvent and marked by mark (its
// queue's order) is cut exactly there. An error from mark is returned,
// with no list. The lock is held while the namespace's pages are copied,
// about 100 ns a page.
func (a Admin) Snapshot(id namespace.ID, mark func() error) ([]Listed, error) {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return nil, err
	}
	s.lock()
	if n.dropping {
		s.unlock()
		return nil, fmt.Errorf("namespace %s: %w", id.Short(), ErrNamespaceNotFound)
	}
	out := make([]Listed, 0, n.pages.Load())
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.RLock()
		for e := range sh.m.all() {
			parent, hasParent := s.parentKeyLocked(e)
			out = append(out, Listed{Key: e.key, Parent: parent, HasParent: hasParent, Tier: s.cfg.Tiers[e.tier].Kind()})
		}
		sh.mu.RUnlock()
	}
	err = mark()
	s.unlock()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Listed) int { return bytes.Compare(a.Key[:], b.Key[:]) })
	return out, nil
}

// PrefixTiers reports how many of keys, from the first, the namespace
// holds (longest), and for each of those the index of its tier in
// Config.Tiers (tier[i], for i < longest; tier must be as long as keys).
// It reads the index alone, under the store's lock, and stops at the
// first key absent.
func (a Admin) PrefixTiers(id namespace.ID, keys []namespace.Key, tier []uint8) (longest int, err error) {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return 0, err
	}
	s.lock()
	defer s.unlock()
	for i, k := range keys {
		e := n.shard(k).get(k)
		if e == nil || e.dead {
			return i, nil
		}
		tier[i] = e.tier
	}
	return len(keys), nil
}
