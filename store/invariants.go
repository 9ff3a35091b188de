package store

import (
	"errors"
	"fmt"
	"math"

	"github.com/stratakv/strata/namespace"
)

// checkLineage verifies the lineage bookkeeping that kids.go, policy.go
// (leaf first) and index.go state, under Store.mu:
//
//   - every tracked page is its tier's queue's: owner maps its handle back
//     to it, and each queue tracks exactly the pages of its tier;
//   - every resident page that has a parent is counted, by its tier, in
//     exactly one place: its parent's kids when the parent is resident,
//     else the waiter of the parent key; listed in the same place, once;
//     and names that place (entry.up: the parent's ref, or the waiter);
//   - a list holds exactly the pages its counts count, each resident and
//     naming the list's parent or waiter; sibPrev is zero exactly for a
//     list's first;
//   - a waiter exists only while its counts are not all zero, and never
//     for a resident key; nor does a remote-waiting entry; waiting finds
//     each waiter by its key, and every other waiter index is free, once;
//   - a page's queue counts as local children its resident children in
//     its own or faster tiers (leaf first: it is dropped or demoted only
//     after them), and its list walk ends;
//   - the page and byte counters equal what the index holds;
//   - each tenant's open reservations (count, bytes, bytes per tier) are
//     what its usage record says (quota.go, "The reservation share"), and
//     within its share of each tier (or one page there).
//
// It returns every violation found, joined; nil when the bookkeeping is
// consistent. The store's tests run it after each test that builds a store.
func (s *Store) checkLineage() error {
	s.lock()
	defer s.unlock()
	s.nsMu.RLock()
	spaces := make([]*nsState, 0, len(s.ns))
	for _, n := range s.ns {
		spaces = append(spaces, n)
	}
	s.nsMu.RUnlock()

	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	p := &s.policy
	perTier := make([]int, len(p.pol))
	var pages, bytes int64
	remoteWaiting := 0
	for _, n := range spaces {
		var all []*entry
		for i := range n.shards {
			sh := &n.shards[i]
			sh.mu.RLock()
			if err := sh.m.check(); err != nil {
				bad("namespace %s shard %d: %v", n.ID.Short(), i, err)
			}
			for e := range sh.m.all() {
				if e.ns != n {
					bad("page %s: indexed in %s", e.key, n.ID.Short())
				}
				all = append(all, e)
			}
			sh.mu.RUnlock()
		}
		resident := func(k namespace.Key) *entry {
			if e := n.shard(k).get(k); e != nil && !e.dead {
				return e
			}
			return nil
		}
		listed := make(map[*entry]int, len(all))
		var tierPages [MaxTiers]int64
		var nsBytes int64
		for _, e := range all {
			if e.dead {
				bad("page %s: dead but indexed", e.key)
				continue
			}
			tierPages[e.tier]++
			nsBytes += e.size()
			s.checkTrackedLocked(e, bad)
			if _, ok := n.remoteWaiting[e.key]; ok {
				bad("page %s: resident with a remote-waiting entry", e.key)
			}
			if e.h != 0 && int(e.tier) < len(p.pol) {
				local, _ := p.pol[e.tier].Children(e.h)
				if want := min(e.localKids(), math.MaxUint16); local != want {
					bad("page %s in tier %d: its queue counts %d local children, its kids %v say %d", e.key, e.tier, local, e.kids, want)
				}
			}
			if e.h != 0 {
				s.checkListLocked(fmt.Sprintf("children of %s", e.key), e.ref(), false, e.kidHead, e.kids, n, listed, len(all), bad)
			}
			switch {
			case e.upWaits && !n.waiting.live(uint32(e.up)):
				bad("page %s: names waiter %d, which is not one", e.key, e.up)
			case e.hasParent() && !e.upWaits && (s.entryAt(e.up) == nil || s.entryAt(e.up).ns != n ||
				resident(s.entryAt(e.up).key) != s.entryAt(e.up)):
				bad("page %s: names parent ref %#x, which is no resident page of its namespace", e.key, e.up)
			}
		}
		if err := n.waiting.check(); err != nil {
			bad("namespace %s waiters: %v", n.ID.Short(), err)
		}
		for k, i := range n.waiting.all() {
			if !n.waiting.live(i) {
				continue // reported by check
			}
			w := n.waiting.at(i)
			if w.n == ([MaxTiers]uint16{}) {
				bad("waiting entry %s: all counts zero", k)
			}
			if resident(k) != nil {
				bad("page %s: resident with a waiting entry", k)
				continue
			}
			s.checkListLocked(fmt.Sprintf("waiting children of %s", k), ref(i), true, w.head, w.n, n, listed, len(all), bad)
		}
		for _, e := range all {
			if e.dead {
				continue
			}
			switch c := listed[e]; {
			case e.hasParent() && c != 1:
				parent, _ := s.parentKeyLocked(e)
				bad("page %s (parent %s): in %d child lists, not 1", e.key, parent, c)
			case !e.hasParent() && c != 0:
				bad("page %s: has no parent but is in %d child lists", e.key, c)
			}
		}
		for t, got := range tierPages {
			if have := n.tierPages[t].Load(); have != got {
				bad("namespace %s tier %d: counter says %d pages, the index holds %d", n.ID.Short(), t, have, got)
			}
			if t < len(perTier) {
				perTier[t] += int(got)
			}
		}
		if have, got := n.pages.Load(), int64(len(all)); have != got {
			bad("namespace %s: counter says %d pages, the index holds %d", n.ID.Short(), have, got)
		}
		if have := n.bytes.Load(); have != nsBytes {
			bad("namespace %s: counter says %d bytes, the index holds %d", n.ID.Short(), have, nsBytes)
		}
		pages += int64(len(all))
		bytes += nsBytes
		remoteWaiting += len(n.remoteWaiting)
	}
	for t, q := range p.pol {
		if q.Len() != perTier[t] {
			bad("tier %d: its queue tracks %d pages, the index holds %d there", t, q.Len(), perTier[t])
		}
		owned := 0
		for _, e := range p.owner[t] {
			if e != nil {
				owned++
			}
		}
		if owned != perTier[t] {
			bad("tier %d: %d handles have owners, the index holds %d pages there", t, owned, perTier[t])
		}
	}
	if s.pages != pages || s.bytes != bytes {
		bad("store counters say %d pages, %d bytes; the index holds %d, %d", s.pages, s.bytes, pages, bytes)
	}
	if p.remoteWaiting != remoteWaiting {
		bad("remote-waiting counter says %d, the namespaces hold %d", p.remoteWaiting, remoteWaiting)
	}
	s.checkReservedLocked(bad)
	return errors.Join(errs...)
}

// checkReservedLocked checks each tenant's usage record against its open
// reservations, and those against its share of each tier.
func (s *Store) checkReservedLocked(bad func(string, ...any)) {
	held := map[string]*tenantUse{}
	count := map[string]*[MaxTiers]int{} // reservations per tier
	for _, r := range s.reservations {
		u := held[r.ns.Tenant]
		if u == nil {
			u = &tenantUse{}
			held[r.ns.Tenant], count[r.ns.Tenant] = u, new([MaxTiers]int)
		}
		u.Reservations++
		u.ReserveBytes += r.spec.Size
		u.tierReserved[r.tier] += heldBytes(r.ext)
		count[r.ns.Tenant][r.tier]++
	}
	for t, u := range s.usage {
		if held[t] == nil {
			held[t], count[t] = &tenantUse{}, new([MaxTiers]int)
		}
		if h := held[t]; h.Reservations != u.Reservations || h.ReserveBytes != u.ReserveBytes || h.tierReserved != u.tierReserved {
			bad("tenant %q: usage says %d reservations of %d bytes (%v by tier), it holds %d of %d (%v)",
				t, u.Reservations, u.ReserveBytes, u.tierReserved, h.Reservations, h.ReserveBytes, h.tierReserved)
		}
	}
	for t, h := range held {
		if s.usage[t] == nil && h.Reservations > 0 {
			bad("tenant %q holds %d reservations and has no usage record", t, h.Reservations)
		}
		for i := range s.cfg.Tiers {
			if h.tierReserved[i] > s.reserveCap[i] && count[t][i] > 1 {
				bad("tenant %q holds %d bytes reserved in tier %d, past its share of %d", t, h.tierReserved[i], i, s.reserveCap[i])
			}
		}
	}
}

// checkTrackedLocked checks that e's tier queue tracks it under its handle.
func (s *Store) checkTrackedLocked(e *entry, bad func(string, ...any)) {
	p := &s.policy
	switch {
	case int(e.tier) >= len(p.pol):
		bad("page %s: tier %d of %d", e.key, e.tier, len(p.pol))
	case e.h == 0 || int(e.h) >= len(p.owner[e.tier]) || p.owner[e.tier][e.h] != e:
		bad("page %s: handle %d of tier %d is not its own", e.key, e.h, e.tier)
	}
}

// entryAt is the tracked entry r names, or nil when r names none.
func (s *Store) entryAt(r ref) *entry {
	t, h := int(r>>(32-refTierBits)), int(r&refHandleMax)
	if t >= len(s.policy.owner) || h >= len(s.policy.owner[t]) {
		return nil
	}
	return s.policy.owner[t][h]
}

// checkListLocked walks the child list from head, whose pages must all be
// resident children in n naming up (a ref, or a waiter when waits) as
// their parent, as many per tier as counts says.
func (s *Store) checkListLocked(what string, up ref, waits bool, head ref, counts [MaxTiers]uint16, n *nsState,
	listed map[*entry]int, limit int, bad func(string, ...any)) {
	var got [MaxTiers]uint16
	var prev ref
	steps := 0
	for r := head; r != 0; {
		if steps++; steps > limit {
			bad("%s: the list does not end within %d pages", what, limit)
			return
		}
		c := s.entryAt(r)
		if c == nil {
			bad("%s: ref %#x names no tracked page", what, r)
			return
		}
		if c.sibPrev != prev {
			bad("%s: page %s has sibPrev %#x, want %#x", what, c.key, c.sibPrev, prev)
		}
		if c.dead || c.ns != n || c.up != up || c.upWaits != waits {
			bad("%s: lists page %s (dead %v, names %#x, waiter %v)", what, c.key, c.dead, c.up, c.upWaits)
		}
		listed[c]++
		got[c.tier]++
		prev, r = r, c.sibNext
	}
	if got != counts {
		bad("%s: counts say %v by tier, the list holds %v", what, counts, got)
	}
}
