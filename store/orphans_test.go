package store

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// The index budget (docs/design.md §4.2): an entry stays within the 128-byte Go
// size class (the parent and child links are 4-byte refs, not keys or
// pointers; the extent keeps no length): a field that pushes it past costs
// 16 bytes a page (BenchmarkIndexBytesPerPage).
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 128 {
		t.Fatalf("entry is %d bytes, want at most 128 (a Go size class)", got)
	}
}

// putChain puts a chain of n pages named name and returns their keys.
func putChain(t *testing.T, s *Store, name string, n int) []namespace.Key {
	t.Helper()
	keys := chainKeys(name, n)
	for i := range keys {
		putSpec(t, s, chainSpec(keys, i), pageData(i))
	}
	return keys
}

// age makes pages look put a minute ago: past the orphan grace.
func age(t *testing.T, s *Store, keys ...namespace.Key) {
	t.Helper()
	locked(s, func() {
		for _, k := range keys {
			e := testNSState(t, s).shard(k).get(k)
			if e == nil {
				t.Fatalf("aging %s: not resident", k)
			}
			e.create -= 60
			e.put -= 60
		}
	})
}

// child is a page spec of key under parent.
func child(key, parent namespace.Key, depth uint32) PageSpec {
	return PageSpec{Key: key, Parent: parent, HasParent: true, Depth: depth, Size: pageSize}
}

func orphanMarked(t *testing.T, s *Store, keys ...namespace.Key) []bool {
	t.Helper()
	infos, ok, err := s.Admin().Stat(testNS.ID, keys)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(keys))
	for i := range keys {
		out[i] = ok[i] && infos[i].Orphan
	}
	return out
}

// A parent-gone notice drops the old unleased children of the gone key and
// their resident descendants, deepest first; a dropped page that had
// children on other nodes sends a notice in turn.
func TestParentsGoneDropsSubtree(t *testing.T) {
	hints := make(chan []ChildHint, 64)
	s, _ := newTestStore(t, 8, func(c *Config) { c.OnRemoteParent = func(h []ChildHint) { hints <- h } })
	k := chainKeys("k", 6)
	gone, c, d, d2, e, other := k[0], k[1], k[2], k[3], k[4], k[5]
	// gone (elsewhere) -> c -> d -> e, and c -> d2; other is unrelated.
	for i, p := range []PageSpec{child(c, gone, 1), child(d, c, 2), child(d2, c, 2), child(e, d, 3),
		{Key: other, Size: pageSize}} {
		putSpec(t, s, p, pageData(i))
	}
	s.Evictor().ApplyHints([]ChildHint{{NS: testNS.ID, Parent: d, Added: true}}) // d has a child on another node
	age(t, s, c, d, d2, e, other)
	var order []namespace.Key
	locked(s, func() { s.policy.observeDrop = func(e *entry) { order = append(order, e.key) } })

	dropped, marked, err := s.Evictor().ParentsGone(testNS.ID, []namespace.Key{gone})
	if err != nil || dropped != 4 || marked != 0 {
		t.Fatalf("dropped %d, marked %d, %v; want 4 and 0", dropped, marked, err)
	}
	if got := present(t, s, c, d, d2, e, other); got[0] || got[1] || got[2] || got[3] || !got[4] {
		t.Fatalf("present c d d2 e other: %v; want only other", got)
	}
	pos := map[namespace.Key]int{}
	for i, k := range order {
		pos[k] = i
	}
	if len(order) != 4 || pos[e] > pos[d] || pos[d] > pos[c] || pos[d2] > pos[c] {
		t.Fatalf("drop order %v: want e before d, d and d2 before c", order)
	}
	if st, _ := s.Admin().NamespaceStats(testNS.ID); st.Orphaned != 4 {
		t.Fatalf("orphaned %d, want 4", st.Orphaned)
	}
	checkChildCounts(t, s)

	// d had a remote child: its drop sends a parent-gone notice for d,
	// and only for d.
	var notices []namespace.Key
	deadline := time.After(5 * time.Second)
	for len(notices) == 0 {
		select {
		case hs := <-hints:
			for _, h := range hs {
				if h.Gone {
					if h.NS != testNS.ID {
						t.Fatalf("notice for namespace %s", h.NS.Short())
					}
					notices = append(notices, h.Parent)
				}
			}
		case <-deadline:
			t.Fatal("no parent-gone notice for d")
		}
	}
	notices = append(notices, goneNotices(s, hints)...) // anything still pending
	if len(notices) != 1 || notices[0] != d {
		t.Fatalf("notices for %v, want one for d %s", notices, d)
	}
}

// Children that are pinned or within the grace are only marked, and keep
// their ancestors: a page with a child that stays is marked, not dropped.
func TestParentsGoneSparesLeasedAndYoung(t *testing.T) {
	s, _ := newTestStore(t, 8, nil)
	k := chainKeys("k", 7)
	gone, leased, young, old, oldKid, holder, leasedKid := k[0], k[1], k[2], k[3], k[4], k[5], k[6]
	for i, p := range []PageSpec{child(leased, gone, 1), child(young, gone, 1), child(old, gone, 1),
		child(oldKid, old, 2), child(holder, gone, 1), child(leasedKid, holder, 2)} {
		putSpec(t, s, p, pageData(i))
	}
	age(t, s, leased, old, oldKid, holder, leasedKid)
	for _, key := range []namespace.Key{leased, leasedKid} {
		res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key}, true, time.Minute)
		if err != nil || res.Lease == nil {
			t.Fatalf("leasing %s: %+v %v", key, res, err)
		}
	}
	dropped, marked, err := s.Evictor().ParentsGone(testNS.ID, []namespace.Key{gone})
	if err != nil || dropped != 2 || marked != 4 {
		t.Fatalf("dropped %d, marked %d, %v; want 2 (old and its child) and 4", dropped, marked, err)
	}
	stay := []namespace.Key{leased, young, holder, leasedKid}
	for i, ok := range present(t, s, append(stay, old, oldKid)...) {
		if want := i < len(stay); ok != want {
			t.Fatalf("page %d present %v, want %v", i, ok, want)
		}
	}
	for i, m := range orphanMarked(t, s, stay...) {
		if !m {
			t.Fatalf("%s stays unmarked", stay[i])
		}
	}
	// Marked pages count once: a second notice marks nothing new.
	if dropped, marked, _ := s.Evictor().ParentsGone(testNS.ID, []namespace.Key{gone}); dropped != 0 || marked != 0 {
		t.Fatalf("second notice: dropped %d, marked %d; want 0 and 0", dropped, marked)
	}
	checkChildCounts(t, s)
}

// A notice for a key with no children here, or for a key resident here,
// changes nothing; an unknown namespace is an error.
func TestParentsGoneNoChildren(t *testing.T) {
	s, _ := newTestStore(t, 8, nil)
	a := putChain(t, s, "a", 2)
	age(t, s, a...)
	absent := chainKeys("z", 1)[0]
	for _, key := range []namespace.Key{absent, a[0], a[1]} {
		if dropped, marked, err := s.Evictor().ParentsGone(testNS.ID, []namespace.Key{key}); err != nil || dropped != 0 || marked != 0 {
			t.Fatalf("notice for %s: dropped %d, marked %d, %v; want nothing", key, dropped, marked, err)
		}
	}
	if got := present(t, s, a...); !got[0] || !got[1] {
		t.Fatalf("present %v after notices for keys without waiting children", got)
	}
	if _, _, err := s.Evictor().ParentsGone(namespace.ID{9}, []namespace.Key{absent}); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("unknown namespace: %v", err)
	}
	// ApplyHints applies a notice the same way: a's parent was never here,
	// so a notice for a[0] is a no-op, and one for a gone parent drops.
	b := chainKeys("b", 2)
	putSpec(t, s, child(b[1], b[0], 1), pageData(5))
	age(t, s, b[1])
	s.Evictor().ApplyHints([]ChildHint{{NS: testNS.ID, Parent: a[0], Gone: true}, {NS: testNS.ID, Parent: b[0], Gone: true}})
	if got := present(t, s, a[0], a[1], b[1]); !got[0] || !got[1] || got[2] {
		t.Fatalf("present a0 a1 b1: %v after ApplyHints; want b1 dropped", got)
	}
	checkChildCounts(t, s)
}

// MarkOrphans only marks, whatever the pages' age or leases: a lookup's
// miss may be a node that is down for a while and comes back with its
// pages (TestClusterProcesses restarts one), so nothing is dropped on that
// word alone.
func TestMarkOrphansOnlyMarks(t *testing.T) {
	s, _ := newTestStore(t, 8, nil)
	a := putChain(t, s, "a", 5)
	b := chainKeys("b", 1)
	putSpec(t, s, child(b[0], a[2], 3), pageData(7)) // a branch under a[2]
	age(t, s, append(a, b[0])...)
	res, err := s.Reader().Lookup(testNS.ID, a[:4], true, time.Minute) // leases a[0..3]
	if err != nil || res.HitPrefix != 4 {
		t.Fatalf("lookup: %+v %v", res, err)
	}
	marked, err := s.Reader().MarkOrphans(testNS.ID, a[2:])
	if err != nil || marked != 3 {
		t.Fatalf("marked %d, %v; want 3", marked, err)
	}
	if err := s.Reader().ReleaseLease(testNS.ID, res.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if marked, _ := s.Reader().MarkOrphans(testNS.ID, a[2:]); marked != 0 {
		t.Fatalf("marked %d again; want 0", marked)
	}
	if got := present(t, s, a[0], a[1], a[2], a[3], a[4], b[0]); slices.Contains(got, false) {
		t.Fatalf("present %v; want every page", got)
	}
	if got := orphanMarked(t, s, a[1], a[2], a[3], a[4], b[0]); got[0] || !got[1] || !got[2] || !got[3] || got[4] {
		t.Fatalf("orphan marks on a1 a2 a3 a4 b0: %v; want a2 a3 a4", got)
	}
	checkChildCounts(t, s)
}

// A page put again (EXISTS) counts as young: its sequence was just
// recomputed, so a notice or an orphan report that crossed the put only
// marks it.
func TestPutAgainIsYoung(t *testing.T) {
	s, _ := newTestStore(t, 4, nil)
	k := chainKeys("k", 3)
	gone, c, d := k[0], k[1], k[2]
	putSpec(t, s, child(c, gone, 1), pageData(1))
	putSpec(t, s, child(d, gone, 1), pageData(2))
	age(t, s, c, d)
	if putSpec(t, s, child(c, gone, 1), pageData(1)) {
		t.Fatal("a put of a published page reserved space")
	}
	if dropped, marked, _ := s.Evictor().ParentsGone(testNS.ID, []namespace.Key{gone}); dropped != 1 || marked != 1 {
		t.Fatalf("dropped %d, marked %d; want d dropped, c (put again) marked", dropped, marked)
	}
	if got := present(t, s, c, d); !got[0] || got[1] {
		t.Fatalf("present c d: %v; want c only", got)
	}
}

// A page that names itself as its parent is taken as having none (it
// used to panic the store).
func TestSelfParent(t *testing.T) {
	s, _ := newTestStore(t, 4, nil)
	a := chainKeys("a", 1)
	putSpec(t, s, child(a[0], a[0], 1), pageData(0))
	if got := present(t, s, a[0]); !got[0] {
		t.Fatal("page missing")
	}
	if _, err := s.Publisher().Delete(testNS.ID, a); err != nil {
		t.Fatal(err)
	}
	checkChildCounts(t, s)
}

// Parent keys are not verified: a cycle (a's parent b, b's parent a) does
// not hang a parent-gone walk, and both stay (each holds the other).
func TestOrphanCycle(t *testing.T) {
	s, _ := newTestStore(t, 4, nil)
	a := chainKeys("a", 2)
	putSpec(t, s, child(a[0], a[1], 1), pageData(0))
	putSpec(t, s, child(a[1], a[0], 1), pageData(1))
	age(t, s, a...)
	// No notice can reach a cycle (its pages' parents are all in it), so
	// walk from one of its pages directly.
	var c orphanCount
	locked(s, func() {
		n, _ := s.namespace(testNS.ID)
		found := make([]*entry, 1)
		n.getAll(a[:1], found)
		s.orphanLocked(found[0], s.clock(time.Now()), &c)
	})
	if c.dropped != 0 || c.marked != 2 {
		t.Fatalf("dropped %d, marked %d; want 0 and 2", c.dropped, c.marked)
	}
	checkChildCounts(t, s)
}

// Uncount takes back what a lookup counted for pages (their tokens and
// the FLOPs their depths save), skips keys not held, and never takes the
// counters below zero.
func TestUncount(t *testing.T) {
	s, err := New(Config{Tiers: []tiers.Tier{newMemTier(8 * pageSize)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLineageAfter(t, s)
	priced := testNS // the same ID, with a compute profile
	priced.PageTokens, priced.FLOPsLinear, priced.FLOPsQuadratic = 16, 2e9, 1e6
	if err := s.AddNamespace(priced); err != nil {
		t.Fatal(err)
	}
	a := putChain(t, s, "a", 4)
	res, err := s.Reader().Lookup(testNS.ID, a, false, 0)
	if err != nil || res.HitPrefix != 4 {
		t.Fatalf("lookup: %+v %v", res, err)
	}
	stats := func() (uint64, float64) {
		st, err := s.Admin().NamespaceStats(testNS.ID)
		if err != nil {
			t.Fatal(err)
		}
		return st.HitTokens, st.SavedFLOPs
	}
	tokens0, flops0 := stats()
	absent := chainKeys("z", 1)[0]
	tokens, flops, err := s.Reader().Uncount(testNS.ID, []namespace.Key{a[2], a[3], absent})
	if err != nil {
		t.Fatal(err)
	}
	n := testNSState(t, s)
	wantFLOPs := n.pageCost(2) + n.pageCost(3)
	if tokens != 2*16 || flops != wantFLOPs || wantFLOPs <= 0 {
		t.Fatalf("took back %d tokens and %g FLOPs, want %d and %g", tokens, flops, 2*16, wantFLOPs)
	}
	if t1, f1 := stats(); t1 != tokens0-uint64(tokens) || math.Abs(f1-(flops0-flops)) > 1e-6*flops0 {
		t.Fatalf("counters %d tokens, %g FLOPs after taking back; want %d and %g", t1, f1, tokens0-uint64(tokens), flops0-flops)
	}
	for range 3 { // more than was counted: the counters stop at zero
		if _, _, err := s.Reader().Uncount(testNS.ID, a); err != nil {
			t.Fatal(err)
		}
	}
	if t2, f2 := stats(); t2 != 0 || f2 != 0 {
		t.Fatalf("counters %d tokens, %g FLOPs; want 0 and 0", t2, f2)
	}
	if _, _, err := s.Reader().Uncount(namespace.ID{9}, a); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("unknown namespace: %v", err)
	}
}

// goneNotices flushes s's pending hints and returns the parents of the
// parent-gone notices among what hints holds, in order.
func goneNotices(s *Store, hints chan []ChildHint) []namespace.Key {
	s.flushHints()
	var out []namespace.Key
	for {
		select {
		case hs := <-hints:
			for _, h := range hs {
				if h.Gone {
					out = append(out, h.Parent)
				}
			}
		default:
			return out
		}
	}
}

// Handed removes a page with remote children without a parent-gone
// notice (its owner holds it: its children stay reachable), where Delete
// sends one; it counts the page as handed, and its local child waits for
// its parent as for any parent on another node.
func TestHandedSendsNoNotice(t *testing.T) {
	hints := make(chan []ChildHint, 64)
	s, _ := newTestStore(t, 8, func(c *Config) { c.OnRemoteParent = func(h []ChildHint) { hints <- h } })
	k := chainKeys("h", 4)
	for i, p := range []PageSpec{{Key: k[0], Size: pageSize}, child(k[1], k[0], 1), {Key: k[2], Size: pageSize}} {
		putSpec(t, s, p, pageData(i))
	}
	s.Evictor().ApplyHints([]ChildHint{{NS: testNS.ID, Parent: k[0], Added: true}, {NS: testNS.ID, Parent: k[2], Added: true}})
	goneNotices(s, hints) // what the puts sent
	if n, err := s.Handoff().Handed(testNS.ID, k[:1]); err != nil || n != 1 {
		t.Fatalf("handed: %d, %v", n, err)
	}
	if got := goneNotices(s, hints); len(got) != 0 {
		t.Fatalf("handing a page back sent parent-gone notices for %v", got)
	}
	if got := present(t, s, k[0], k[1]); got[0] || !got[1] {
		t.Fatalf("present parent, child after Handed: %v; want the child only", got)
	}
	if n, err := s.Publisher().Delete(testNS.ID, k[2:3]); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if got := goneNotices(s, hints); len(got) != 1 || got[0] != k[2] {
		t.Fatalf("deleting a page with a remote child: notices %v, want one for it", got)
	}
	if st, _ := s.Admin().NamespaceStats(testNS.ID); st.Handed != 1 || st.Deleted != 1 {
		t.Fatalf("handed %d, deleted %d; want 1 and 1", st.Handed, st.Deleted)
	}
	checkChildCounts(t, s)
}
