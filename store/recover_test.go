package store

import (
	"testing"

	"github.com/stratakv/strata/tiers"
)

// A page's measured cost hint survives a restart: it is sealed with the
// page on the SSD tier and read back by Recover, so a recovered page is
// priced as its writer measured it, not by the namespace's profile.
func TestRecoveredCostHint(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Store, *tiers.SSD) {
		t.Helper()
		ssd, err := tiers.NewSSD(tiers.SSDConfig{Dir: dir, Capacity: 64 << 20, Sync: tiers.SyncNone})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Tiers: []tiers.Tier{ssd}})
		if err != nil {
			t.Fatal(err)
		}
		checkLineageAfter(t, s)
		return s, ssd
	}
	s, ssd := open()
	if _, err := s.Recover(); err != nil { // a durable tier allocates once recovered
		t.Fatal(err)
	}
	if err := s.AddNamespace(testNS); err != nil {
		t.Fatal(err)
	}
	k := chainKeys("c", 2)
	hinted := chainSpec(k, 0)
	hinted.CostHint = 7e12
	if !putSpec(t, s, hinted, pageData(0)) || !putSpec(t, s, chainSpec(k, 1), pageData(1)) {
		t.Fatal("a put was not reserved")
	}
	s.Close()
	ssd.Close()

	s, ssd = open()
	defer ssd.Close()
	defer s.Close()
	if rec, err := s.Recover(); err != nil || len(rec.Tiers) != 1 || rec.Tiers[0].Recovered != 2 {
		t.Fatalf("recover: %+v %v", rec, err)
	}
	if err := s.AddNamespace(testNS); err != nil { // the recovered placeholder gets its descriptor
		t.Fatal(err)
	}
	locked(s, func() {
		for i, want := range []float32{7e12, 0} {
			e := testNSState(t, s).shard(k[i]).get(k[i])
			if e == nil {
				t.Fatalf("page %d not recovered", i)
			}
			if e.cost != want {
				t.Errorf("page %d recovered with cost hint %g, want %g", i, e.cost, want)
			}
		}
	})
}
