package store

import (
	"fmt"

	"github.com/stratakv/strata/namespace"
)

// # Child counts and child lists
//
// Every resident page that has a parent is counted, by the tier it is in,
// in exactly one place: its parent's entry.kids when the parent is resident
// here, else nsState.waiting[parent key] (see policy.go, leaf first). The
// same pages are also linked, in exactly the same place, into a doubly
// linked list of siblings: entry.kidHead of a resident parent, or
// waitingKids.head, is the first; entry.sibPrev and entry.sibNext link the
// rest. The lists let the store find the children of an absent parent (a
// parent-gone notice from another node: ParentsGone) and of a resident page
// it drops as an orphan (its subtree goes first, leaf first).
//
// Invariants, under Store.mu, after every operation:
//   - a list holds exactly the pages its counts count: as many, in the same
//     tiers, each resident with the list's parent key;
//   - a waiting entry exists only while its counts are not all zero, and a
//     resident page's key has no waiting entry (its children are its own);
//   - sibPrev is zero exactly for the first of a list.
//
// The links are refs (a tier and that tier's eviction handle, 4 bytes),
// not pointers, to keep an entry within 176 bytes; a ref is valid while
// its page is tracked, so a page leaves its list before its handle is
// released (removeLocked) or changed (moveTierLocked), and joins it again
// once tracked. The lists are unordered.

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

// waitingKids is what a namespace keeps for a parent key whose page is not
// resident here but has resident children.
type waitingKids struct {
	n    [MaxTiers]uint16 // the children by tier
	head ref              // the first of them
}

// headLocked is the first child in the list e belongs to, and a function
// that sets it. The list is its parent's if resident, else waiting's.
func (s *Store) headLocked(e *entry) (ref, func(ref)) {
	if par := e.ns.shard(e.parent).get(e.parent); par != nil && !par.dead {
		return par.kidHead, func(r ref) { par.kidHead = r }
	}
	n, k := e.ns, e.parent
	w, ok := n.waiting[k]
	if !ok {
		panic(fmt.Sprintf("store: child %s of absent %s has no waiting entry", e.key, k))
	}
	return w.head, func(r ref) {
		w := n.waiting[k]
		w.head = r
		n.waiting[k] = w
	}
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
	for r := n.waiting[k].head; r != 0; {
		c := s.at(r)
		out = append(out, c)
		r = c.sibNext
	}
	return out
}

// parentArrivedLocked gives a newly inserted e the children that were
// waiting for it: their counts and their list.
func (s *Store) parentArrivedLocked(e *entry) {
	if w, ok := e.ns.waiting[e.key]; ok {
		e.kids, e.kidHead = w.n, w.head
		delete(e.ns.waiting, e.key)
	}
}

// parentLeftLocked hands the counts and the list of a removed e whose
// children stay resident back to waiting.
func (s *Store) parentLeftLocked(e *entry) {
	if e.kids != ([MaxTiers]uint16{}) {
		e.ns.waiting[e.key] = waitingKids{n: e.kids, head: e.kidHead}
	}
	e.kids, e.kidHead = [MaxTiers]uint16{}, 0
}

// childLocked records that e became resident in tier (delta +1) or stopped
// being resident there (delta -1), in its parent's counts or in waiting.
// The list is linkLocked's and unlinkLocked's.
func (s *Store) childLocked(e *entry, tier int, delta int) {
	if !e.hasParent() {
		return
	}
	par := e.ns.shard(e.parent).get(e.parent)
	if par == nil || par.dead {
		w := e.ns.waiting[e.parent]
		w.n[tier] = uint16(int(w.n[tier]) + delta)
		if w.n == ([MaxTiers]uint16{}) {
			delete(e.ns.waiting, e.parent)
		} else {
			e.ns.waiting[e.parent] = w
		}
		s.hintLocked(ChildHint{NS: e.ns.ID, Parent: e.parent, Added: delta > 0})
		return
	}
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
