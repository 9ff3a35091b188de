package store

import (
	"testing"

	"github.com/stratakv/strata/namespace"
)

// TestLookupRecordsHistory checks that a lookup has counted every key it
// was asked about in the frequency history by the time it returns, below
// and above the size from which it records them on a goroutine of its own
// (parallelRecordKeys).
func TestLookupRecordsHistory(t *testing.T) {
	s, _ := newTestStore(t, 64, nil)
	for _, n := range []int{1, parallelRecordKeys - 1, parallelRecordKeys, 3 * parallelRecordKeys} {
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
