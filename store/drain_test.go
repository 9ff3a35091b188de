package store

import (
	"context"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// TestDemoteAllMostValuableFirst: with room on the durable tier for only
// part of the volatile tier's pages, DemoteAll moves the most valuable
// (the ones looked up again and again) and stops when the durable tier is
// full, dropping nothing there.
func TestDemoteAllMostValuableFirst(t *testing.T) {
	ssd, err := tiers.NewSSD(tiers.SSDConfig{Dir: t.TempDir(), Capacity: 128 << 10, FileSize: 64 << 10, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ssd.Close() })
	host := newMemTier(128 * pageSize)
	s := openStore(t, Config{Tiers: []tiers.Tier{host, ssd}}, testNS)
	if _, err := s.Recover(); err != nil {
		t.Fatal(err)
	}
	const pages, hot = 100, 16
	var keys []namespace.Key
	for i := range pages {
		if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
			t.Fatalf("put %d: %v", i, st)
		}
		keys = append(keys, key(i))
	}
	for range 20 {
		for i := pages - hot; i < pages; i++ { // the last ones: not the oldest, not the first listed
			if _, err := s.Reader().Lookup(testNS.ID, keys[i:i+1], false, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	moved, err := s.DemoteAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	infos, ok, err := s.Admin().Stat(testNS.ID, keys)
	if err != nil {
		t.Fatal(err)
	}
	onSSD := 0
	for i, info := range infos {
		if !ok[i] {
			t.Fatalf("page %d gone: DemoteAll must drop nothing", i)
		}
		if info.Tier == tiers.KindSSD {
			onSSD++
		}
		if i >= pages-hot && info.Tier != tiers.KindSSD {
			t.Errorf("hot page %d stayed on %v", i, info.Tier)
		}
	}
	t.Logf("moved %d of %d pages (the SSD tier holds %d)", moved, pages, onSSD)
	if moved != onSSD || moved >= pages || moved < hot {
		t.Fatalf("moved %d, %d on ssd, of %d", moved, onSSD, pages)
	}
}
