package store

import (
	"fmt"

	"github.com/stratakv/strata/namespace"
)

// # Child counts and child lists
//
// Every resident page that has a parent is counted, by the tier it is in,
// in exactly one place: its parent's entry.kids when the parent is resident
// here, else the waiter of the parent key (nsState.waiting finds it by the
// key; see policy.go, leaf first). The same pages are also linked, in
// exactly the same place, into a doubly linked list of siblings:
// entry.kidHead of a resident parent, or waiter.head, is the first;
// entry.sibPrev and entry.sibNext link the rest. The lists let the store
// find the children of an absent parent (a parent-gone notice from another
// node: ParentsGone) and of a resident page it drops as an orphan (its
// subtree goes first, leaf first).
//
// A child names that place (entry.up): its resident parent's ref, or its
// waiter's index (upWaits). It keeps no parent key: the parent's entry or
// the waiter holds it (parentKeyLocked), which saves 28 bytes a page. A
// parent whose ref changes (tracked on insertion or in another tier)
// renames its children (adoptLocked); one that leaves while children stay
// hands them to a waiter for its key (parentLeftLocked), and one that
// arrives takes its waiter's children over (parentArrivedLocked).
//
// Invariants, under Store.mu, after every operation:
//   - a list holds exactly the pages its counts count: as many, in the same
//     tiers, each resident and naming the list's parent or waiter;
//   - a waiter exists only while its counts are not all zero, and a
//     resident page's key has none (its children are its own);
//   - sibPrev is zero exactly for the first of a list.
//
// The links are refs (a tier and that tier's eviction handle, 4 bytes),
// not pointers, to keep an entry small; a ref is valid while its page is
// tracked, so a page leaves its list before its handle is released
// (removeLocked) or changed (moveTierLocked), and joins it again once
// tracked. The lists are unordered.

// ref names a tracked entry: its tier in the top refTierBits bits and its
// handle in its tier's queue below. 0 is none (no handle is 0).
type ref uint32

const (
	refTierBits  = 2
	refHandleMax = 1<<(32-refTierBits) - 1
)

// Every tier index fits refTierBits (a compile error otherwise).
const _ = uint(1<<refTierBits - MaxTiers)

func (e *entry) ref() ref { return ref(e.tier)<<(32-refTierBits) | ref(e.h) }

// at is the entry r names.
func (s *Store) at(r ref) *entry {
	return s.policy.owner[r>>(32-refTierBits)][r&refHandleMax]
}

// checkRef panics when e's handle does not fit a ref: a tier would
// hold over a billion pages (some 300 GB of index).
func checkRef(e *entry) {
	if e.h > refHandleMax {
		panic(fmt.Sprintf("store: tier %d holds more than %d pages", e.tier, refHandleMax))
	}
}

// waiter is what a namespace keeps for a parent key whose page is not
// resident here but has resident children, which name it by its index
// (entry.up with upWaits).
type waiter struct {
	key  namespace.Key
	n    [MaxTiers]uint16 // the children by tier
	head ref              // the first of them
}

// waiterLocked is the index of k's waiter in n, made (with no children
// counted yet) if there is none.
func (s *Store) waiterLocked(n *nsState, k namespace.Key) uint32 {
	if i, ok := n.waiting.get(k); ok {
		return i
	}
	return n.waiting.add(k)
}

// attachLocked links a newly inserted e to its parent: the resident page
// of parent here, else parent's waiter. A page named as its own parent has
// none (it could never leave: its counts would not drop).
func (s *Store) attachLocked(e *entry, parent namespace.Key, hasParent bool) {
	if !hasParent || parent == e.key {
		return
	}
	if par := e.ns.shard(parent).get(parent); par != nil && !par.dead {
		e.up, e.upWaits = par.ref(), false
		return
	}
	e.up, e.upWaits = ref(s.waiterLocked(e.ns, parent)), true
}

// detachLocked unlinks a removed e from its parent, once its counts no
// longer include it: a waiter that counts no child any more goes.
func (s *Store) detachLocked(e *entry) {
	if e.upWaits && e.ns.waiting.at(uint32(e.up)).n == ([MaxTiers]uint16{}) {
		e.ns.waiting.drop(uint32(e.up))
	}
	e.up, e.upWaits = 0, false
}

// parentKeyLocked is e's parent's key and whether it has one; e must be
// resident.
func (s *Store) parentKeyLocked(e *entry) (namespace.Key, bool) {
	switch {
	case e.up == 0:
		return namespace.Key{}, false
	case e.upWaits:
		return e.ns.waiting.at(uint32(e.up)).key, true
	}
	return s.at(e.up).key, true
}

// headLocked is the first child in the list e belongs to, and a function
// that sets it. The list is its parent's if resident, else its waiter's.
func (s *Store) headLocked(e *entry) (ref, func(ref)) {
	if e.upWaits {
		w := e.ns.waiting.at(uint32(e.up))
		return w.head, func(r ref) { w.head = r }
	}
	par := s.at(e.up)
	return par.kidHead, func(r ref) { par.kidHead = r }
}

// linkLocked adds a tracked e to the list of its parent's children; its
// counts must already include it (childLocked).
func (s *Store) linkLocked(e *entry) {
	if !e.hasParent() {
		return
	}
	head, set := s.headLocked(e)
	r := e.ref()
	e.sibPrev, e.sibNext = 0, head
	if head != 0 {
		s.at(head).sibPrev = r
	}
	set(r)
}

// unlinkLocked takes e out of the list of its parent's children, before
// its counts drop (childLocked) and while its neighbours are tracked.
func (s *Store) unlinkLocked(e *entry) {
	if !e.hasParent() {
		return
	}
	if e.sibPrev != 0 {
		s.at(e.sibPrev).sibNext = e.sibNext
	} else {
		_, set := s.headLocked(e)
		set(e.sibNext)
	}
	if e.sibNext != 0 {
		s.at(e.sibNext).sibPrev = e.sibPrev
	}
	e.sibPrev, e.sibNext = 0, 0
}

// waitingLocked appends to out the resident children of k, a key not
// resident in n.
func (s *Store) waitingLocked(n *nsState, k namespace.Key, out []*entry) []*entry {
	i, ok := n.waiting.get(k)
	if !ok {
		return out
	}
	for r := n.waiting.at(i).head; r != 0; {
		c := s.at(r)
		out = append(out, c)
		r = c.sibNext
	}
	return out
}

// parentArrivedLocked gives a newly inserted e the children that were
// waiting for it: their counts and their list. They name e once it is
// tracked (adoptLocked).
func (s *Store) parentArrivedLocked(e *entry) {
	if i, ok := e.ns.waiting.get(e.key); ok {
		w := e.ns.waiting.at(i)
		e.kids, e.kidHead = w.n, w.head
		e.ns.waiting.drop(i)
	}
}

// adoptLocked makes e's children name e by its ref, which changed (e was
// just tracked: inserted or moved to another tier).
func (s *Store) adoptLocked(e *entry) {
	r := e.ref()
	for c := e.kidHead; c != 0; {
		k := s.at(c)
		k.up, k.upWaits = r, false
		c = k.sibNext
	}
}

// parentLeftLocked hands the counts and the list of a removed e whose
// children stay resident to a waiter for its key, which they then name.
func (s *Store) parentLeftLocked(e *entry) {
	if e.kids != ([MaxTiers]uint16{}) {
		i := s.waiterLocked(e.ns, e.key)
		w := e.ns.waiting.at(i)
		w.n, w.head = e.kids, e.kidHead
		for c := e.kidHead; c != 0; {
			k := s.at(c)
			k.up, k.upWaits = ref(i), true
			c = k.sibNext
		}
	}
	e.kids, e.kidHead = [MaxTiers]uint16{}, 0
}

// childLocked records that e became resident in tier (delta +1) or stopped
// being resident there (delta -1), in its parent's counts or its waiter's.
// The list is linkLocked's and unlinkLocked's.
func (s *Store) childLocked(e *entry, tier int, delta int) {
	if !e.hasParent() {
		return
	}
	if e.upWaits {
		w := e.ns.waiting.at(uint32(e.up))
		w.n[tier] = uint16(int(w.n[tier]) + delta)
		s.hintLocked(ChildHint{NS: e.ns.ID, Parent: w.key, Added: delta > 0})
		return
	}
	par := s.at(e.up)
	par.kids[tier] = uint16(int(par.kids[tier]) + delta)
	if tier <= int(par.tier) {
		q := s.policy.pol[par.tier]
		if delta > 0 {
			q.ChildAdded(par.h, true)
		} else {
			q.ChildRemoved(par.h, true)
		}
	}
}
