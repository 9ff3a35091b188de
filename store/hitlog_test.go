package store

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
)

// TestApplierAppliesTheLog: a lookup's bookkeeping left to the applier is
// applied without any other call taking the store's lock (the batch leaves
// the log within a bounded wait), and counts as the lookup's.
func TestApplierAppliesTheLog(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	chain := putChain(t, s, "log", 4)
	asked := slices.Clone(chain) // wakeKeys keys: the batch wakes the applier
	for i := len(asked); i < wakeKeys; i++ {
		asked = append(asked, namespace.Key{0xab, byte(i)})
	}
	if res, err := s.Reader().Lookup(testNS.ID, asked, false, 0); err != nil || res.HitPrefix != len(chain) {
		t.Fatalf("lookup: hit prefix %d, %v", res.HitPrefix, err)
	}
	poll.Until(t, 5*time.Second, time.Millisecond, "the applier taking the lookup's batch from the log", func() bool {
		s.hits.mu.Lock()
		defer s.hits.mu.Unlock()
		return s.hits.pending == nil
	})
	wantHits(t, s, testNS.ID, chain, 1)
}

// TestSmallLookupLeftInTheLog: a lookup of fewer than wakeKeys keys
// leaves its batch in the log without waking the applier, and whatever
// reads the store afterwards sees its hits (the log is applied first).
func TestSmallLookupLeftInTheLog(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	chain := putChain(t, s, "small", 3)
	if res, err := s.Reader().Lookup(testNS.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
		t.Fatalf("lookup: hit prefix %d, %v", res.HitPrefix, err)
	}
	if len(s.hitWake) != 0 {
		t.Fatal("a 3-key lookup woke the applier")
	}
	s.hits.mu.Lock()
	logged := s.hits.pending != nil
	s.hits.mu.Unlock()
	if !logged {
		t.Fatal("a 3-key lookup left nothing in the log")
	}
	wantHits(t, s, testNS.ID, chain, 1)
	lookupAll(t, s, testNS.ID, chain) // finds the log empty: leaves its own
	lookupAll(t, s, testNS.ID, chain) // finds the last one's: applies both inline
	wantHits(t, s, testNS.ID, chain, 3)
}

// wantHits checks that every page of keys in namespace id is present with
// want hits.
func wantHits(t *testing.T, s *Store, id namespace.ID, keys []namespace.Key, want uint32) {
	t.Helper()
	infos, ok, err := s.Admin().Stat(id, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range infos {
		if !ok[i] || info.Hits != want {
			t.Errorf("page %d: present %v, %d hits, want %d", i, ok[i], info.Hits, want)
		}
	}
}

// TestLoggedHitOnDroppedPage: a page dropped after a lookup found it and
// before its batch was applied is skipped (its queue handle is gone: a hit
// on it would panic), and the other pages' hits count.
func TestLoggedHitOnDroppedPage(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	chain := putChain(t, s, "drop", 3)
	n := testNSState(t, s)
	s.mu.Lock() // the applier waits
	if res, err := s.Reader().Lookup(testNS.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
		s.mu.Unlock()
		t.Fatalf("lookup: hit prefix %d, %v", res.HitPrefix, err)
	}
	s.hits.mu.Lock()
	logged := s.hits.pending != nil
	s.hits.mu.Unlock()
	if !logged {
		s.mu.Unlock()
		t.Fatal("the lookup did its bookkeeping itself while the store's lock was held")
	}
	last := n.shard(chain[2]).get(chain[2])
	s.removeLocked(last, false)
	s.mu.Unlock()
	infos, ok, err := s.Admin().Stat(testNS.ID, chain)
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range infos[:2] {
		if !ok[i] || info.Hits != 1 {
			t.Errorf("page %d: present %v, %d hits, want 1", i, ok[i], info.Hits)
		}
	}
	if ok[2] {
		t.Error("the dropped page is still present")
	}
	if err := s.checkLineage(); err != nil {
		t.Fatal(err)
	}
}

// TestLookupShedsUnderContention: a lookup that finds the applier busy and
// another lookup doing its own bookkeeping sheds its own: it answers at
// once, exactly, while the store's lock is held elsewhere; its pages get
// no hit; what its hit prefix saved still counts; LookupsShed counts it.
// The lookups that did not shed count in full.
func TestLookupShedsUnderContention(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	ns, chain := profiledChain(t, s, namespace.ID{9}, "shed", 3) // hits save FLOPs
	lookup := func() { lookupAll(t, s, ns.ID, chain) }
	saved := func() float64 { return savedFLOPs(t, s, ns.ID) }
	before := saved()
	lookup() // alone: what one lookup saves
	per := saved() - before
	if per <= 0 {
		t.Fatalf("a lookup of %d present pages saved %g FLOPs", len(chain), per)
	}
	before += per
	s.mu.Lock() // the applier and every lookup's own bookkeeping wait
	lookup()    // leaves its batch in the log: the applier is now busy
	inline := make(chan struct{})
	go func() { defer close(inline); lookup() }() // does its own: waits for s.mu
	if !poll.Within(5*time.Second, time.Millisecond, func() bool { return s.hits.inline.Load() == 1 }) {
		s.mu.Unlock()
		t.Fatal("the second lookup never started its own bookkeeping")
	}
	shed := make(chan struct{})
	go func() { defer close(shed); lookup() }() // sheds: returns with s.mu still held
	select {
	case <-shed:
	case <-time.After(5 * time.Second):
		s.mu.Unlock()
		<-shed
		t.Fatal("a third lookup waited for the store's lock instead of shedding its bookkeeping")
	}
	if got, over := s.Admin().LookupsShed(), s.Admin().LookupsShedOverBudget(); got != 1 || over != 0 {
		s.mu.Unlock()
		t.Fatalf("LookupsShed = %d, over budget %d with s.mu held, want 1 and 0", got, over)
	}
	s.mu.Unlock()
	<-inline
	after := saved()
	wantHits(t, s, ns.ID, chain, 3) // the shed lookup's is not counted
	if got, want := after-before, 3*per; math.Abs(got-want) > 1e-9*want {
		t.Errorf("three lookups, one shed, saved %g FLOPs, want %g", got, want)
	}
	if err := s.checkLineage(); err != nil {
		t.Fatal(err)
	}
}

// TestOneCallerNeverSheds: lookups one after another, however fast, never
// shed their bookkeeping: each counts.
func TestOneCallerNeverSheds(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	chain := putChain(t, s, "one", 3)
	const lookups = 200
	for range lookups {
		if res, err := s.Reader().Lookup(testNS.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
			t.Fatalf("lookup: hit prefix %d, %v", res.HitPrefix, err)
		}
	}
	if got := s.Admin().LookupsShed(); got != 0 {
		t.Errorf("LookupsShed = %d, want 0", got)
	}
	wantHits(t, s, testNS.ID, chain, lookups)
}

// TestBookkeepingBudget: the budget's arithmetic (A budget for the
// bookkeeping, hitlog.go) on a clock the test sets: charged time past the
// burst spends it; wall time pays it back at the share of the CPUs; an
// unspent budget is kept only up to hitBurst; without a budget nothing is
// ever spent.
func TestBookkeepingBudget(t *testing.T) {
	var l hitLog
	t0 := time.Unix(1000, 0)
	l.budget(0.25, 2, t0) // half a second of bookkeeping per second
	if l.spentLocked(t0) {
		t.Fatal("a fresh budget is spent")
	}
	l.debt += hitBurst + 10*time.Millisecond // the burst and 10ms more
	if !l.spentLocked(t0) {
		t.Fatal("10ms of bookkeeping past the burst left the budget unspent")
	}
	if !l.spentLocked(t0.Add(19 * time.Millisecond)) { // paid 9.5ms of 10
		t.Fatalf("budget unspent 19ms later (debt %v), want 0.5ms still owed", l.debt)
	}
	if l.spentLocked(t0.Add(21 * time.Millisecond)) { // paid 10.5ms
		t.Fatalf("budget spent 21ms later (debt %v), want 0.5ms to spare", l.debt)
	}
	if l.spentLocked(t0.Add(20 * time.Millisecond)); l.debt != -500*time.Microsecond {
		t.Fatalf("a clock that went back changed the debt to %v", l.debt)
	}
	l.spentLocked(t0.Add(time.Hour))
	if l.debt != -hitBurst {
		t.Fatalf("after an idle hour the debt is %v, want -hitBurst (%v)", l.debt, -hitBurst)
	}
	l.budget(-1, 2, t0)
	l.debt = time.Hour
	if l.spentLocked(t0) {
		t.Fatal("no budget, yet spent")
	}
}

// TestSpentBudgetSheds: a lookup that finds the budget spent sheds its
// bookkeeping even with the applier idle: it answers exactly, its pages get
// no hit, what its hit prefix saved still counts, LookupsShed counts it.
// Once the budget is paid back, lookups count again.
func TestSpentBudgetSheds(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	ns, chain := profiledChain(t, s, namespace.ID{9}, "budget", 3)
	lookup := func() { lookupAll(t, s, ns.ID, chain) }
	saved := func() float64 { return savedFLOPs(t, s, ns.ID) }
	before := saved()
	lookup()
	per := saved() - before
	wantHits(t, s, ns.ID, chain, 1)
	s.hits.mu.Lock()
	s.hits.debt = time.Hour // spent for an hour
	s.hits.mu.Unlock()
	lookup()
	if got, over := s.Admin().LookupsShed(), s.Admin().LookupsShedOverBudget(); got != 1 || over != 1 {
		t.Fatalf("LookupsShed = %d, over budget %d with the budget spent, want 1 and 1", got, over)
	}
	wantHits(t, s, ns.ID, chain, 1)
	if got := saved() - before; math.Abs(got-2*per) > 1e-9*per {
		t.Errorf("two lookups, one shed, saved %g FLOPs, want %g", got, 2*per)
	}
	s.hits.budget(0.25, 1, time.Now())
	lookup()
	if got := s.Admin().LookupsShed(); got != 1 {
		t.Errorf("LookupsShed = %d after the budget was paid back, want 1", got)
	}
	wantHits(t, s, ns.ID, chain, 2)
}

// TestOneCallerKeepsToBudget: lookups one after another from one
// goroutine, with a budget of a millionth of the CPUs, count in full until
// the burst is spent, then shed (each either counts or sheds: the hits and
// the sheds add up to the lookups).
func TestOneCallerKeepsToBudget(t *testing.T) {
	s, _ := newTestStore(t, 64, func(c *Config) { c.LookupBookkeeping = 1e-6 })
	chain := putChain(t, s, "tight", 32)
	lookups := 0
	for deadline := time.Now().Add(10 * time.Second); s.Admin().LookupsShed() == 0; lookups++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d lookups in 10s and none shed with the budget spent", lookups)
		}
		if res, err := s.Reader().Lookup(testNS.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
			t.Fatalf("lookup: hit prefix %d, %v", res.HitPrefix, err)
		}
	}
	for range 100 {
		if _, err := s.Reader().Lookup(testNS.ID, chain, false, 0); err != nil {
			t.Fatal(err)
		}
		lookups++
	}
	shed := s.Admin().LookupsShed()
	if last := shed - 1; last < 90 { // the first shed ended the loop above
		t.Errorf("%d of the last 100 lookups shed with the burst spent, want nearly all", last)
	}
	infos, ok, err := s.Admin().Stat(testNS.ID, chain)
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range infos {
		if !ok[i] || uint64(info.Hits)+shed != uint64(lookups) {
			t.Errorf("page %d: present %v, %d hits and %d shed, want %d in all", i, ok[i], info.Hits, shed, lookups)
		}
	}
	t.Logf("%d lookups counted in full before the burst was spent", lookups-100-1)
}

// lookupAll looks keys up in namespace id without a lease and checks that
// all are present (from any goroutine: it reports with Errorf).
func lookupAll(t *testing.T, s *Store, id namespace.ID, keys []namespace.Key) {
	t.Helper()
	if res, err := s.Reader().Lookup(id, keys, false, 0); err != nil || res.HitPrefix != len(keys) {
		t.Errorf("lookup: hit prefix %d of %d, %v", res.HitPrefix, len(keys), err)
	}
}

// savedFLOPs is the prefill namespace id's lookups have saved so far.
func savedFLOPs(t *testing.T, s *Store, id namespace.ID) float64 {
	t.Helper()
	st, err := s.Admin().NamespaceStats(id)
	if err != nil {
		t.Fatal(err)
	}
	return st.SavedFLOPs
}
