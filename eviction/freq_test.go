package eviction

import (
	"math"
	"testing"
)

// PassChildWorth is SetChildWorth with the child's Worth, in the log
// domain, across two queues whose ages differ; it only ever raises.
func TestPassChildWorth(t *testing.T) {
	newQ := func() *Queue {
		q, err := New(Config{Kind: KindCost, Capacity: 64})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	a, b, ref := newQ(), newQ(), newQ()
	par := a.Insert(Page{Key: 1, Bytes: 4096, Depth: 0})
	refPar := ref.Insert(Page{Key: 1, Bytes: 4096, Depth: 0})
	for i := range 20 { // b ages apart from a
		b.Insert(Page{Key: uint64(100 + i), Bytes: 4096})
	}
	child := b.Insert(Page{Key: 2, Bytes: 4096, Depth: 30})
	for range 5 {
		b.Hit(child)
	}
	if !a.PassChildWorth(par, b, child) {
		t.Fatal("a deeper, hotter child did not raise its parent")
	}
	ref.SetChildWorth(refPar, b.Worth(child))
	if got, want := a.Worth(par), ref.Worth(refPar); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("worth %g, want %g (SetChildWorth with the child's Worth)", got, want)
	}
	if got, want := a.Worth(par), b.Worth(child); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("parent worth %g, child %g", got, want)
	}
	cold := b.Insert(Page{Key: 3, Bytes: 4096, Depth: 0})
	before := a.Worth(par)
	if a.PassChildWorth(par, b, cold) || a.Worth(par) != before {
		t.Fatal("a colder child lowered or 'raised' its parent")
	}
	lru, _ := New(Config{Kind: KindLRU})
	h := lru.Insert(Page{Key: 4, Bytes: 4096})
	if lru.PassChildWorth(h, b, child) {
		t.Fatal("PassChildWorth acted on an LRU queue")
	}
}
