package store

import (
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
			if _, err := s.Lookup(testNS.ID, keys, false, 0); err != nil {
				t.Fatal(err)
			}
		}
		s.histMu.Lock()
		for i, k := range keys {
			if got := s.policy.pol[0].Estimate(keyHash(k)); got < 2 {
				t.Errorf("%d-key lookups: key %d counted %d times after two lookups", n, i, got)
			}
		}
		s.histMu.Unlock()
	}
}
