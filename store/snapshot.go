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

// Snapshot lists every published page of a namespace as it is at one
// point of the store's changes, a run of pages at a time, without holding
// the store's lock over the whole namespace. It calls mark under the
// lock, at that point, then yields the namespace's pages as they were
// there: shard by shard (a key's shard is its first byte modulo 64), each
// copied in a hold of the lock of its own and yielded, sorted by key,
// after the lock is let go. total is the pages at the mark, the sum of
// the runs' lengths.
//
// Config.OnEvent runs under the lock too, in the same section as the
// change it reports, so every change it reported before mark is in the
// dump and none it reports after mark is: a KV event stream fed by
// OnEvent and marked by mark (its queue's order) is cut exactly there.
// Invariant: a page of a shard not yet copied that a change touches
// after the mark (a page published, a page removed) is recorded, the
// first time, with its state at the mark (absent; or key, parent and
// tier), and the shard's copy takes that state instead of the current
// one; a shard already copied records nothing. A page that moves between
// tiers sends no event and is listed in the tier it is in when its shard
// is copied. The lock is held about 100 ns a page of a shard; the
// recorded changes are held until their shard is copied.
//
// An error from mark is returned, with nothing yielded; an error from
// yield ends the snapshot and is returned. A namespace dropped during the
// snapshot ends it with ErrNamespaceNotFound.
func (a Admin) Snapshot(id namespace.ID, mark func(total int) error, yield func(run []Listed) error) error {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return err
	}
	s.lock()
	if n.dropping {
		s.unlock()
		return fmt.Errorf("namespace %s: %w", id.Short(), ErrNamespaceNotFound)
	}
	if err := mark(int(n.pages.Load())); err != nil {
		s.unlock()
		return err
	}
	c := &cut{}
	n.cuts = append(n.cuts, c)
	s.unlock()
	defer func() {
		s.lock()
		n.cuts = slices.DeleteFunc(n.cuts, func(x *cut) bool { return x == c })
		s.unlock()
	}()
	for i := range n.shards {
		s.lock()
		if c.dropped {
			s.unlock()
			return fmt.Errorf("namespace %s: %w", id.Short(), ErrNamespaceNotFound)
		}
		run := s.copyShardLocked(n, i, c.changed[i])
		c.next, c.changed[i] = i+1, nil
		s.unlock()
		if len(run) == 0 {
			continue
		}
		slices.SortFunc(run, func(a, b Listed) int { return bytes.Compare(a.Key[:], b.Key[:]) })
		if err := yield(run); err != nil {
			return err
		}
	}
	return nil
}

// cut is a Snapshot in progress on a namespace (nsState.cuts), guarded by
// the store's lock.
type cut struct {
	next    int                                     // shards copied: 0..next-1
	changed [shardCount]map[namespace.Key]atTheMark // by shard, from next on: pages changed since the mark
	dropped bool                                    // the namespace was dropped
}

// atTheMark is a changed page's state at the snapshot's mark.
type atTheMark struct {
	present bool
	page    Listed
}

// copyShardLocked lists shard i of n as the cut sees it: its pages but
// those changed since the mark, and those changed as they were.
func (s *Store) copyShardLocked(n *nsState, i int, changed map[namespace.Key]atTheMark) []Listed {
	sh := &n.shards[i]
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	run := make([]Listed, 0, sh.m.len())
	for e := range sh.m.all() {
		if _, ok := changed[e.key]; ok {
			continue
		}
		run = append(run, s.listedLocked(e))
	}
	for _, c := range changed {
		if c.present {
			run = append(run, c.page)
		}
	}
	return run
}

func (s *Store) listedLocked(e *entry) Listed {
	parent, hasParent := s.parentKeyLocked(e)
	return Listed{Key: e.key, Parent: parent, HasParent: hasParent, Tier: s.cfg.Tiers[e.tier].Kind()}
}

// cutChangedLocked records, for each snapshot in progress on e's
// namespace, e's state at the mark before a change to it: present (it is
// being removed) or absent (it was just published).
func (s *Store) cutChangedLocked(e *entry, present bool) {
	if len(e.ns.cuts) == 0 {
		return
	}
	i := int(e.key[0] % shardCount)
	for _, c := range e.ns.cuts {
		if i < c.next {
			continue
		}
		if _, ok := c.changed[i][e.key]; ok {
			continue
		}
		if c.changed[i] == nil {
			c.changed[i] = map[namespace.Key]atTheMark{}
		}
		m := atTheMark{present: present}
		if present {
			m.page = s.listedLocked(e)
		}
		c.changed[i][e.key] = m
	}
}

// cutDroppedLocked ends the snapshots in progress on n, dropped.
func cutDroppedLocked(n *nsState) {
	for _, c := range n.cuts {
		c.dropped = true
	}
}

// KeyTiers sets tier[i] to 1 + the index in Config.Tiers of the tier that
// holds keys[i], or 0 when the namespace does not hold it, for every key
// (tier must be as long as keys), and returns how many it holds. Like
// PrefixTiers it reads the index alone, under the store's lock.
func (a Admin) KeyTiers(id namespace.ID, keys []namespace.Key, tier []uint8) (held int, err error) {
	s := a.s
	n, err := s.namespace(id)
	if err != nil {
		return 0, err
	}
	s.lock()
	defer s.unlock()
	for i, k := range keys {
		tier[i] = 0
		if e := n.shard(k).get(k); e != nil && !e.dead {
			tier[i] = e.tier + 1
			held++
		}
	}
	return held, nil
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
