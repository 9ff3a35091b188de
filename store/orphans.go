package store

import (
	"time"

	"github.com/stratakv/strata/namespace"
)

// # Orphans
//
// A page whose ancestor is gone can never be part of a hit prefix until
// that ancestor is put again: its bytes are wasted. The store learns of
// such pages two ways: a parent-gone notice from the node that dropped the
// parent (ParentsGone: every resident child listed under the parent's key
// in waiting), and a cluster lookup that found pages past a miss
// (MarkOrphans). A lookup's miss may be a node that is down for a while
// and comes back with its pages, so MarkOrphans only marks (evicted
// first). A notice is the parent's owner saying it dropped the page, and
// this rule applies to each child it names:
//
//   - pinned (leased, or being read), or put (committed, or put again and
//     answered EXISTS) within Config.OrphanGrace: only marked as an orphan
//     (evicted first; a hit or a put clears the mark). The grace keeps the
//     children of a parent that was dropped and put again while the notice
//     was in flight;
//   - otherwise dropped now, after its resident descendants here (leaf
//     first, invariant 5), which get the same rule: a descendant that must
//     stay keeps its ancestors too (they are marked instead of dropped),
//     and the subtree below a page that stays is left alone.
//
// A dropped page that had children on other nodes sends a parent-gone
// notice in turn (removeLocked), so an orphaned sequence unravels across
// the cluster without waiting for lookups.
//
// Parent keys come from clients and are not verified, so the index may
// hold a cycle (a's parent b, b's parent a). A walk down from a page can
// only come back to the page it started from (every page has one parent,
// so a cycle is entered only at its start); orphanLocked skips it.

// orphanCount tallies what the orphan rule did.
type orphanCount struct{ dropped, marked int }

// ParentsGone applies a parent-gone notice: the pages keys name were
// dropped on another node, so their resident children here are orphans.
// Each child (and its resident subtree) is dropped, or only marked when
// pinned or younger than Config.OrphanGrace (see Orphans above). Keys with
// no waiting children here, including keys resident here, change nothing.
// It returns how many pages it dropped and how many it newly marked.
func (e Evictor) ParentsGone(id namespace.ID, keys []namespace.Key) (dropped, marked int, err error) {
	s := e.s
	n, err := s.namespace(id)
	if err != nil {
		return 0, 0, err
	}
	now := s.clock(time.Now())
	s.lock()
	defer s.unlock()
	var c orphanCount
	for _, k := range keys {
		s.parentGoneLocked(n, k, now, &c)
	}
	return c.dropped, c.marked, nil
}

func (s *Store) parentGoneLocked(n *nsState, k namespace.Key, now int32, c *orphanCount) {
	if _, ok := n.waiting.get(k); !ok {
		return
	}
	for _, e := range s.waitingLocked(n, k, nil) {
		if !e.dead { // siblings' subtrees are disjoint; be sure
			s.orphanLocked(e, now, c)
		}
	}
}

// MarkOrphans marks the pages of keys that this store holds as orphans: a
// cluster lookup found them past a missing page of their sequence (on
// another node, out of this store's sight), so no hit prefix can reach them
// until that page is put again. Marked pages are the first evicted; a hit,
// or a put of the page, clears the mark. Unlike a parent-gone notice, a
// lookup's miss does not prove the page gone: its node may be restarting
// (it recovers its SSD tier) or the view may have moved its keys for a
// while, so lookup-found orphans are never dropped on that word alone.
// Keys not held are skipped. It returns how many pages it newly marked.
func (r Reader) MarkOrphans(id namespace.ID, keys []namespace.Key) (int, error) {
	s := r.s
	n, err := s.namespace(id)
	if err != nil {
		return 0, err
	}
	found := make([]*entry, len(keys))
	n.getAll(keys, found)
	s.lock()
	defer s.unlock()
	var c orphanCount
	for _, e := range found {
		if e != nil && !e.dead {
			s.markOrphanLocked(e, &c)
		}
	}
	return c.marked, nil
}

// Uncount takes back what a lookup counted for the pages of keys (their
// hit-prefix tokens and the prefill FLOPs they saved, the namespace's
// counters): a cluster lookup found them in this store's part of the
// request but past a page that was missing on another node, so they were
// not part of the engine's hit prefix. Keys not held are skipped (a page
// gone since is not priced). It returns the tokens and FLOPs it took back.
func (r Reader) Uncount(id namespace.ID, keys []namespace.Key) (tokens int, flops float64, err error) {
	s := r.s
	n, err := s.namespace(id)
	if err != nil {
		return 0, 0, err
	}
	found := make([]*entry, len(keys))
	n.getAll(keys, found)
	s.lock()
	defer s.unlock()
	took, saved := 0, 0.0
	for _, e := range found {
		if e != nil && !e.dead {
			saved += n.pageCost(e.depth)
			took++
		}
	}
	n.savedFLOPs = max(n.savedFLOPs-saved, 0)
	back := uint64(took) * uint64(n.PageTokens)
	for {
		old := n.hitTokens.Load()
		if n.hitTokens.CompareAndSwap(old, old-min(old, back)) {
			break
		}
	}
	return int(back), saved, nil
}

// orphanLocked applies the orphan rule to root, a resident page with an
// absent ancestor, and its resident descendants.
func (s *Store) orphanLocked(root *entry, now int32, c *orphanCount) {
	// Breadth first from root: parents before their children. Pages that
	// stay are marked now and their subtrees left alone (nil).
	sub := []*entry{root}
	for i := 0; i < len(sub); i++ {
		e := sub[i]
		if e.pins > 0 || s.youngLocked(e, now) {
			s.markOrphanLocked(e, c)
			sub[i] = nil
			continue
		}
		for r := e.kidHead; r != 0; {
			k := s.at(r)
			r = k.sibNext
			if k != root { // a cycle back to root (see Orphans above)
				sub = append(sub, k)
			}
		}
	}
	// Deepest first: each page after all its children.
	for i := len(sub) - 1; i >= 0; i-- {
		e := sub[i]
		switch {
		case e == nil:
		case e.kids != [MaxTiers]uint16{}: // a child stays, so does e
			s.markOrphanLocked(e, c)
		default:
			if s.policy.observeDrop != nil {
				s.policy.observeDrop(e)
			}
			s.removeLocked(e, false)
			e.ns.orphaned.Add(1)
			c.dropped++
		}
	}
}

// youngLocked reports whether e was put (committed, or put again and
// answered EXISTS) within Config.OrphanGrace.
func (s *Store) youngLocked(e *entry, now int32) bool {
	g := s.cfg.OrphanGrace
	if g < 0 {
		return false
	}
	return int64(now)-int64(e.put) <= int64((g+time.Second-1)/time.Second)
}

func (s *Store) markOrphanLocked(e *entry, c *orphanCount) {
	if q := s.policy.pol[e.tier]; !q.Orphan(e.h) {
		q.SetOrphan(e.h, true)
		c.marked++
	}
}

// goneLocked sends a parent-gone notice for e, which is leaving the store,
// when it has children on other nodes (the only ones a notice reaches:
// children here wait for it in waiting). No notices while a namespace is
// dropped: its pages go everywhere.
func (s *Store) goneLocked(e *entry) {
	if s.cfg.OnRemoteParent == nil || e.ns.dropping || s.handing {
		return
	}
	if _, remote := s.policy.pol[e.tier].Children(e.h); remote > 0 {
		s.hintLocked(ChildHint{NS: e.ns.ID, Parent: e.key, Gone: true})
	}
}
