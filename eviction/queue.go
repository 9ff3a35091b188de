package eviction

import (
	"fmt"
	"math"
	"unsafe"
)

// state is one page's policy state.
type state struct {
	prio float64 // own priority; lower goes first
	// sub is, for KindCost, the priority of the best resident descendant
	// (SetChildWorth), on the same time scale as prio; -Inf for none. The
	// heap orders by max(prio, sub) (Value).
	sub    float64
	credit float32 // KindCost: log2(cost/bytes); KindGDSFBytes: 1; 0 otherwise
	freq   uint32  // lookups that covered the page, counting its insertion
	tick   uint32  // last use, for tie-breaks (wraps harmlessly)
	pos    int32   // index in Queue.heap, or -1
	local  uint16  // resident children on this node
	remote uint16  // resident children on other nodes (hints)
	pins   uint16
	flags  uint8
	// bucket is, for an adaptive KindCost queue, the first-timer class of
	// a page inserted on its first sighting whose reuse is not known yet
	// (adapt.go), else noBucket.
	bucket uint8
	// The page's Key, Group and Bytes are the caller's (Config.Ident), or
	// Queue.ids'.
}

// ident is what the queue keeps of a page's Page.Key (for the ghost
// list), Group and Bytes (saturated at 4 GiB − 1) when the caller does not
// keep them for it (Config.Ident).
type ident struct {
	key   uint64
	group uint32
	bytes uint32
}

// identOf is what Insert keeps of p.
func identOf(p *Page) ident {
	return ident{key: p.Key, group: p.Group, bytes: uint32(min(p.Bytes, math.MaxUint32))}
}

const (
	flagLive uint8 = 1 << iota
	flagOrphan
	flagHit     // hit since inserted
	flagDeep    // KindCost, adaptive: the depth adds more to its cost than on average
	flagSampled // KindCost, adaptive: the key is in the miniature simulations' sample (mini.go)
)

// StateBytes is the policy's memory per tracked page: the state record plus
// its heap slot (the frequency history comes on top: HistoryBytes), when
// the caller keeps the pages' Key, Group and Bytes (Config.Ident); IdentBytes
// more when the queue keeps them.
const StateBytes = int(unsafe.Sizeof(state{})) + int(unsafe.Sizeof(entry{}))

// IdentBytes is what a queue keeps per page of the pages' Key, Group and
// Bytes when its caller does not (Config.Ident).
const IdentBytes = int(unsafe.Sizeof(ident{}))

// Queue is the eviction policy every Kind shares, one per tier: a slab of
// per-page state indexed by Handle and a binary min-heap of the pages that
// may be dropped now. Every method is O(log n) or better and
// allocation-free in steady state; none is safe for concurrent use (the
// store calls them under the lock that guards its index). A page
// is in the heap iff it is live, unpinned and (unless Plain) has no resident
// local children, so Victim is the heap's root and every update is
// O(log n). The heap orders by (class, priority, tick): class 0 orphans,
// class 1 pages with no known resident children, class 2 pages with resident
// children only on other nodes; Plain puts every page in class 1.
type Queue struct {
	kind  Kind
	prof  ComputeProfile
	plain bool

	pages []state // by Handle; pages[0] unused
	heap  []entry // eligible victims, a binary min-heap
	free  []Handle
	// Each tracked page's Key, Group and Bytes as Insert was given them:
	// the caller's Config.Ident, else ids (by Handle, as pages).
	identFn func(Handle) Ident
	ids     []ident

	hist *sketch // frequency history; nil when disabled

	clock      float64 // KindGDSFBytes' aging clock L
	tick       uint32
	now        uint64  // page operations (inserts, hits, refusals)
	clk        float64 // KindCost's time in half-lives: Σ 1/halfLife over page operations
	halfLife   float64 // KindCost: page operations that halve a reuse count now
	ad         *adapt  // KindCost's learned state (adapt.go); nil when Config.Static
	mini       *mini   // KindCost's miniature simulations (mini.go); nil unless it chooses its setting
	noAdmit    bool    // KindCost, adaptive: Admit does not compare first-timers with evicted pages (Candidate.Admit)
	admitCap   bool    // KindCost: Admit also compares with the victim (Config.CapacityAdmission)
	admitShare float64 // Admit refuses below this share of cutoff (Config.AdmitShare)
	cutoff     float64 // admission floor on Worth; 0 none
	capacity   int64   // tier bytes, for Admit; 0 unknown
	n          int     // live pages
	bytes      int64   // live bytes
	evicted    int64   // bytes evicted or refused, ever
	maxWorth   float64 // the largest Worth ever seen (Summarize's scale; not KindCost)
}

// Len is the number of pages tracked.
func (q *Queue) Len() int { return q.n }

// Bytes is the total size of the pages tracked.
func (q *Queue) Bytes() int64 { return q.bytes }

// Evicted is the bytes evicted or refused so far. Its growth per unit of
// time over the capacity is the tier's turnover (Summary.Turnover).
func (q *Queue) Evicted() int64 { return q.evicted }

// Clock is the aging clock: for KindCost the half-lives elapsed (page
// operations over Config.HalfLife), for KindGDSFBytes the GDSF clock L (the
// value of the last page evicted), 0 for the other kinds.
func (q *Queue) Clock() float64 {
	if q.kind == KindCost {
		return q.age()
	}
	return q.clock
}

// age is KindCost's time in half-lives. The half-life may change as the
// queue adapts; a priority stored at a past age stays comparable, since
// the time between two ages is measured in the half-lives that passed.
func (q *Queue) age() float64 { return q.clk }

// step advances the queue's time by one page operation; tick counts it
// too, so that a page's operations since its last use are q.tick − s.tick.
func (q *Queue) step() {
	q.now++
	q.tick++
	q.clk += 1 / q.halfLife
}

// setHalfLife makes h the half-life from now on, and restates every
// tracked page's priority as if h had been the half-life since the page's
// last use: a priority stores the half-lives elapsed at that use, so
// without this a switch from a short half-life to a long one would leave
// the pages used during the short one spread over as many half-lives as
// passed then, in half-lives of the long one (a page used a tier's
// operations ago would rank 2^32 below one used now after a switch from
// LRU, and a tier of stale pages inserted just before a switch to a long
// half-life would outrank new ones for many capacities). Only the time
// since the last use is restated: the decay between earlier uses stays as
// it was. O(n) in the pages tracked: one pass over the slab restates
// each page and writes its heap slot, then the heap is rebuilt; at a
// million pages 23-26 ms under the store's lock (BenchmarkSwitch, old
// and new alternating on the 2-core VM at load 3-5; 28-29 ms when the
// slots were rewritten in a second pass, by the heap's handles, which
// read the pages at random; at load 6-7 35-82 against 40-76 ms), once
// per switch. Spreading it over the operations that follow (64 pages
// each) cut the longest operation to 35-55 µs but let victims be chosen
// between restated and unrestated pages meanwhile: strata-sim's
// TestAcceptance then kept orphaned bytes at 1.008% of capacity at 5%
// (bar 1%), and 256 pages an operation fell past TestAcceptanceChoice's
// bars; it was taken out. Keeping the victim exact while spreading
// (restating each page that reaches the heap's top before taking it,
// its slot only ever behind: heap.go) bounds no operation either: a
// switch to a longer half-life raises every page's key by its idle time
// times 1/old − 1/new half-life, and the pages whose old key lies below
// the lowest new one, which the first eviction after the switch would
// restate, are most of the tier (in a queue of 262,144 pages, each
// insert followed by two hits of random pages: 74% on a switch from 0.25
// to 8 capacities, all but one from LRU, 4% from 2 to 8); a switch to a
// shorter one lowers keys, which that heap cannot hold behind at all.
// The switch changes the sort order itself.
//
// The best descendant's priority (sub) is restated alike, by the page's
// own time since its last use (the queue keeps no time for the sub, which
// a value hint may have set later), but not on a switch to or from LRU,
// where that error is multiplied by 64 per operation: measured with
// strata-sim on gen:agent:1 at 5% (one placement), restating it there too
// saved 85.65% of prefill FLOPs against LRU's 85.75% (the queue went
// through LRU and back), leaving it as it was on every switch 90.90% but
// 32.17% on gen:scan at 25% (1.8 points short of 8 capacities fixed),
// and restating it but there 91.03% and 33.39%.
func (q *Queue) setHalfLife(h float64) {
	if h == q.halfLife {
		return
	}
	k := 1/q.halfLife - 1/h // per operation since the last use
	subToo := min(h, q.halfLife) >= 1
	for i := 1; i < len(q.pages); i++ {
		s := &q.pages[i]
		if s.flags&flagLive == 0 {
			continue
		}
		age := float64(q.tick - s.tick)
		s.prio += age * k
		if subToo && !math.IsInf(s.sub, -1) {
			s.sub += age * k
		}
		// Its heap slot takes the new key in the same pass: the slab is
		// read in order, the heap written at random (reading the heap's
		// handles in order and their pages at random took most of the
		// switch's time).
		if s.pos >= 0 {
			q.heap[s.pos] = q.entryOf(Handle(i))
		}
	}
	q.halfLife = h
	for i := len(q.heap)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// HalfLife is KindCost's current half-life in page operations (chosen by
// miniature simulation unless fixed or Config.Static); 0 for the other
// kinds.
func (q *Queue) HalfLife() float64 {
	if q.kind != KindCost {
		return 0
	}
	return q.halfLife
}

// Choice is the setting an adaptive KindCost queue holds now (mini.go),
// and false for a queue that does not choose one (fixed half-life,
// Config.Static, another kind, an unknown capacity).
func (q *Queue) Choice() (Candidate, bool) {
	if q.mini == nil {
		return Candidate{}, false
	}
	return q.mini.cands[q.mini.cur], true
}

// SampleBytes is the memory of the miniature simulations (mini.go: the
// shadow queues and the sampled keys; 0 for a queue without them).
func (q *Queue) SampleBytes() int {
	if q.mini == nil {
		return 0
	}
	return q.mini.bytes()
}

// ReuseShare is the reuse an adaptive KindCost queue expects of p if it is
// a first-timer (see "Adaptivity" in the package documentation): the
// share of pages like it that were asked for again; 1 when not adaptive.
func (q *Queue) ReuseShare(p Page) float64 {
	if q.ad == nil {
		return 1
	}
	return q.ad.share(p.Group, reuseBucket(&p))
}

// Kind is the value model.
func (q *Queue) Kind() Kind { return q.kind }

// HistoryBytes is the memory of the frequency history (0 when disabled).
func (q *Queue) HistoryBytes() int {
	if q.hist == nil {
		return 0
	}
	return q.hist.bytes()
}

// GhostBytes is the memory of the ghost list (adapt.go: the ring of
// departed keys and its index; 0 for a queue that does not adapt).
func (q *Queue) GhostBytes() int {
	if q.ad == nil {
		return 0
	}
	return q.ad.gh.bytes()
}

// Record counts one lookup that asked for key, hit or miss, in the frequency
// history (a no-op for policies without one). Record and RecordAll touch
// nothing but the history, which only Estimate, Insert, Admit, WorthOf and ValueOf
// also read: a caller may guard the history with a lock of its own and
// call Record or RecordAll under that lock alone, concurrently with the other methods,
// as long as those five also hold it.
func (q *Queue) Record(key uint64) {
	if q.hist != nil {
		q.hist.add(key)
	}
}

// RecordAll is Record of each of keys in turn, faster for many keys.
func (q *Queue) RecordAll(keys []uint64) {
	if q.hist != nil {
		q.hist.addAll(keys)
	}
}

// Estimate is key's count in the frequency history (0 without one). A node
// that spills a put passes it on as Page.Freq, so the page keeps its count
// on a node that never saw its lookups.
func (q *Queue) Estimate(key uint64) uint32 {
	if q.hist == nil {
		return 0
	}
	return q.hist.estimate(key)
}

// SetCapacity tells the policy how many bytes its tier holds, for Admit.
func (q *Queue) SetCapacity(bytes int64) {
	q.capacity = bytes
	if q.mini != nil {
		q.mini.setCapacity(bytes)
	}
}

// DefaultAdmitShare is the default Config.AdmitShare: the share of the
// cutoff (SetCutoff) below which Admit refuses a page. A fresh page's worth
// counts only the reuse its key has earned so far, which understates a
// just-recomputed prefix (its next use tends to come soon): refusing below
// the whole cutoff cost about 2 points of saved prefill FLOPs at 10%
// capacity on the synthetic trace, a quarter of it none. Measured with the
// simulator's earlier copy of the policy (before cmd/strata-sim ran the
// store; its ours-global-floor is today's ours-global):
// cmd/strata-sim --capacity-ratios 1:1:2:4 --placements 3 --sizes 5,10
// --policies ours-node,ours-global-floor --admit-share S: at 5%, 18.46 /
// 18.62 / 18.54% for S = 1 / 0.5 / 0.25 against ours-node's 18.52%; at
// 10%, 26.16 / 28.29 / 28.41% against 28.41%.
const DefaultAdmitShare = 0.25

// SetCutoff sets the admission floor, e.g. a cluster-wide cutoff
// (Cutoffs.Floor), in worth units (Queue.Worth: reuse · cost / bytes, the
// value without the node's aging clock), so that one cluster-wide cutoff
// means the same on every node; Admit refuses below Config.AdmitShare of
// it.
func (q *Queue) SetCutoff(worth float64) { q.cutoff = worth }

// Cutoff is the admission floor set by SetCutoff.
func (q *Queue) Cutoff() float64 { return q.cutoff }

// Insert starts tracking a newly resident page and returns its handle.
func (q *Queue) Insert(p Page) Handle {
	if p.Bytes <= 0 {
		panic(fmt.Sprintf("eviction: Insert of a page of %d bytes", p.Bytes))
	}
	if q.ad != nil {
		q.ad.comeback(p.Key)
	}
	h := q.alloc()
	s := &q.pages[h]
	q.step()
	*s = q.newState(p)
	if q.identFn == nil {
		q.ids[h] = identOf(&p)
	}
	if q.ad != nil {
		c, flat := q.costs(&p)
		q.ad.inserted(math.Log2(c / flat))
	}
	if q.mini != nil && q.mini.sampled(p.Key) {
		s.flags |= flagSampled
		p.Freq = s.freq
		q.mini.put(p, true)
	}
	s.flags |= flagLive
	if p.Orphan {
		s.flags |= flagOrphan
	}
	q.n++
	q.bytes += int64(identOf(&p).bytes)
	q.fix(h)
	return h
}

// ident is what Insert was given of tracked h's Key, Group and Bytes.
func (q *Queue) ident(h Handle) ident {
	if q.identFn == nil {
		return q.ids[h]
	}
	p := q.identFn(h)
	return identOf(&Page{Key: p.Key, Group: p.Group, Bytes: p.Bytes})
}

// newState is the state p would get if inserted now.
func (q *Queue) newState(p Page) state { return q.stateOf(p, true) }

// stateOf is newState, a first-timer counted at its learned reuse when
// learned, else (the cutoff check of a page with descendants in its put)
// as used once.
func (q *Queue) stateOf(p Page, learned bool) state {
	f := max(p.Freq, 1)
	if q.hist != nil {
		f = max(f, q.hist.estimate(p.Key))
	}
	s := state{pos: -1, sub: math.Inf(-1), freq: f, tick: q.tick, bucket: noBucket}
	switch q.kind {
	case KindCost:
		c, flat := q.costs(&p)
		// The depth's share of the cost counts with the learned weight.
		gain, w := math.Log2(c/flat), q.ad.depthWeight()
		if gain == 0 {
			w = 1 // nothing to weigh (a measured cost): the chain counts in full too
		}
		s.credit = float32(math.Log2(flat/float64(p.Bytes)) + w*gain)
		if q.ad != nil && gain > q.ad.meanGain {
			s.flags |= flagDeep
		}
		// The reuse count starts at f, undecayed; a first-timer's at the
		// reuse learned for pages like it (adapt.go).
		count, leaf := float64(f), 1.0
		if q.ad != nil && f <= 1 {
			s.bucket = reuseBucket(&p)
			if learned {
				count = q.ad.share(p.Group, s.bucket)
				lp := Page{Depth: max(p.ChainDepth, p.Depth)}
				leaf = q.ad.share(p.Group, reuseBucket(&lp))
			}
		}
		s.prio = q.age() + math.Log2(count) + float64(s.credit)
		if p.ChainDepth > p.Depth {
			chain := p.ChainCost
			if chain <= 0 {
				chain = q.prof.PageFLOPs(p.ChainDepth, p.Tokens)
			}
			if chain > c { // a fresh descendant: reuse count 1, or a first-timer's
				s.sub = q.age() + math.Log2(leaf*flat/float64(p.Bytes)) + w*math.Log2(chain/flat)
			}
		}
		return s
	case KindGDSFBytes:
		s.credit = 1
	}
	s.prio = q.prioOf(&s)
	return s
}

// costs is p's recompute cost and the part of it that does not grow with
// depth (KindCost).
func (q *Queue) costs(p *Page) (c, flat float64) {
	c, flat = p.Cost, p.FlatCost
	if c <= 0 {
		c = q.prof.PageFLOPs(p.Depth, p.Tokens)
		if flat <= 0 {
			flat = q.prof.PageFLOPs(0, p.Tokens)
		}
	}
	if flat <= 0 || flat > c {
		flat = c // a measured cost: no depth term to weigh
	}
	return c, flat
}

// prioOf is the priority of s after a use now.
func (q *Queue) prioOf(s *state) float64 {
	switch q.kind {
	case KindLRU:
		return float64(s.tick)
	case KindLFU:
		return float64(s.freq)
	case KindGDSFBytes:
		return q.clock + float64(s.freq)*float64(s.credit)
	case KindCost:
		// prio − age is log2(C·cost/bytes) with C the reuse count decayed
		// to now; a use adds one: log2((C + 1)·cost/bytes).
		lc := float64(s.credit)
		return q.age() + log2p1exp2(s.prio-q.age()-lc) + lc
	}
	return s.prio // KindOffline: whatever SetPriority left
}

// eff is s's priority as the heap orders it: for KindCost the larger of
// its own and its best resident descendant's.
func (s *state) eff() float64 { return max(s.prio, s.sub) }

// worth is what a page is worth, clock aside, so that nodes whose clocks
// advance at their own pace can compare: for KindCost the decayed reuse
// count × cost / bytes of the page or of its best resident descendant,
// whichever is more (dropping the page loses both); freq · cost / bytes for
// KindGDSFBytes; the priority otherwise.
func (q *Queue) worth(s *state) float64 {
	switch q.kind {
	case KindCost:
		return math.Exp2(s.eff() - q.age())
	case KindGDSFBytes:
		return float64(s.freq) * float64(s.credit)
	}
	return s.prio - q.clock
}

// Worth is what dropping h loses per byte, clock aside (see worth): for
// KindCost the decayed reuse count × recompute FLOPs ÷ bytes of h, or of its
// best resident descendant (SetChildWorth) if that is more.
func (q *Queue) Worth(h Handle) float64 { return q.worth(q.live(h)) }

// SetChildWorth tells a KindCost queue the most that any resident
// descendant of h is worth: the largest Worth among h's resident children,
// wherever they live (0: none). Dropping h makes every descendant
// unreachable, so h is ordered by the larger of its own value and this one;
// since a child's Worth includes its own descendants', passing each page's
// Worth up to its parent's owner whenever it changes keeps the whole chain
// ordered leaf first across nodes (value hints, next to the child hints of
// ChildAdded). A no-op for the other kinds.
func (q *Queue) SetChildWorth(h Handle, worth float64) {
	s := q.live(h)
	if q.kind != KindCost {
		return
	}
	sub := math.Inf(-1)
	if worth > 0 {
		sub = q.age() + math.Log2(worth)
	}
	if sub != s.sub {
		s.sub = sub
		q.fix(h)
	}
}

// WorthOf is the Worth p would have if inserted now.
func (q *Queue) WorthOf(p Page) float64 {
	s := q.newState(p)
	return q.worth(&s)
}

// ValueOf is the priority p would get if it were inserted now.
func (q *Queue) ValueOf(p Page) float64 { return q.newState(p).prio }

// Admit reports whether p is worth storing: its worth is at least
// Config.AdmitShare of the cutoff set by SetCutoff and, when storing it
// would exceed the capacity set by SetCapacity, its ValueOf is at least the
// Value of the current victim (for KindCost only with
// Config.CapacityAdmission; an orphan victim never keeps a page out). A
// refusal counts as an eviction of p (the clock advances). Plain and offline
// policies always admit. KindCost compares with the victim only with
// Config.CapacityAdmission (see the package documentation); every kind
// checks the cutoff. An orphan victim never keeps a page out: it goes first
// whatever its value.
func (q *Queue) Admit(p Page) bool {
	if q.plain || q.kind == KindOffline {
		return true
	}
	if q.ad != nil {
		q.ad.comeback(p.Key)
	}
	// The cutoff judges a page with descendants in its put as used once
	// (as before adaptation): its learned reuse is not its chain's, and
	// refusing it would cut them.
	s := q.stateOf(p, p.ChainDepth <= p.Depth)
	if q.cutoff > 0 && q.worth(&s) < q.admitShare*q.cutoff {
		q.refuse(&s, &p)
		return false
	}
	// KindCost compares with the victim when adaptive, and then only a
	// page that ends its put: refusing one with descendants in the put
	// would cut them, whose worth it does not hold yet.
	if q.kind == KindCost && !q.admitCap && (q.ad == nil || p.ChainDepth > p.Depth) {
		return true
	}
	// An adaptive queue refuses only a first-timer less likely to be
	// asked for again than an evicted page has been.
	if q.ad != nil && (q.noAdmit || s.bucket == noBucket || q.ad.share(p.Group, s.bucket) >= q.ad.victimReuse()) {
		return true
	}
	if q.capacity > 0 && q.bytes+p.Bytes > q.capacity && q.settle() &&
		q.heap[0].ct>>30 != 0 && s.eff() < q.heap[0].prio {
		q.refuse(&s, &p)
		return false
	}
	return true
}

// refuse accounts for p, which Admit turned away with state s, as if it had
// been inserted and at once evicted: the clock moves on, so refusals do not
// freeze the ages of what stays.
func (q *Queue) refuse(s *state, p *Page) {
	id := identOf(p)
	q.evicted += int64(id.bytes)
	if q.mini != nil && !q.mini.filled {
		q.mini.fill()
	}
	if q.ad != nil {
		q.ad.depart(ghost{key: id.key, group: id.group, class: ghostRefused, bucket: s.bucket, deep: s.flags&flagDeep != 0})
	}
	q.step()
	if q.kind == KindGDSFBytes && s.prio > q.clock {
		q.clock = s.prio
	}
	if q.mini != nil && q.mini.sampled(p.Key) {
		pp := *p
		pp.Freq = s.freq
		q.mini.put(pp, false)
	}
}

// Hit records one lookup whose hit prefix covers h.
func (q *Queue) Hit(h Handle) {
	s := q.live(h)
	if s.freq < math.MaxUint32 {
		s.freq++
	}
	if s.bucket != noBucket { // a first-timer asked for again
		q.ad.group(q.ident(h).group).record(s.bucket, true)
		s.bucket = noBucket
	}
	s.flags |= flagHit
	q.step()
	s.tick = q.tick
	s.prio = q.prioOf(s)
	q.fix(h)
	if s.flags&flagSampled != 0 {
		q.mini.hit(q.ident(h).key, s.freq)
	}
}

// SetPriority sets h's priority directly; meant for KindOffline.
func (q *Queue) SetPriority(h Handle, prio float64) {
	s := q.live(h)
	s.prio = prio
	q.fix(h)
}

// Pin keeps h from being chosen as a victim until the matching Unpin
// (leases, in-flight reads, a writer's reservation of the parent).
func (q *Queue) Pin(h Handle) {
	s := q.live(h)
	if s.pins == math.MaxUint16 {
		panic("eviction: too many pins")
	}
	s.pins++
	q.fix(h)
}

// Unpin undoes one Pin.
func (q *Queue) Unpin(h Handle) {
	s := q.live(h)
	if s.pins == 0 {
		panic("eviction: Unpin of an unpinned page")
	}
	s.pins--
	q.fix(h)
}

// Pinned reports whether h is pinned.
func (q *Queue) Pinned(h Handle) bool { return q.live(h).pins > 0 }

// ChildAdded records that a child of h became resident: on this node (local)
// or on another node (a remote hint). While h has resident local children it
// is never a victim; while it has remote ones it is a victim only when no
// childless page is left.
func (q *Queue) ChildAdded(h Handle, local bool) {
	s := q.live(h)
	c := &s.remote
	if local {
		c = &s.local
	}
	if *c < math.MaxUint16 {
		*c++
	}
	q.fix(h)
}

// ChildRemoved undoes one ChildAdded.
func (q *Queue) ChildRemoved(h Handle, local bool) {
	s := q.live(h)
	c := &s.remote
	if local {
		c = &s.local
	}
	if *c == 0 {
		if local {
			panic("eviction: ChildRemoved(local) of a page with no local children")
		}
		return // remote hints are best effort
	}
	*c--
	q.fix(h)
}

// Children is h's resident local and remote children counts.
func (q *Queue) Children(h Handle) (local, remote int) {
	s := q.live(h)
	return int(s.local), int(s.remote)
}

// SetOrphan marks (or clears) h as an orphan: its parent is known absent.
func (q *Queue) SetOrphan(h Handle, orphan bool) {
	s := q.live(h)
	if orphan {
		s.flags |= flagOrphan
	} else {
		s.flags &^= flagOrphan
	}
	q.fix(h)
}

// Orphan reports whether h is marked as an orphan.
func (q *Queue) Orphan(h Handle) bool { return q.live(h).flags&flagOrphan != 0 }

// Value is h's current eviction priority, lower going first: for KindCost
// the larger of h's own priority and its best resident descendant's
// (SetChildWorth).
func (q *Queue) Value(h Handle) float64 { return q.live(h).eff() }

// Victim returns the page to drop next without removing it, or false if
// every page is pinned or has resident local children.
func (q *Queue) Victim() (Handle, bool) {
	if !q.settle() {
		return 0, false
	}
	return q.heap[0].h, true
}

// Evict stops tracking h because it was dropped to make room; GDSF advances
// its clock to h's value.
func (q *Queue) Evict(h Handle) {
	s := q.live(h)
	if s.pins > 0 {
		panic("eviction: Evict of a pinned page")
	}
	if !q.plain && s.local > 0 {
		panic("eviction: Evict of a page with resident local children")
	}
	// Orphans jump the queue whatever their value: their eviction says
	// nothing about the value of what stays.
	if q.kind == KindGDSFBytes && s.flags&flagOrphan == 0 && s.prio > q.clock {
		q.clock = s.prio
	}
	id := q.ident(h)
	q.evicted += int64(id.bytes)
	if q.mini != nil && !q.mini.filled {
		q.mini.fill()
	}
	if q.ad != nil && s.flags&flagOrphan == 0 {
		class := ghostOnce
		if s.flags&flagHit != 0 {
			class = ghostReused
		}
		q.ad.depart(ghost{key: id.key, group: id.group, class: class, bucket: s.bucket, deep: s.flags&flagDeep != 0})
	}
	q.release(h)
}

// Remove stops tracking h for any other reason (deleted, demoted to another
// tier's policy); the clock does not move.
func (q *Queue) Remove(h Handle) { q.live(h); q.release(h) }

func (q *Queue) release(h Handle) {
	s := &q.pages[h]
	if s.pos >= 0 {
		q.heapRemove(int(s.pos))
	}
	id := q.ident(h)
	if s.flags&flagSampled != 0 {
		q.mini.gone(id.key)
	}
	q.n--
	q.bytes -= int64(id.bytes)
	*s = state{pos: -1}
	if q.identFn == nil {
		q.ids[h] = ident{}
	}
	q.free = append(q.free, h)
}

func (q *Queue) alloc() Handle {
	if n := len(q.free); n > 0 {
		h := q.free[n-1]
		q.free = q.free[:n-1]
		return h
	}
	if len(q.pages) > math.MaxUint32 {
		panic("eviction: more than 2^32 pages")
	}
	q.pages = append(q.pages, state{pos: -1})
	if q.identFn == nil {
		q.ids = append(q.ids, ident{})
	}
	return Handle(len(q.pages) - 1)
}

func (q *Queue) live(h Handle) *state {
	if int(h) >= len(q.pages) || h == 0 || q.pages[h].flags&flagLive == 0 {
		panic(fmt.Sprintf("eviction: handle %d is not tracked", h))
	}
	return &q.pages[h]
}

// eligible reports whether s may be a victim now.
func (q *Queue) eligible(s *state) bool {
	return s.pins == 0 && (q.plain || s.local == 0)
}

// class orders victims before priority: orphans, then childless pages, then
// pages whose only resident children are on other nodes.
func (q *Queue) class(s *state) uint32 {
	switch {
	case q.plain:
		return 1
	case s.flags&flagOrphan != 0:
		return 0
	case s.remote == 0:
		return 1
	}
	return 2
}

// fix restores h's heap membership and position after its state changed.
func (q *Queue) fix(h Handle) {
	s := &q.pages[h]
	if q.kind != KindCost { // KindCost's worth decays: Summarize scans for its top
		q.maxWorth = max(q.maxWorth, q.worth(s))
	}
	in := s.pos >= 0
	switch want := q.eligible(s); {
	case want && !in:
		s.pos = int32(len(q.heap))
		q.heap = append(q.heap, q.entryOf(h))
		q.up(int(s.pos))
	case !want && in:
		q.heapRemove(int(s.pos))
	case want && in:
		// A page that moves toward the front (a lower priority or class)
		// moves now; one that moves back (a hit: the common case, and a
		// sift through the whole depth of the heap) keeps its old slot
		// until it reaches the top (settle).
		if e := q.entryOf(h); e.before(&q.heap[s.pos]) {
			q.heap[s.pos] = e
			q.up(int(s.pos))
		}
	}
}
