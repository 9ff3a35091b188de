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

// TestGetBatchMatchesGet looks up present and absent keys of a table with
// getBatch and checks every answer against get's, in a table full enough
// that some keys' probes meet another key's tag before their own, which
// getBatch must probe again (the test fails unless it saw some).
func TestGetBatchMatchesGet(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	tab := newTable()
	const present = 20_000
	keys := make([]namespace.Key, 2*present) // the first half present, the rest absent
	for i := range keys {
		for j := range keys[i] {
			keys[i][j] = byte(r.Uint32())
		}
		if i < present {
			tab.insert(&entry{key: keys[i]})
		}
	}
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	r.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	found := make([]*entry, len(keys))
	for i := range found {
		found[i] = &entry{} // getBatch must overwrite every position it is given
	}
	tab.getBatch(keys, order, found)
	collided := 0
	for i, k := range keys {
		want := tab.get(k)
		if (want != nil) != (i < present) {
			t.Fatalf("key %d: get = %v, present %v", i, want, i < present)
		}
		if found[i] != want {
			t.Fatalf("key %d: getBatch = %p, get = %p", i, found[i], want)
		}
		if first := tab.first(tab.hash(&k)); first != nil && first.key != k {
			collided++
		}
	}
	if collided == 0 {
		t.Fatal("no key's probe met another key's tag first: the fallback went untested")
	}
	t.Logf("%d of %d keys met another key's tag first", collided, len(keys))

	var empty table
	found[0] = &entry{}
	empty.getBatch(keys[:1], []int32{0}, found)
	if found[0] != nil {
		t.Fatal("an empty table's getBatch left an entry")
	}
}
