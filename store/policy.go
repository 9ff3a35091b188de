package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
)

// Eviction (docs/design.md §5) runs through one eviction.Queue per tier, under
// Store.mu. The store tells each queue what happens to its pages (insert,
// hit, pin, child arrived or left, evicted, moved away) and asks it for the
// next page to demote (the mover) or drop (allocation when every tier is
// full, and the mover when the next tier is full).
//
// # Leaf first across tiers
//
// A lookup stops at the first missing page, so dropping a parent makes its
// resident descendants worthless. Invariant 5: no page is dropped while it
// has resident children on this node. With tiers, a page in tier i counts
// as local children (eviction.Queue.ChildAdded(h, true)) its resident
// children in tiers 0..i: it is demoted only after its children in the same
// or faster tiers left them, and dropped from the last tier only after all
// its children are gone. entry.kids holds the children by tier, so that the
// count can be rebuilt when the parent moves down a tier.
//
// Children may arrive before their parent (another writer, a recovery, a
// parent that was dropped and put again). nsState.waiting counts them by
// parent key and tier; the parent starts from those counts when it is
// inserted, and hands its counts back to waiting when it leaves while
// children remain (a Delete). So for every resident child exactly one of
// its parent's kids or waiting[parent key] counts it, whatever the order;
// the same place lists it (kids.go).
//
// # Remote children
//
// A child whose parent is not resident here is reported through
// Config.OnRemoteParent (batched, outside the lock, as soon as the hinter
// runs): the node forwards it to the parent's owner, whose ApplyHints marks
// the parent as having remote children (it goes after childless pages).
//
// # Parent-gone notices
//
// When a page that has remote children leaves the store (evicted from the
// last tier, deleted, expired, corrupt, dropped as an orphan), the store
// sends a parent-gone notice (ChildHint.Gone) by the same path; the node
// sends it to the nodes that sent it hints about the page (peer.Holders;
// the page's placement candidates when none are known), and every node
// that holds children of the page and gets it drops them
// at once (ParentsGone, orphans.go) instead of keeping them until a lookup
// finds them past the miss or their tier needs room.
//
// # Value hints
//
// Dropping a page makes its descendants unreachable, so the cost policy
// orders a page by the larger of its own worth and its best descendant's
// (eviction.Queue.SetChildWorth). After a lookup hits a page and after a
// page is published, its worth goes up the chain: to its parent here
// (raising it only: a parent's child worth otherwise fades with age), and
// on up while that raises something; a parent that lives on another node
// gets it through a value hint (ChildHint.Worth) by the same path as child
// hints, and its node carries it on up from there.
//
// # Admission and cutoffs
//
// When every tier is full, a Reserve asks the last tier's queue to admit the
// page (eviction.Queue.Admit: worth at least the cutoff; the adaptive cost
// policy also refuses a first-time page that ends its put when pages like
// it have come back less often than evicted pages, eviction/adapt.go)
// before dropping anything; a refusal is
// ErrNotAdmitted, which a cluster client answers by putting the page on its
// second placement candidate. Cutoffs come from the cluster's coordinator
// (SetCutoffs) or, without one, are local.

// maxPendingHints bounds the child hints waiting for the hinter to hand
// them to Config.OnRemoteParent; beyond it they are dropped and counted
// (hints are advisory).
const maxPendingHints = 1 << 16

// turnoverWindow is the time constant of the turnover average gossiped in
// summaries.
const turnoverWindow = time.Minute

// ChildHint says that a page whose parent is Parent became resident (Added)
// or stopped being resident on some node that does not hold the parent; or,
// with Worth > 0, that such a page is worth Worth (a value hint: Added is
// then meaningless); or, with Gone, that the page Parent itself left the
// node that sends the hint while it had children elsewhere (a parent-gone
// notice, for the nodes holding its children: ParentsGone; Added and Worth are then
// meaningless).
type ChildHint struct {
	NS     namespace.ID
	Parent namespace.Key
	Added  bool
	Worth  float64
	Gone   bool
}

// policyState is the store's eviction state, guarded by Store.mu.
type policyState struct {
	pol   []*eviction.Queue // per tier
	owner [][]*entry        // per tier: the entry of each handle

	// Cutoffs last set by SetCutoffs.
	cutoffs     []float64
	epoch       uint64
	coordinated bool

	hints         []ChildHint
	hintsDropped  uint64
	remoteWaiting int // entries in every namespace's remoteWaiting

	// Turnover: bytes that left each tier (evicted, refused, demoted), and
	// the smoothed rate per byte of capacity per second.
	out, outSeen []int64
	turnover     []float64
	turnAt       time.Time

	sized bool // newQueues ran for a namespace's page size

	// observeDrop, when set, sees every page just before it is dropped to
	// make room (the property tests check invariant 5 there).
	observeDrop func(*entry)
}

func (s *Store) initPolicy() error {
	p := &s.policy
	n := len(s.cfg.Tiers)
	p.pol = make([]*eviction.Queue, n)
	p.owner = make([][]*entry, n)
	p.cutoffs = make([]float64, n)
	p.out, p.outSeen, p.turnover = make([]int64, n), make([]int64, n), make([]float64, n)
	p.turnAt = time.Now()
	return s.newQueues(0)
}

// maxPreallocPages bounds the policy state a tier's queue sets aside up
// front (48 bytes a page: the queue's state and the handle-to-entry table).
const maxPreallocPages = 1 << 20

// newQueues makes each tier's queue, sized for pages of pageBytes (0:
// unknown): the frequency history and the reuse counts' half-life scale
// with the pages a tier holds.
func (s *Store) newQueues(pageBytes int64) error {
	p := &s.policy
	for i, t := range s.cfg.Tiers {
		capBytes, pages := t.Stats().Capacity, int64(0)
		if pageBytes > 0 {
			pages = capBytes / pageBytes
		}
		// State is preallocated for at most maxPreallocPages pages (it grows
		// past them); the half-life follows the tier's real size.
		prealloc := min(pages, maxPreallocPages)
		q, err := eviction.New(eviction.Config{Kind: s.cfg.Eviction, CapacityBytes: capBytes,
			Capacity: int(prealloc), HalfLife: s.cfg.Tuning.halfLife(pages), History: s.cfg.Tuning.history(prealloc),
			AdmitShare: s.cfg.Tuning.AdmitShare, CapacityAdmission: s.cfg.Tuning.CapacityAdmission,
			Static: s.cfg.Tuning.Static, Ident: s.identOf(i)})
		if err != nil {
			return err
		}
		q.SetCutoff(p.cutoffs[i])
		p.pol[i] = q
		p.owner[i] = make([]*entry, 1, prealloc+1)
	}
	return nil
}

// identOf answers tier's queue what pageOf told it of a tracked page (its
// key hash, namespace and size: ident), from the entry that owns the
// handle, so that the queue keeps no copy (eviction.IdentBytes a page).
func (s *Store) identOf(tier int) func(eviction.Handle) eviction.Ident {
	return func(h eviction.Handle) eviction.Ident { return s.policy.owner[tier][h].ident() }
}

// ident is the page's key hash, namespace and size as its queue knows
// them (pageOf, identOf).
func (e *entry) ident() eviction.Ident {
	return eviction.Ident{Key: keyHash(e.key), Group: nsGroup(e.ns.ID), Bytes: e.size()}
}

// EvictionTuning departs from the shipped eviction policy, for experiments
// (cmd/strata-sim compares variants of the policy with it). The zero value
// is the shipped policy.
type EvictionTuning struct {
	// HalfLife is the reuse counts' half-life in tier capacities (page
	// operations per page the tier holds), fixed (eviction.Config.HalfLife).
	// 0 means the policy learns it, from eviction.DefaultHalfLife of the
	// tier's pages. Not negative, NaN or infinite (New refuses it).
	HalfLife float64
	// Static is eviction.Config.Static: the cost policy with constants
	// (no ghost list, no learned half-life or first-timer reuse, no
	// comparison with the victim unless CapacityAdmission). Default false.
	Static bool
	// AdmitShare is eviction.Config.AdmitShare: the share of the cutoff
	// below which a full store refuses a page; 0 means
	// eviction.DefaultAdmitShare.
	AdmitShare float64
	// CapacityAdmission is eviction.Config.CapacityAdmission: a full
	// Static store also refuses a page worth less than its victim (an
	// adaptive one always does). Default false.
	CapacityAdmission bool
	// History is how many distinct recent keys the cost policy's frequency
	// history remembers, in tier capacities: keys per page the tier holds
	// (eviction.Config.History; for tiers of over maxPreallocPages pages,
	// per page of that many, as the policy's own default). 0 means the
	// policy's default, 8. The history takes 2 bytes a remembered key
	// (history-B in BenchmarkIndexBytesPerPage); strata-sim --history
	// shows what a smaller one gives up. Not negative, NaN or infinite
	// (New refuses it).
	History float64
}

// Validate refuses a half-life or history that is not a number of tier
// capacities (negative, NaN or infinite); New calls it.
func (t EvictionTuning) Validate() error {
	for _, f := range []struct {
		name, zero string
		v          float64
	}{{"half-life", "learned", t.HalfLife}, {"history", "the policy's default", t.History}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("eviction %s %v, want a number of tier capacities >= 0 (0: %s)", f.name, f.v, f.zero)
		}
	}
	return nil
}

// maxHistoryKeys bounds EvictionTuning.History's keys (a 2 GiB history),
// so that a large multiple cannot overflow an int.
const maxHistoryKeys = 1 << 30

// history is the frequency history of a tier's queue sized for pages
// pages, or 0 for the policy's default.
func (t EvictionTuning) history(pages int64) int {
	if t.History == 0 || pages <= 0 {
		return 0
	}
	return int(max(min(t.History*float64(pages), maxHistoryKeys), 1))
}

// halfLife is the fixed half-life of a tier of pages pages (0: unknown),
// or 0 when the policy learns it.
func (t EvictionTuning) halfLife(pages int64) int {
	if t.HalfLife == 0 {
		return 0
	}
	if pages <= 0 {
		return eviction.DefaultHalfLife(pages)
	}
	return max(int(t.HalfLife*float64(min(pages, 1<<40))), 1)
}

// sizeQueuesLocked sizes the queues for a namespace's pages when nothing
// is tracked yet: the first namespace added decides (a node usually serves
// one model's pages; later namespaces of other sizes share the estimate).
func (s *Store) sizeQueuesLocked(pageBytes int64) {
	p := &s.policy
	if p.sized {
		return
	}
	for _, q := range p.pol {
		if q.Len() > 0 {
			return
		}
	}
	if err := s.newQueues(pageBytes); err != nil {
		s.log.Error("sizing eviction queues", "page_bytes", pageBytes, "err", err)
		return
	}
	p.sized = true
}

// keyHash is the 64-bit key the policies' frequency history uses.
func keyHash(k namespace.Key) uint64 { return binary.LittleEndian.Uint64(k[:8]) }

// nsGroup is the namespace's eviction.Page.Group: the policies learn the
// reuse of new pages per namespace.
func nsGroup(id namespace.ID) uint32 { return binary.LittleEndian.Uint32(id[:4]) }

// pageCost is the prefill FLOPs a page at depth saves given its prefix, or
// 0 when the namespace has no compute profile.
func (n *nsState) pageCost(depth uint32) float64 {
	if n.PageTokens == 0 || (n.FLOPsLinear == 0 && n.FLOPsQuadratic == 0) {
		return 0
	}
	p := float64(n.PageTokens)
	start := float64(depth) * p
	return n.FLOPsLinear*p + n.FLOPsQuadratic*(2*start*p+p*p)
}

func (s *Store) pageOf(e *entry) eviction.Page {
	cost := float64(e.cost)
	if cost <= 0 {
		cost = e.ns.pageCost(e.depth)
	}
	id := e.ident()
	page := eviction.Page{Key: id.Key, Bytes: id.Bytes, Depth: e.depth,
		Tokens: int(e.ns.PageTokens), Cost: cost, Group: id.Group}
	if e.cost <= 0 {
		page.FlatCost = e.ns.pageCost(0)
	}
	return page
}

// trackLocked starts tracking e in its tier's queue. freq is the reuse
// count to start from (0: the history's), chain the depth of its deepest
// descendant published with it (eviction.Page.ChainDepth; 0 none), remote
// the remote children it is known to have, orphan whether its parent is
// known absent.
func (s *Store) trackLocked(e *entry, freq, chain uint32, remote int, orphan bool) {
	p := &s.policy
	page := s.pageOf(e)
	page.Freq, page.Orphan = freq, orphan
	page.ChainDepth, page.ChainCost = chain, e.ns.pageCost(chain)
	q := p.pol[e.tier]
	e.h = q.Insert(page)
	checkRef(e)
	own := p.owner[e.tier]
	for int(e.h) >= len(own) {
		own = append(own, nil)
	}
	own[e.h] = e
	p.owner[e.tier] = own
	for range e.localKids() {
		q.ChildAdded(e.h, true)
	}
	for range remote {
		q.ChildAdded(e.h, false)
	}
	if e.pins > 0 {
		q.Pin(e.h)
	}
}

// untrackLocked stops tracking e; evicted says it was dropped to make room
// (the queue's aging clock moves to it).
func (s *Store) untrackLocked(e *entry, evicted bool) {
	p := &s.policy
	q := p.pol[e.tier]
	if evicted {
		q.Evict(e.h)
	} else {
		q.Remove(e.h)
	}
	p.owner[e.tier][e.h] = nil
	e.h = 0
}

// localKids is how many of e's resident children count against dropping or
// demoting it: those in its own tier or faster ones.
func (e *entry) localKids() int {
	n := 0
	for t := 0; t <= int(e.tier); t++ {
		n += int(e.kids[t])
	}
	return n
}

func (s *Store) hintLocked(h ChildHint) {
	p := &s.policy
	if s.cfg.OnRemoteParent == nil {
		return
	}
	if len(p.hints) >= maxPendingHints {
		p.hintsDropped++
		return
	}
	if len(p.hints) == 0 {
		select {
		case s.hintWake <- struct{}{}:
		default:
		}
	}
	p.hints = append(p.hints, h)
}

// hintEvery is how often the hinter looks for pending hints without a
// wake-up.
const hintEvery = 10 * time.Millisecond

// hinter hands pending hints to Config.OnRemoteParent as soon as there are
// some, until Close. A parent's node must learn of a remote child before it
// picks its next victims, and under a steady stream of puts a tier turns
// over in well under the 30 ms a timed flush used to add (the trace replay
// saved 12.8% of prefill FLOPs with timed flushes, against the simulator's
// 18.1%), so hints are not held back: those that arrive while
// OnRemoteParent runs go in its next call, which is the only batching.
func (s *Store) hinter() {
	defer s.wg.Done()
	if s.cfg.OnRemoteParent == nil {
		return
	}
	t := time.NewTicker(hintEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.flushHints()
			return
		case <-t.C:
			s.flushHints()
		case <-s.hintWake:
			s.flushHints()
		}
	}
}

// FlushHints hands the pending hints to Config.OnRemoteParent now, in the
// caller's goroutine, and returns once every hint queued before the call
// has been handed over (by this call or by the store's own goroutine).
// The store flushes by itself as soon as hints are queued; a caller that
// must know hints have left, such as the simulator (cmd/strata-sim), which
// delivers them between requests, calls it.
func (e Evictor) FlushHints() {
	e.s.flushHints()
}

// flushHints hands pending child hints to Config.OnRemoteParent, without
// Store.mu; flushMu keeps flushes in order, one at a time.
func (s *Store) flushHints() {
	if s.cfg.OnRemoteParent == nil {
		return
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.lock()
	h := s.policy.hints
	s.policy.hints = make([]ChildHint, 0, len(h)) // as many again: no regrowing under the lock
	s.unlock()
	if len(h) > 0 {
		s.cfg.OnRemoteParent(h)
	}
}

// ApplyHints records that children of local pages appeared or disappeared
// on other nodes, and applies parent-gone notices as ParentsGone does.
// Hints for pages or namespaces this store does not hold are ignored.
func (e Evictor) ApplyHints(hints []ChildHint) {
	s := e.s
	now := s.clock(time.Now())
	s.lock()
	defer s.unlock()
	var gone orphanCount
	var n *nsState // h.NS's, looked up when it changes
	for i, h := range hints {
		if i == 0 || h.NS != hints[i-1].NS {
			s.nsMu.RLock()
			n = s.ns[h.NS]
			s.nsMu.RUnlock()
		}
		if n == nil {
			continue
		}
		if h.Gone {
			s.parentGoneLocked(n, h.Parent, now, &gone)
			continue
		}
		e := n.shard(h.Parent).get(h.Parent)
		if e == nil || e.dead {
			s.hintForAbsentLocked(n, h)
			continue
		}
		if h.Worth > 0 {
			if s.raiseChildWorthLocked(e, h.Worth) {
				s.passWorthLocked(e)
			}
			continue
		}
		if h.Added {
			s.policy.pol[e.tier].ChildAdded(e.h, false)
		} else {
			s.policy.pol[e.tier].ChildRemoved(e.h, false)
		}
	}
}

// remoteKids is what hints said about a parent that is not resident here
// yet: a child put on another node often commits before its parent does
// here (the client writes to every owner at once).
type remoteKids struct {
	n     uint16  // remote children announced and not withdrawn
	worth float64 // the best value hint among them
}

// maxRemoteWaiting bounds the parents remembered for hints that arrived
// before them; further ones are dropped (hints are advisory).
const maxRemoteWaiting = 1 << 16

// hintForAbsentLocked remembers a hint for a parent not resident here, for
// when it arrives (remoteArrivedLocked).
func (s *Store) hintForAbsentLocked(n *nsState, h ChildHint) {
	p := &s.policy
	rk, ok := n.remoteWaiting[h.Parent]
	switch {
	case h.Worth > 0:
		if !ok {
			return // worth of a child no one announced: the parent is gone
		}
		rk.worth = max(rk.worth, h.Worth)
	case h.Added:
		if !ok && p.remoteWaiting >= maxRemoteWaiting {
			p.hintsDropped++
			return
		}
		rk.n++
	case !ok:
		return
	default:
		rk.n--
	}
	switch {
	case rk.n == 0 && ok:
		delete(n.remoteWaiting, h.Parent)
		p.remoteWaiting--
	case rk.n > 0:
		if !ok {
			p.remoteWaiting++
		}
		n.remoteWaiting[h.Parent] = rk
	}
}

// remoteArrivedLocked applies to a newly tracked e the hints that arrived
// before it.
func (s *Store) remoteArrivedLocked(e *entry) {
	rk, ok := e.ns.remoteWaiting[e.key]
	if !ok {
		return
	}
	delete(e.ns.remoteWaiting, e.key)
	s.policy.remoteWaiting--
	q := s.policy.pol[e.tier]
	for range rk.n {
		q.ChildAdded(e.h, false)
	}
	s.raiseChildWorthLocked(e, rk.worth)
}

// maxWorthHops bounds how far up a chain one change of worth is carried on
// this node.
const maxWorthHops = 64

// passWorthLocked carries e's worth up its chain: to its parent here while
// that raises the parent's child worth, or in a value hint to the parent's
// node. Only the cost policy uses it.
func (s *Store) passWorthLocked(e *entry) {
	if s.cfg.Eviction != eviction.KindCost {
		return
	}
	for range maxWorthHops {
		if !e.hasParent() {
			return
		}
		if e.upWaits {
			if s.cfg.OnRemoteParent != nil {
				if w := s.policy.pol[e.tier].Worth(e.h); w > 0 {
					s.hintLocked(ChildHint{NS: e.ns.ID, Parent: e.ns.waiting.at(uint32(e.up)).key, Worth: w})
				}
			}
			return
		}
		par := s.at(e.up)
		if !s.policy.pol[par.tier].PassChildWorth(par.h, s.policy.pol[e.tier], e.h) {
			return
		}
		e = par
	}
}

// raiseChildWorthLocked raises e's best-descendant worth to w if that is
// more than e is worth now, and reports whether it did.
func (s *Store) raiseChildWorthLocked(e *entry, w float64) bool {
	q := s.policy.pol[e.tier]
	if s.cfg.Eviction != eviction.KindCost || w <= q.Worth(e.h) {
		return false
	}
	q.SetChildWorth(e.h, w)
	return true
}

// moveTierLocked moves e's policy state from its tier to dst (a demotion):
// its reuse count, remote children, orphan mark and pin go along, its local
// children are recounted for the new tier, and its parent's counts follow.
func (s *Store) moveTierLocked(e *entry, dst int) {
	p := &s.policy
	src := int(e.tier)
	q := p.pol[src]
	freq, orphan, worth := q.Freq(e.h), q.Orphan(e.h), q.Worth(e.h)
	_, remote := q.Children(e.h)
	s.unlinkLocked(e) // its ref changes with its handle
	s.untrackLocked(e, false)
	p.out[src] += e.size()
	s.childLocked(e, src, -1)
	e.tier = uint8(dst)
	s.childLocked(e, dst, +1)
	s.trackLocked(e, freq, 0, remote, orphan)
	s.adoptLocked(e)
	s.linkLocked(e)
	s.raiseChildWorthLocked(e, worth) // its descendants' worth comes along
}

// victimLocked is the page tier's queue would give up next, or nil.
func (s *Store) victimLocked(tier int) *entry {
	h, ok := s.policy.pol[tier].Victim()
	if !ok {
		return nil
	}
	return s.policy.owner[tier][h]
}

// dropVictimLocked is the page tier's queue would give up next if it may
// be dropped, not demoted: it has no resident children in any tier (a
// victim of a tier above the last may have some in slower tiers).
func (s *Store) dropVictimLocked(tier int) *entry {
	e := s.victimLocked(tier)
	if e == nil || e.kids != ([MaxTiers]uint16{}) {
		return nil
	}
	return e
}

// admitLocked asks the last tier's policy whether a page is worth a drop.
func (s *Store) admitLocked(n *nsState, spec PageSpec) bool {
	last := len(s.policy.pol) - 1
	page := eviction.Page{Key: keyHash(spec.Key), Bytes: spec.Size, Depth: spec.Depth,
		Tokens: int(n.PageTokens), Cost: float64(costHint(spec.CostHint)), ChainDepth: spec.ChainDepth,
		ChainCost: n.pageCost(spec.ChainDepth), Group: nsGroup(n.ID)}
	if page.Cost <= 0 {
		page.Cost, page.FlatCost = n.pageCost(spec.Depth), n.pageCost(0)
	}
	ok := s.policy.pol[last].Admit(page)
	if ok {
		return true
	}
	s.policy.out[last] += spec.Size
	return false
}

// recordKeysLocked counts every key a lookup asked for in each tier's
// frequency history, in runs (eviction.Queue.RecordAll: their cache misses
// overlap).
func (s *Store) recordKeysLocked(keys []namespace.Key) {
	var hs [256]uint64
	for len(keys) > 0 {
		run := hs[:min(len(keys), len(hs))]
		for i := range run {
			run[i] = keyHash(keys[i])
		}
		for _, q := range s.policy.pol {
			q.RecordAll(run)
		}
		keys = keys[len(run):]
	}
}

// recordLookupLocked tells the policies about the rest of one lookup (its
// keys went to the frequency history already: recordKeysLocked): the pages of
// the hit prefix are hits, and a present page whose parent was asked for
// and is absent here is an orphan. It returns the prefill FLOPs the hit
// prefix saves.
func (s *Store) recordLookupLocked(n *nsState, keys []namespace.Key, found []*entry, hitPrefix int) float64 {
	saved := n.savedBy(found[:hitPrefix])
	s.recordHitsLocked(found[:hitPrefix])
	n.savedFLOPs += saved
	n.hitTokens.Add(uint64(hitPrefix) * uint64(n.PageTokens))
	if hitPrefix == len(keys) {
		return saved
	}
	var absent map[namespace.Key]bool
	for i := hitPrefix + 1; i < len(found); i++ {
		e := found[i]
		if e == nil || e.dead || !e.hasParent() {
			continue
		}
		if absent == nil {
			absent = make(map[namespace.Key]bool)
			for j, f := range found {
				if f == nil || f.dead {
					absent[keys[j]] = true
				}
			}
		}
		if k, _ := s.parentKeyLocked(e); absent[k] {
			s.policy.pol[e.tier].SetOrphan(e.h, true)
		}
	}
	return saved
}

// savedBy is the prefill FLOPs the pages of a hit prefix save.
func (n *nsState) savedBy(hits []*entry) float64 {
	saved := 0.0
	for _, e := range hits {
		saved += n.pageCost(e.depth)
	}
	return saved
}

// recordHitsLocked tells the policies that the pages of a hit prefix,
// resident and in request order, were hit: each is no orphan any more,
// and (KindCost) passes its worth up to its parent.
func (s *Store) recordHitsLocked(hits []*entry) {
	for _, e := range hits {
		q := s.policy.pol[e.tier]
		if q.Orphan(e.h) {
			q.SetOrphan(e.h, false)
		}
		q.Hit(e.h)
	}
	// Deepest first: each page's worth then includes what its hit
	// descendants just passed up. A parent that is the previous key of the
	// request is raised directly (no index lookup); others are looked up,
	// or told through a value hint.
	for i := len(hits) - 1; i >= 0 && s.cfg.Eviction == eviction.KindCost; i-- {
		e := hits[i]
		if i > 0 && e.hasParent() && !e.upWaits && e.up == hits[i-1].ref() {
			par := hits[i-1]
			s.policy.pol[par.tier].PassChildWorth(par.h, s.policy.pol[e.tier], e.h)
			continue
		}
		s.passWorthLocked(e)
	}
}

// Summaries describes each tier's held worth and turnover, for the
// cluster's coordinator (docs/design.md §5.4), in tier order.
func (e Evictor) Summaries() []eviction.Summary {
	s := e.s
	s.lock()
	defer s.unlock()
	p := &s.policy
	now := time.Now()
	dt := now.Sub(p.turnAt).Seconds()
	out := make([]eviction.Summary, len(p.pol))
	for i, q := range p.pol {
		left := p.out[i] + q.Evicted()
		if dt > 0 {
			capBytes := float64(max(s.cfg.Tiers[i].Stats().Capacity, 1))
			rate := float64(left-p.outSeen[i]) / capBytes / dt
			a := 1 - math.Exp(-dt/turnoverWindow.Seconds())
			p.turnover[i] += a * (rate - p.turnover[i])
			p.outSeen[i] = left
		}
		q.Summarize(&out[i])
		out[i].Turnover = p.turnover[i]
	}
	if dt > 0 {
		p.turnAt = now
	}
	return out
}

// Choices is the setting each tier's queue holds now, as
// eviction.Candidate.String names it (chosen by miniature simulation,
// eviction.Queue.Choice), in tier order; "" for a queue that does not
// choose one.
func (e Evictor) Choices() []string {
	s := e.s
	s.lock()
	defer s.unlock()
	out := make([]string, len(s.policy.pol))
	for i, q := range s.policy.pol {
		if c, ok := q.Choice(); ok {
			out[i] = c.String()
		}
	}
	return out
}

// SetCutoffs sets each tier's admission floor in worth units (missing
// tiers: 0, no floor). epoch and coordinated say where they came from: the
// cluster's coordinator (true) or the node itself.
func (e Evictor) SetCutoffs(worth []float64, epoch uint64, coordinated bool) {
	s := e.s
	s.lock()
	defer s.unlock()
	p := &s.policy
	for i, q := range p.pol {
		c := 0.0
		if i < len(worth) && worth[i] > 0 && !math.IsInf(worth[i], 0) {
			c = worth[i]
		}
		q.SetCutoff(c)
		p.cutoffs[i] = c
	}
	p.epoch, p.coordinated = epoch, coordinated
}

// HintsDropped counts the child and value hints dropped because too many
// were pending, or arrived for too many absent parents.
func (e Evictor) HintsDropped() uint64 {
	s := e.s
	s.lock()
	defer s.unlock()
	return s.policy.hintsDropped
}

// CutoffState returns what SetCutoffs last set.
func (e Evictor) CutoffState() (worth []float64, epoch uint64, coordinated bool) {
	s := e.s
	s.lock()
	defer s.unlock()
	p := &s.policy
	return append([]float64(nil), p.cutoffs...), p.epoch, p.coordinated
}
