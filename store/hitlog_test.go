package store

import (
	"testing"
	"time"
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
	infos, ok, err := s.Stat(testNS.ID, chain)
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range infos {
		if !ok[i] || info.Hits != 1 {
			t.Errorf("page %d: present %v, %d hits, want 1", i, ok[i], info.Hits)
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
