package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
)

// modelSteps drives a table and the map that models it through random
// steps: add (growing first, then mostly shrinking), del and get, of keys
// that share prefixes and collide in their first bytes, as adversarial
// keys would; check runs every 500 steps and at the end.
func modelSteps(t *testing.T, stream uint64, add, del, get func(step int, k namespace.Key), check func() error) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, stream))
	for step := range 20_000 {
		var k namespace.Key
		k[0], k[31] = byte(r.IntN(4)), byte(r.IntN(256))
		k[15] = byte(r.IntN(8))
		switch op := r.IntN(10); {
		case op < 5 && step < 12_000:
			add(step, k)
		case op < 8:
			del(step, k)
		default:
			get(step, k)
		}
		if step%500 == 0 {
			if err := check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
}

// TestTableMatchesMap applies random inserts, deletes and lookups to a
// table and to a map, and checks that they agree and the table stays
// consistent, through growing and shrinking.
func TestTableMatchesMap(t *testing.T) {
	tab, want := newTable(), map[namespace.Key]*entry{}
	modelSteps(t, 0, func(_ int, k namespace.Key) {
		if want[k] == nil {
			e := &entry{key: k}
			tab.insert(e)
			want[k] = e
		}
	}, func(step int, k namespace.Key) {
		if got := tab.delete(k); got != (want[k] != nil) {
			t.Fatalf("step %d: delete %s = %v", step, k, got)
		}
		delete(want, k)
	}, func(step int, k namespace.Key) {
		if got := tab.get(k); got != want[k] {
			t.Fatalf("step %d: get %s = %p, want %p", step, k, got, want[k])
		}
	}, tab.check)
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

// TestWaitersMatchMap applies random adds, drops and lookups to a waiter
// table and to a map, and checks that they agree, that a waiter keeps its
// index and contents, and that the table stays consistent (its index, its
// slab and its free indexes), through growing and shrinking.
func TestWaitersMatchMap(t *testing.T) {
	ws, want, mark := newWaiters(), map[namespace.Key]uint32{}, map[namespace.Key]ref{}
	modelSteps(t, 1, func(step int, k namespace.Key) {
		if _, ok := want[k]; ok {
			return
		}
		i := ws.add(k)
		for k2, j := range want {
			if j == i {
				t.Fatalf("step %d: add %s reuses index %d of %s", step, k, i, k2)
			}
		}
		ws.at(i).head = ref(step) // a mark that must stay with the key
		want[k], mark[k] = i, ref(step)
	}, func(_ int, k namespace.Key) {
		if i, ok := want[k]; ok {
			ws.drop(i)
			delete(want, k)
		}
	}, func(step int, k namespace.Key) {
		i, ok := ws.get(k)
		if j, had := want[k]; ok != had || i != j || ok && ws.at(i).head != mark[k] {
			t.Fatalf("step %d: get %s = %d, %v; want %d, %v", step, k, i, ok, j, had)
		}
	}, ws.check)
	if ws.len() != len(want) {
		t.Fatalf("%d waiters, want %d", ws.len(), len(want))
	}
	n := 0
	for k, i := range ws.all() {
		if j, ok := want[k]; !ok || i != j || ws.at(i).key != k || !ws.live(i) {
			t.Fatalf("all yields %s at %d, the map has %d (%v)", k, i, j, ok)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("all yields %d waiters, want %d", n, len(want))
	}
}
