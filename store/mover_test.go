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
	infos, ok, _ := s.Stat(testNS.ID, []namespace.Key{k})
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
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := s.Stats(); st.Pages != 40 {
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
		if _, err := s.Lookup(testNS.ID, []namespace.Key{key(0)}, true, 0); err != nil {
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
