package store

import (
	"bytes"
	"context"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// TestSHA256Pages: a SHA-256 namespace's pages keep their sums (after
// their entries: shaEntry) through a put, a read, a demotion to the
// durable tier (which checks and seals them, with their parents) and a
// restart.
func TestSHA256Pages(t *testing.T) {
	ns := Namespace{ID: namespace.ID{7, 7}, Tenant: "acme", PageBytes: pageSize, Checksum: namespace.SHA256}
	dir := t.TempDir()
	openSSD := func() *tiers.SSD {
		ssd, err := tiers.NewSSD(tiers.SSDConfig{Dir: dir, Capacity: 1 << 20, FileSize: 256 << 10, Sync: tiers.SyncNone})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ssd.Close() })
		return ssd
	}
	ssd := openSSD()
	s := openStore(t, Config{Tiers: []tiers.Tier{newMemTier(16 * pageSize), ssd}})
	if _, err := s.Recover(); err != nil {
		t.Fatal(err)
	}
	if err := s.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	keys := chainKeys("sha", 3)
	data := make([][]byte, len(keys))
	check := func(when string, s *Store, tier tiers.Kind) {
		t.Helper()
		infos, ok, err := s.Admin().Stat(ns.ID, keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, info := range infos {
			want := chainSpec(keys, i)
			switch {
			case !ok[i]:
				t.Fatalf("%s: page %d missing", when, i)
			case !bytes.Equal(info.Checksum, ns.Checksum.Sum(data[i])):
				t.Errorf("%s: page %d has checksum %x, want its SHA-256", when, i, info.Checksum)
			case info.HasParent != want.HasParent || info.Parent != want.Parent:
				t.Errorf("%s: page %d has parent %x (%v), want %x", when, i, info.Parent[:6], info.HasParent, want.Parent[:6])
			case info.Tier != tier:
				t.Errorf("%s: page %d on %v, want %v", when, i, info.Tier, tier)
			}
		}
		err = s.Reader().Read(ns.ID, 0, keys, func(i int, p PageView) error {
			if !p.Found || !bytes.Equal(p.Data, data[i]) || !bytes.Equal(p.Checksum, ns.Checksum.Sum(data[i])) {
				t.Errorf("%s: read page %d: found %v, checksum %x", when, i, p.Found, p.Checksum)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys {
		data[i] = pageData(i)
		sum := ns.Checksum.Sum(data[i])
		if res, err := s.Publisher().Put(ns.ID, chainSpec(keys, i), sum, 0, whole(data[i])); err != nil || !res.Committed() {
			t.Fatalf("put %d: %+v %v", i, res, err)
		}
	}
	check("put", s, tiers.KindHost)
	if moved, err := s.DemoteAll(context.Background()); err != nil || moved != len(keys) {
		t.Fatalf("DemoteAll moved %d of %d: %v", moved, len(keys), err)
	}
	check("demoted", s, tiers.KindSSD)
	s.Close()
	ssd.Close()

	s = openStore(t, Config{Tiers: []tiers.Tier{openSSD()}})
	if rec, err := s.Recover(); err != nil || rec.Tiers[0].Recovered != len(keys) {
		t.Fatalf("recover: %+v %v", rec, err)
	}
	if err := s.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	check("recovered", s, tiers.KindSSD)
}
