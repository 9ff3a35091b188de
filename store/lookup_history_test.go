package store

import (
	"sync"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// TestLookupRecordsHistory checks that a lookup has counted every key it
// was asked about in the frequency history by the time it returns, for
// lookups of one key to a few hundred.
func TestLookupRecordsHistory(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	for _, n := range []int{1, 63, 64, 300} {
		keys := make([]namespace.Key, n)
		for i := range keys {
			keys[i] = key(1000*n + i)
		}
		for range 2 {
			if _, err := s.Reader().Lookup(testNS.ID, keys, false, 0); err != nil {
				t.Fatal(err)
			}
		}
		s.lock()
		for i, k := range keys {
			if got := s.policy.pol[0].Estimate(keyHash(k)); got < 2 {
				t.Errorf("%d-key lookups: key %d counted %d times after two lookups", n, i, got)
			}
		}
		s.unlock()
	}
}

// TestConcurrentLookupsCountOrShed runs lease-less lookups on many
// goroutines while other pages come and go (so that mu is contended), then
// checks that every lookup either counted its hit on every page it found
// or shed its bookkeeping (hitlog.go), never anything between.
func TestConcurrentLookupsCountOrShed(t *testing.T) {
	s, _ := newTestStore(t, 256, nil)
	chain := putChain(t, s, "hot", 32)
	const workers, rounds = 8, 150
	stop := make(chan struct{})
	churned := make(chan error, 1)
	go func() {
		defer close(churned)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := key(5000 + i%64)
			data := pageData(i)
			res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: k, Size: int64(len(data))}}, 0)
			if err != nil || res[0].Status != Reserved {
				continue
			}
			if err := s.Publisher().Write(testNS.ID, res[0].WriteID, 0, data); err != nil {
				churned <- err
				return
			}
			if _, err := s.Publisher().Commit(testNS.ID, res[0].WriteID, int64(len(data)), testNS.Checksum.Sum(data)); err != nil {
				churned <- err
				return
			}
			if _, err := s.Publisher().Delete(testNS.ID, []namespace.Key{k}); err != nil {
				churned <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				res, err := s.Reader().Lookup(testNS.ID, chain, false, 0)
				if err != nil || res.HitPrefix != len(chain) {
					t.Errorf("lookup: hit prefix %d of %d, %v", res.HitPrefix, len(chain), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-churned; err != nil {
		t.Fatal(err)
	}
	infos, ok, err := s.Admin().Stat(testNS.ID, chain)
	if err != nil {
		t.Fatal(err)
	}
	shed := s.Admin().LookupsShed()
	for i, info := range infos {
		if !ok[i] || uint64(info.Hits)+shed != workers*rounds {
			t.Errorf("page %d of the chain: present %v, %d hits and %d lookups shed, want %d in all",
				i, ok[i], info.Hits, shed, workers*rounds)
		}
	}
	t.Logf("%d of %d lookups shed their bookkeeping", shed, workers*rounds)
}

// TestGetAllAllocatesNothing: finding the entries of a 1,000-key lookup
// allocates nothing (its shard order lives on the stack).
func TestGetAllAllocatesNothing(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	keys := make([]namespace.Key, 1000)
	for i := range keys {
		keys[i] = key(i)
	}
	n := testNSState(t, s)
	found := make([]*entry, len(keys))
	if a := testing.AllocsPerRun(20, func() { n.getAll(keys, found) }); a != 0 {
		t.Fatalf("getAll of %d keys: %v allocations, want 0", len(keys), a)
	}
}
