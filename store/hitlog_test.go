package store

import (
	"math"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
)

// TestApplierAppliesTheLog: a lookup's bookkeeping left to the applier is
// applied without any other call taking the store's lock (the batch leaves
// the log within a bounded wait), and counts as the lookup's.
func TestApplierAppliesTheLog(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	chain := putChain(t, s, "log", 4)
	if res, err := s.Lookup(testNS.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
		t.Fatalf("lookup: hit prefix %d, %v", res.HitPrefix, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.hits.mu.Lock()
		pending := s.hits.pending != nil
		s.hits.mu.Unlock()
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lookup's batch is still in the log after 5s")
		}
		time.Sleep(time.Millisecond)
	}
	wantHits(t, s, testNS.ID, chain, 1)
}

// wantHits checks that every page of keys in namespace id is present with
// want hits.
func wantHits(t *testing.T, s *Store, id namespace.ID, keys []namespace.Key, want uint32) {
	t.Helper()
	infos, ok, err := s.Stat(id, keys)
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
	if res, err := s.Lookup(testNS.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
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
	infos, ok, err := s.Stat(testNS.ID, chain)
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
	lookup := func() {
		t.Helper()
		if res, err := s.Lookup(ns.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
			t.Errorf("lookup: hit prefix %d, %v", res.HitPrefix, err)
		}
	}
	saved := func() float64 {
		t.Helper()
		st, err := s.NamespaceStats(ns.ID)
		if err != nil {
			t.Fatal(err)
		}
		return st.SavedFLOPs
	}
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
	deadline := time.Now().Add(5 * time.Second)
	for s.hits.inline.Load() != 1 {
		if time.Now().After(deadline) {
			s.mu.Unlock()
			t.Fatal("the second lookup never started its own bookkeeping")
		}
		time.Sleep(time.Millisecond)
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
	if got := s.LookupsShed(); got != 1 {
		s.mu.Unlock()
		t.Fatalf("LookupsShed = %d with s.mu held, want 1", got)
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
		if res, err := s.Lookup(testNS.ID, chain, false, 0); err != nil || res.HitPrefix != len(chain) {
			t.Fatalf("lookup: hit prefix %d, %v", res.HitPrefix, err)
		}
	}
	if got := s.LookupsShed(); got != 0 {
		t.Errorf("LookupsShed = %d, want 0", got)
	}
	wantHits(t, s, testNS.ID, chain, lookups)
}
