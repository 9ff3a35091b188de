package store

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// TestParentAboveItsChildNotDropped: a page whose only resident child was
// demoted below it is its tier's victim (a tier's queue counts only the
// children in that tier or faster ones, since those are what a demotion
// must wait for), but it may not be dropped: its child is still resident.
// With the slow tier's one page (the child) leased, a put that finds both
// tiers full is refused rather than drop the parent.
func TestParentAboveItsChildNotDropped(t *testing.T) {
	for _, kind := range []eviction.Kind{eviction.KindCost, eviction.KindLRU} {
		t.Run(string(kind), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := newMemTier(2 * pageSize)
				t1 := &kindTier{memTier: newMemTier(pageSize), kind: tiers.KindSSD}
				s := openStore(t, Config{Tiers: []tiers.Tier{t0, t1}, Eviction: kind}, testNS)
				a := chainKeys("a", 2)
				putSpec(t, s, chainSpec(a, 0), pageData(0))
				putSpec(t, s, chainSpec(a, 1), pageData(1))
				advance(2 * time.Second) // the fast tier is full: the mover demotes the leaf on its tick
				if tierOf(t, s, a[0]) != tiers.KindHost || tierOf(t, s, a[1]) != tiers.KindSSD {
					t.Fatalf("parent in %v, child in %v; want the child demoted below its parent",
						tierOf(t, s, a[0]), tierOf(t, s, a[1]))
				}
				other := chainKeys("b", 2)
				if !putSpec(t, s, PageSpec{Key: other[0], Depth: 40, Size: pageSize}, pageData(2)) {
					t.Fatal("page refused with room in the fast tier")
				}
				// Lease the child and the other page: the parent is then
				// the only page either tier's queue may offer.
				for _, k := range []namespace.Key{a[1], other[0]} {
					if res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{k}, true, 0); err != nil || res.Lease == nil {
						t.Fatalf("lease %x: %+v, %v", k[:4], res, err)
					}
				}
				var dropped []namespace.Key
				locked(s, func() { s.policy.observeDrop = func(e *entry) { dropped = append(dropped, e.key) } })
				res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: other[1], Depth: 40, Size: pageSize}}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(dropped) > 0 || !present(t, s, a[0])[0] {
					t.Fatalf("dropped %d pages (the parent: %v) while the parent's child is resident below it",
						len(dropped), contains(dropped, a[0]))
				}
				if res[0].Status != Rejected || !errors.Is(res[0].Err, ErrNoSpace) {
					t.Fatalf("reserve with every droppable page held: %+v, want rejected for no space", res[0])
				}
			})
		})
	}
}
