package store

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/namespace"
)

// # Lookups that leave their bookkeeping to the applier
//
// A lookup without a lease answers from the index alone: a page its shard
// holds is live (removeLocked takes it out of the table, under the shard's
// write lock, before it marks it dead), so the presence and the hit prefix
// need no store lock. What else a lookup does is bookkeeping under s.mu:
// each key's count in the frequency histories, the hit pages' counts and
// access times, the eviction queues' hits and the worth they pass up, the
// namespace's saved FLOPs. That is most of a 1,000-key lookup's time in
// the store (`go test -bench Lookup1000/lease=false -cpuprofile` on
// store: the history about a quarter, the queues two fifths).
//
// So when the store's applier goroutine is idle, a lookup leaves that
// bookkeeping to it as a hitBatch (the hit log) and answers at once; the
// applier does it on another thread while the engine is busy with the
// answer. When the applier is still busy with the previous batch, the
// lookup does its own bookkeeping under s.mu as before: the log holds at
// most one batch, so the bookkeeping never falls behind the lookups. With
// one engine worker a lookup's latency is then the index's alone.
//
// # Small lookups
//
// Waking the applier is dearer than the bookkeeping of a few keys: the
// wake is a futex call that starts another thread, and both threads'
// context switches cost more than the round trip itself on a VM. A
// runtime trace of a node under one-key lookups showed the applier woken
// on every one; without the wake the p50 fell from 87 to 54 µs, old node
// beside new (benchmarks/README.md, "The raw plane against its limits").
// So a lookup of fewer than wakeKeys keys leaves its
// batch in the log without waking the applier. Nothing reads what the
// batch changes without applying the log first (below), so a batch left
// there is as good as applied; the next lookup finds it and does the
// bookkeeping of both inline (the applier is "busy"), or sheds it under
// contention, as for any batch the applier has not yet taken.
//
// # Shedding under contention
//
// With many engine workers most lookups find the applier busy, and the
// bookkeeping, done under s.mu one lookup at a time, becomes the node's
// bottleneck: lookups queue for s.mu behind each other. So a lookup that
// finds the applier busy and another lookup already doing its own
// bookkeeping (waiting for s.mu or holding it) sheds its bookkeeping
// instead of queueing: it keeps only the prefill FLOPs its hit prefix
// saved (a namespace figure operators read, folded in by the next section
// under s.mu), and counts itself in LookupsShed. The histories and the
// pages' hit counts then sample the lookups under contention rather than
// count every one, as the lossy read buffers of Caffeine and ristretto
// do: a page asked for k times as often is still counted about k times as
// often, so the policy's order of pages holds, and the lookups themselves
// answer from the index as before. At most two lookups' bookkeeping is
// under way at a time (the applier's and one lookup's), and a lookup
// from one goroutine at a time never sheds: it can only find the applier
// busy, never another lookup (benchmarks/README.md, "Lookup, 1,000
// keys"), though it may find the budget below spent.
//
// # A budget for the bookkeeping
//
// Shedding under contention needs two threads doing bookkeeping at once,
// so a node that serves its lookups on fewer threads than it has workers
// (GOMAXPROCS 1, or a busy host where the kernel runs one of its threads
// at a time) sheds nothing, and the bookkeeping, more than half a
// 1,000-key lookup's time in the store, becomes its bottleneck. So the
// bookkeeping also has a budget in time, as Go's collector has:
// Config.LookupBookkeeping (a quarter by default) of GOMAXPROCS × the wall
// time. Every batch's time (the applier's, or a lookup's own) is charged
// to it, and a lookup that finds it spent sheds its bookkeeping as above,
// whether or not the applier is busy. A store that was idle may run
// hitBurst of bookkeeping beyond the budget first, so lookups that come
// now and then, from any number of goroutines, count in full.
//
// Every section under s.mu starts by applying the log (lock), so what it
// reads (a page's counts, a queue's order, the histories an admission or
// an insertion consults) includes every lookup that returned before it
// and was not shed, as when lookups did the bookkeeping themselves. A hit
// on a page dropped before its batch was applied is lost, as it would
// have been to a lookup that came after the drop.

// hitBatch is one lookup's bookkeeping.
type hitBatch struct {
	n       *nsState
	now     int32    // store clock of the lookup
	hashes  []uint64 // keyHash of every key asked about
	entries []*entry // the hit prefix
	saved   float64  // the prefill FLOPs the hit prefix saves
}

// hitLog holds the batch the applier has yet to apply, if any.
type hitLog struct {
	mu      sync.Mutex
	pending *hitBatch
	// saved is what the hit prefixes of shed lookups saved, by namespace
	// (one entry per run of lookups of one namespace), for the next
	// section under s.mu to add to the namespaces' figures.
	saved []shedSaved
	// inline counts the lookups doing their own bookkeeping, waiting for
	// s.mu or holding it; contended counts the lookups that shed theirs
	// under contention, overBudget those that shed it because the budget
	// was spent (a counter each, so that each only grows).
	inline     atomic.Int32
	contended  atomic.Uint64
	overBudget atomic.Uint64
	// rate is the bookkeeping time the budget allows per unit of wall
	// time (Config.LookupBookkeeping × GOMAXPROCS; 0: no budget), and debt
	// the bookkeeping done and not yet paid for, as of paid. An unspent
	// budget is kept only up to hitBurst: debt >= -hitBurst.
	rate float64
	debt time.Duration
	paid time.Time
}

// hitBurst is the bookkeeping beyond its budget that a store which was
// idle may do before lookups shed theirs (A budget for the bookkeeping).
const hitBurst = 50 * time.Millisecond

// budget gives the bookkeeping share of procs CPUs from now on (share <=
// 0: no budget), with its burst unspent.
func (l *hitLog) budget(share float64, procs int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate, l.debt, l.paid = 0, -hitBurst, now
	if share > 0 {
		l.rate = share * float64(procs)
	}
}

// spentLocked pays the debt down to now and reports whether the
// bookkeeping has spent its budget; l.mu is held.
func (l *hitLog) spentLocked(now time.Time) bool {
	if l.rate <= 0 {
		return false
	}
	if now.After(l.paid) {
		l.debt = max(l.debt-time.Duration(l.rate*float64(now.Sub(l.paid))), -hitBurst)
		l.paid = now
	}
	return l.debt > 0
}

// charge adds bookkeeping that ran from start until now to the debt.
func (l *hitLog) charge(start time.Time) {
	d := time.Since(start)
	l.mu.Lock()
	if l.rate > 0 { // budget may change rate (tests): read it under l.mu
		l.debt += d
	}
	l.mu.Unlock()
}

// shedUnlock sheds the bookkeeping of a lookup of n whose hit prefix
// saved flops, over the budget or under contention, and lets go of l.mu,
// which is held.
func (l *hitLog) shedUnlock(n *nsState, flops float64, overBudget bool) {
	l.shedSavedLocked(n, flops)
	l.mu.Unlock()
	if overBudget {
		l.overBudget.Add(1)
	} else {
		l.contended.Add(1)
	}
}

// shedSaved is the prefill FLOPs shed lookups of n saved.
type shedSaved struct {
	n     *nsState
	flops float64
}

// batchPool keeps applied batches for reuse (a 1,000-key batch is 16 KB).
var batchPool = sync.Pool{New: func() any { return new(hitBatch) }}

// logLookup does a lookup's bookkeeping (hitBatch): through the applier
// when it is idle, else under s.mu now, unless another lookup is already
// doing its own: then it sheds it (Shedding under contention).
func (s *Store) logLookup(n *nsState, now int32, keys []namespace.Key, hits []*entry, saved float64) {
	l := &s.hits
	l.mu.Lock()
	if l.spentLocked(time.Now()) {
		l.shedUnlock(n, saved, true)
		return
	}
	if l.pending != nil {
		if l.inline.Add(1) > 1 {
			l.inline.Add(-1)
			l.shedUnlock(n, saved, false)
			return
		}
		l.mu.Unlock()
		defer l.inline.Add(-1)
		s.lock()
		start := time.Now()
		s.recordKeysLocked(keys)
		s.hitLocked(n, now, hits, saved)
		l.charge(start)
		s.unlock()
		return
	}
	b := batchPool.Get().(*hitBatch)
	b.n, b.now, b.saved = n, now, saved
	b.hashes = b.hashes[:0]
	for _, k := range keys {
		b.hashes = append(b.hashes, keyHash(k))
	}
	b.entries = append(b.entries[:0], hits...)
	l.pending = b
	l.mu.Unlock()
	if len(keys) < wakeKeys {
		return // left for the next section under s.mu (Small lookups)
	}
	select {
	case s.hitWake <- struct{}{}:
	default:
	}
}

// wakeKeys is the fewest keys of a lookup whose batch wakes the applier
// (Small lookups).
const wakeKeys = 32

// applyHitLog applies the hit log (lock does): the applier calls it
// whenever a lookup leaves a batch in the log.
func (s *Store) applyHitLog(time.Time) {
	s.lock()
	s.unlock()
}

// lock takes s.mu and applies the hit log. Every section under s.mu takes
// it through lock.
func (s *Store) lock() {
	s.mu.Lock()
	applied := false
	defer func() {
		if !applied { // a panic: the caller's deferred unlock is not set yet
			s.mu.Unlock()
		}
	}()
	s.applyLogLocked()
	applied = true
}

// unlock lets go of s.mu.
func (s *Store) unlock() { s.mu.Unlock() }

// applyLogLocked applies the pending batch, if any, and the savings of
// the lookups shed since the last section under s.mu.
func (s *Store) applyLogLocked() {
	l := &s.hits
	l.mu.Lock()
	b := l.pending
	l.pending = nil
	for _, sv := range l.saved {
		sv.n.savedFLOPs += sv.flops
	}
	clear(l.saved)
	l.saved = l.saved[:0]
	l.mu.Unlock()
	if b != nil {
		start := time.Now()
		s.applyLocked(b)
		l.charge(start)
	}
}

// shedSavedLocked keeps what a shed lookup of n saved for the next
// section under s.mu; l.mu is held.
func (l *hitLog) shedSavedLocked(n *nsState, flops float64) {
	if k := len(l.saved); k > 0 && l.saved[k-1].n == n {
		l.saved[k-1].flops += flops
		return
	}
	l.saved = append(l.saved, shedSaved{n: n, flops: flops})
}

// LookupsShed counts the lookups without a lease that shed their
// bookkeeping, under contention or over its budget (hitlog.go).
func (a Admin) LookupsShed() uint64 {
	return a.LookupsShedUnderContention() + a.LookupsShedOverBudget()
}

// LookupsShedUnderContention counts the lookups of LookupsShed that shed
// their bookkeeping because another lookup's was under way (Shedding
// under contention).
func (a Admin) LookupsShedUnderContention() uint64 {
	return a.s.hits.contended.Load()
}

// LookupsShedOverBudget counts the lookups of LookupsShed that shed their
// bookkeeping because its budget was spent (A budget for the bookkeeping).
func (a Admin) LookupsShedOverBudget() uint64 {
	return a.s.hits.overBudget.Load()
}

// applyLocked does one lookup's bookkeeping and returns its batch to
// batchPool.
func (s *Store) applyLocked(b *hitBatch) {
	for _, q := range s.policy.pol {
		q.RecordAll(b.hashes)
	}
	s.hitLocked(b.n, b.now, b.entries, b.saved)
	clear(b.entries)
	b.entries, b.n = b.entries[:0], nil
	batchPool.Put(b)
}

// hitLocked records the hit prefix of a lookup at store clock now, whose
// pages save saved FLOPs: their counts and access times and the policies'
// hits (recordHitsLocked). It compacts hits to the pages still resident:
// one dropped since the lookup found it gets nothing.
func (s *Store) hitLocked(n *nsState, now int32, hits []*entry, saved float64) {
	live := hits[:0]
	for _, e := range hits {
		if e.dead {
			continue
		}
		e.access = now
		e.hits++
		live = append(live, e)
	}
	s.recordHitsLocked(live)
	n.savedFLOPs += saved
}
