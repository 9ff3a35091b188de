package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
)

// TestTableMatchesMap applies random inserts, deletes and lookups to a
// table and to a map, and checks that they agree and the table stays
// consistent, through growing and shrinking. Keys share prefixes and
// collide in their first bytes, as adversarial keys would.
func TestTableMatchesMap(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	tab, want := newTable(), map[namespace.Key]*entry{}
	key := func() namespace.Key {
		var k namespace.Key
		k[0], k[31] = byte(r.IntN(4)), byte(r.IntN(256))
		k[15] = byte(r.IntN(8))
		return k
	}
	for step := range 20_000 {
		k := key()
		switch op := r.IntN(10); {
		case op < 5 && step < 12_000: // grow, then mostly shrink
			if want[k] == nil {
				e := &entry{key: k}
				tab.insert(e)
				want[k] = e
			}
		case op < 8:
			if got := tab.delete(k); got != (want[k] != nil) {
				t.Fatalf("step %d: delete %s = %v", step, k, got)
			}
			delete(want, k)
		default:
			if got := tab.get(k); got != want[k] {
				t.Fatalf("step %d: get %s = %p, want %p", step, k, got, want[k])
			}
		}
		if step%500 == 0 {
			if err := tab.check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	if err := tab.check(); err != nil {
		t.Fatal(err)
	}
	if tab.len() != len(want) {
		t.Fatalf("%d entries, want %d", tab.len(), len(want))
	}
	n := 0
	for e := range tab.all() {
		if want[e.key] != e {
			t.Fatalf("all yields %s, not in the map", e.key)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("all yields %d entries, want %d", n, len(want))
	}
}
