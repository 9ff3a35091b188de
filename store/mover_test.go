package store

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

func newTwoTierStore(t *testing.T, fast, slow int) (*Store, *memTier, *kindTier) {
	t.Helper()
	t0, t1 := newMemTier(int64(fast)*pageSize), &kindTier{memTier: newMemTier(int64(slow) * pageSize), kind: tiers.KindSSD}
	return openStore(t, Config{Tiers: []tiers.Tier{t0, t1}}, testNS), t0, t1
}

func tierOf(t *testing.T, s *Store, k namespace.Key) tiers.Kind {
	infos, ok, _ := s.Admin().Stat(testNS.ID, []namespace.Key{k})
	if !ok[0] {
		t.Fatalf("key %x absent", k[:4])
	}
	return infos[0].Tier
}

// TestOverflowLandsBelow: writing more than the fast tier holds puts the
// overflow in the slow tier, the mover demotes the oldest pages to make
// room, nothing is dropped while the slow tier has room, and every page
// reads back exactly.
func TestOverflowLandsBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, t0, t1 := newTwoTierStore(t, 8, 64)
		for i := range 40 {
			if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
				t.Fatalf("put %d: %v", i, st)
			}
			synctest.Wait() // let the mover run
		}
		advance(2 * time.Second)
		if st := s.Admin().Stats(); st.Pages != 40 {
			t.Fatalf("%d pages kept, want all 40", st.Pages)
		}
		if t0.usedBytes()+t1.usedBytes() != 40*pageSize || t1.usedBytes() == 0 {
			t.Fatalf("fast %d + slow %d bytes", t0.usedBytes(), t1.usedBytes())
		}
		for i := range 40 {
			got, err := read(t, s, 0, key(i))
			if err != nil || !bytes.Equal(got[0], pageData(i)) {
				t.Fatalf("page %d: wrong bytes after demotion (%v)", i, err)
			}
		}
		if s.demotions.Load() == 0 {
			t.Fatal("the mover demoted nothing")
		}
		// The newest pages are in the fast tier, the oldest below.
		if tierOf(t, s, key(39)) != tiers.KindHost || tierOf(t, s, key(0)) != tiers.KindSSD {
			t.Fatal("newest page not in the fast tier, or oldest not in the slow one")
		}
	})
}

// TestLeasedPagesNeverMove: under demotion pressure a leased page stays in
// its tier.
func TestLeasedPagesNeverMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0, t1 := newMemTier(8*pageSize), &kindTier{memTier: newMemTier(64 * pageSize), kind: tiers.KindSSD}
		s, err := New(Config{Tiers: []tiers.Tier{t0, t1}, DefaultLeaseTTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		checkLineageAfter(t, s)
		s.AddNamespace(testNS)
		put(t, s, key(0), pageData(0))
		if _, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, true, 0); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < 50; i++ {
			put(t, s, key(i), pageData(i))
			synctest.Wait()
		}
		if tierOf(t, s, key(0)) != tiers.KindHost {
			t.Fatal("leased page moved")
		}
		if tierOf(t, s, key(1)) != tiers.KindSSD {
			t.Fatal("an old unleased page was not demoted")
		}
	})
}

// kindTier is a memTier that reports another kind.
type kindTier struct {
	*memTier
	kind tiers.Kind
}

func (k *kindTier) Kind() tiers.Kind { return k.kind }

// TestPageLeasedDuringDemotionStays: a page leased while the mover copies
// it down stays where it is, and the copy is discarded: the lease's reader
// may be reading the old extent. The slow tier's WriteAt (the copy, which
// runs without Store.mu) takes the lease on the page it is handed.
func TestPageLeasedDuringDemotionStays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := newMemTier(8 * pageSize)
		t1 := &hookTier{kindTier: &kindTier{memTier: newMemTier(64 * pageSize), kind: tiers.KindSSD}}
		s := openStore(t, Config{Tiers: []tiers.Tier{t0, t1}, DefaultLeaseTTL: 30 * time.Second}, testNS)
		moving, lease := -1, uint64(0)
		t1.onWrite = func(p []byte) {
			for i := range 8 {
				if bytes.Equal(p, pageData(i)) {
					moving = i
				}
			}
			if moving < 0 {
				t.Error("the first write to the slow tier is not a page of the fast tier")
				return
			}
			res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(moving)}, true, 0)
			if err != nil || res.Lease == nil {
				t.Errorf("leasing page %d during its copy: %+v, %v", moving, res, err)
				return
			}
			lease = res.Lease.ID
		}
		for i := range 8 { // the fast tier is full: the mover demotes on its tick
			put(t, s, key(i), pageData(i))
		}
		advance(2 * time.Second)
		if moving < 0 || lease == 0 {
			t.Fatalf("no demotion copy of a page of the fast tier was seen (page %d, lease %d)", moving, lease)
		}
		if tierOf(t, s, key(moving)) != tiers.KindHost {
			t.Fatalf("page %d moved while leased", moving)
		}
		got, err := read(t, s, lease, key(moving))
		if err != nil || !bytes.Equal(got[0], pageData(moving)) {
			t.Fatalf("leased page %d: wrong bytes (%v)", moving, err)
		}
		below := 0
		for i := range 8 {
			if tierOf(t, s, key(i)) == tiers.KindSSD {
				below++
			}
		}
		if below == 0 || t1.usedBytes() != int64(below)*pageSize {
			t.Fatalf("slow tier holds %d bytes for %d demoted pages: the abandoned copy was not freed", t1.usedBytes(), below)
		}
		if err := s.Reader().ReleaseLease(testNS.ID, lease); err != nil {
			t.Fatal(err)
		}
	})
}

// hookTier is a kindTier whose first WriteAt runs onWrite (set before the
// store writes to it) with the bytes it is about to write.
type hookTier struct {
	*kindTier
	onWrite func(p []byte)
}

func (h *hookTier) WriteAt(ext tiers.Extent, p []byte, off int64) error {
	if f := h.onWrite; f != nil {
		h.onWrite = nil
		f(p)
	}
	return h.memTier.WriteAt(ext, p, off)
}
