package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// chainSpec is page i of a chain whose keys are keys (parent: keys[i-1]).
func chainSpec(keys []namespace.Key, i int) PageSpec {
	p := PageSpec{Key: keys[i], Depth: uint32(i), Size: pageSize}
	if i > 0 {
		p.Parent, p.HasParent = keys[i-1], true
	}
	return p
}

// putSpec publishes one page of testNS; it reports false when Reserve
// refused it.
func putSpec(t *testing.T, s *Store, p PageSpec, data []byte) bool {
	t.Helper()
	return putSpecIn(t, s, testNS, p, data)
}

// putSpecIn is putSpec in namespace ns.
func putSpecIn(t *testing.T, s *Store, ns Namespace, p PageSpec, data []byte) bool {
	t.Helper()
	res, err := s.Publisher().Reserve(ns.ID, []PageSpec{p}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != Reserved {
		return false
	}
	if err := s.Publisher().Write(ns.ID, res[0].WriteID, 0, data); err != nil {
		t.Fatal(err)
	}
	st, err := s.Publisher().Commit(ns.ID, res[0].WriteID, int64(len(data)), ns.Checksum.Sum(data))
	if err != nil || st != CommitCommitted {
		t.Fatalf("commit %x: %v %v", p.Key[:4], st, err)
	}
	return true
}

// profiledChain adds namespace id, whose pages of 16 tokens cost 2e9 FLOPs
// a token and 1e5 a token squared to recompute, and puts a chain of n of
// its pages named name.
func profiledChain(t *testing.T, s *Store, id namespace.ID, name string, n int) (Namespace, []namespace.Key) {
	t.Helper()
	ns := Namespace{ID: id, Tenant: "acme", PageBytes: pageSize, Checksum: namespace.CRC32C,
		PageTokens: 16, FLOPsLinear: 2e9, FLOPsQuadratic: 1e5}
	if err := s.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	keys := chainKeys(name, n)
	for i := range keys {
		if !putSpecIn(t, s, ns, chainSpec(keys, i), pageData(i)) {
			t.Fatalf("page %d refused", i)
		}
	}
	return ns, keys
}

func chainKeys(name string, n int) []namespace.Key {
	keys := make([]namespace.Key, n)
	for i := range keys {
		copy(keys[i][:], fmt.Sprintf("%s-%04d", name, i))
		keys[i][31] = byte(i)
	}
	return keys
}

func present(t *testing.T, s *Store, keys ...namespace.Key) []bool {
	t.Helper()
	_, ok, err := s.Admin().Stat(testNS.ID, keys)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A full tier drops the leaf of a chain, never a page with resident
// children, even when the parent is the oldest and least used page.
func TestLeafFirstDrop(t *testing.T) {
	for _, kind := range []eviction.Kind{eviction.KindCost, eviction.KindLRU} {
		t.Run(string(kind), func(t *testing.T) {
			s, _ := newTestStore(t, 4, func(c *Config) { c.Eviction = kind })
			a := chainKeys("a", 4)
			for i := range a {
				putSpec(t, s, chainSpec(a, i), pageData(i))
			}
			// A page from deep in another prompt: worth admitting under
			// any policy (the cost policy may refuse a shallow one).
			other := chainKeys("b", 1)
			if !putSpec(t, s, PageSpec{Key: other[0], Depth: 40, Size: pageSize}, pageData(9)) {
				t.Fatal("deep page refused")
			}
			got := present(t, s, append(a, other[0])...)
			want := []bool{true, true, true, false, true}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("present %v, want %v (the leaf a3 goes first)", got, want)
				}
			}
		})
	}
}

// Children that arrive before their parent still protect it: the parent's
// counts start from the children that waited for it.
func TestChildBeforeParent(t *testing.T) {
	s, _ := newTestStore(t, 3, nil)
	a := chainKeys("a", 2)
	putSpec(t, s, chainSpec(a, 1), pageData(1)) // child first
	putSpec(t, s, chainSpec(a, 0), pageData(0))
	s.lock()
	par := testNSState(t, s).shard(a[0]).get(a[0])
	kids, waiting := par.kids[0], testNSState(t, s).waiting.len()
	s.unlock()
	if kids != 1 || waiting != 0 {
		t.Fatalf("parent counts %d children, %d keys waiting; want 1 and 0", kids, waiting)
	}
	// Two more pages: the third evicts; never a[0] before a[1].
	var dropped []namespace.Key
	s.lock()
	s.policy.observeDrop = func(e *entry) { dropped = append(dropped, e.key) }
	s.unlock()
	for i, k := range chainKeys("x", 3) {
		putSpec(t, s, PageSpec{Key: k, Size: pageSize}, pageData(10+i))
	}
	for i, k := range dropped {
		if k == a[0] && !(i > 0 && dropped[i-1] == a[1] || contains(dropped[:i], a[1])) {
			t.Fatalf("parent dropped before its child: order %x", dropped)
		}
	}
}

func contains(keys []namespace.Key, k namespace.Key) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// locked runs fn under Store.mu, unlocking even if fn fails the test.
func locked(s *Store, fn func()) {
	s.lock()
	defer s.unlock()
	fn()
}

func testNSState(t *testing.T, s *Store) *nsState {
	t.Helper()
	n, err := s.namespace(testNS.ID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A page whose parent is not resident is reported for its parent's owner,
// and hints from other nodes mark local parents.
func TestRemoteParentHints(t *testing.T) {
	got := make(chan []ChildHint, 4)
	s, _ := newTestStore(t, 8, func(c *Config) {
		c.OnRemoteParent = func(h []ChildHint) { got <- h }
		c.JanitorInterval = 10 * time.Millisecond
	})
	a := chainKeys("a", 2)
	putSpec(t, s, chainSpec(a, 1), pageData(1))
	select {
	case h := <-got:
		// A child hint, then a value hint: the new page's worth for the
		// parent's node to order the parent by.
		if len(h) != 2 || h[0].Parent != a[0] || !h[0].Added || h[0].Worth != 0 || h[0].NS != testNS.ID ||
			h[1].Parent != a[0] || !(h[1].Worth > 0) {
			t.Fatalf("hints %+v", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hint for a child whose parent is elsewhere")
	}
	if _, err := s.Publisher().Delete(testNS.ID, a[1:]); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-got:
		if len(h) != 1 || h[0].Added {
			t.Fatalf("hints after delete %+v", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hint for a removed child")
	}

	// A hint for a local parent marks it; unknown keys are ignored.
	b := chainKeys("b", 1)
	putSpec(t, s, chainSpec(b, 0), pageData(2))
	s.Evictor().ApplyHints([]ChildHint{{NS: testNS.ID, Parent: b[0], Added: true}, {NS: testNS.ID, Parent: a[0], Added: true},
		{NS: namespace.ID{9}, Parent: b[0], Added: true}})
	e := testNSState(t, s).shard(b[0]).get(b[0])
	var remote int
	locked(s, func() { _, remote = s.policy.pol[e.tier].Children(e.h) })
	if remote != 1 {
		t.Fatalf("remote children %d, want 1", remote)
	}
	s.Evictor().ApplyHints([]ChildHint{{NS: testNS.ID, Parent: b[0]}, {NS: testNS.ID, Parent: b[0]}}) // one too many: ignored
	locked(s, func() { _, remote = s.policy.pol[e.tier].Children(e.h) })
	if remote != 0 {
		t.Fatalf("remote children %d after removal, want 0", remote)
	}
}

// With the tier full, a cutoff above every page's worth refuses new pages
// (and the rest of their sequence) instead of dropping stored ones.
func TestCutoffRefusesWhenFull(t *testing.T) {
	s, _ := newTestStore(t, 2, nil)
	a := chainKeys("a", 4)
	putSpec(t, s, chainSpec(a, 0), pageData(0))
	putSpec(t, s, chainSpec(a, 1), pageData(1))
	s.Evictor().SetCutoffs([]float64{math.MaxFloat64 / 4}, 7, true)
	if w, epoch, coord := s.Evictor().CutoffState(); len(w) != 1 || epoch != 7 || !coord {
		t.Fatalf("cutoff state %v %d %v", w, epoch, coord)
	}
	res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{chainSpec(a, 2), chainSpec(a, 3)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != Rejected || !errors.Is(r.Err, ErrNotAdmitted) {
			t.Fatalf("page %d: %v %v, want rejected, not admitted", i, r.Status, r.Err)
		}
	}
	if got := present(t, s, a[0], a[1]); !got[0] || !got[1] {
		t.Fatalf("stored pages dropped for refused ones: %v", got)
	}
	// With room, the cutoff does not apply.
	if _, err := s.Publisher().Delete(testNS.ID, a[1:2]); err != nil {
		t.Fatal(err)
	}
	if !putSpec(t, s, chainSpec(a, 1), pageData(1)) {
		t.Fatal("page refused while the tier has room")
	}
	s.Evictor().SetCutoffs(nil, 0, false)
	if !putSpec(t, s, chainSpec(a, 2), pageData(2)) {
		t.Fatal("page refused without a cutoff")
	}
}

// A writer's measured cost hint prices its page for eviction, not only for
// admission: of two pages alike but for the hint, the one said to be 100
// times dearer to recompute stays when room is needed, whichever came
// first; a page without a hint is priced by the profile.
func TestCostHintOrdersEviction(t *testing.T) {
	for _, dearFirst := range []bool{true, false} {
		s, _ := newTestStore(t, 2, nil)
		cheap, dear := chainSpec(chainKeys("cheap", 1), 0), chainSpec(chainKeys("dear", 1), 0)
		dear.CostHint = 100 * eviction.DefaultProfile().PageFLOPs(0, 0)
		order := []PageSpec{cheap, dear}
		if dearFirst {
			order = []PageSpec{dear, cheap}
		}
		for i, p := range order {
			if !putSpec(t, s, p, pageData(i)) {
				t.Fatalf("page %d refused", i)
			}
		}
		if !putSpec(t, s, chainSpec(chainKeys("new", 1), 0), pageData(2)) {
			t.Fatal("a third page refused")
		}
		if got := present(t, s, cheap.Key, dear.Key); got[0] || !got[1] {
			t.Fatalf("dear first %v: cheap present %v, dear present %v; want only the dear page kept", dearFirst, got[0], got[1])
		}
	}
}

// With the tier full and a cutoff between what a fresh shallow page and a
// fresh deep page are worth, a shallow page alone is refused, and the same
// page put with the deep end of its sequence (PageSpec.ChainDepth) is
// admitted.
func TestCutoffAdmitsChainHeads(t *testing.T) {
	s, _ := newTestStore(t, 2, nil)
	a := chainKeys("a", 2)
	putSpec(t, s, chainSpec(a, 0), pageData(0))
	putSpec(t, s, chainSpec(a, 1), pageData(1))
	b := chainKeys("b", 1)
	var shallow, deep float64
	locked(s, func() {
		q := s.policy.pol[0]
		shallow = q.WorthOf(eviction.Page{Key: keyHash(b[0]), Bytes: pageSize, Depth: 0})
		deep = q.WorthOf(eviction.Page{Key: keyHash(b[0]), Bytes: pageSize, Depth: 40})
	})
	if !(deep > shallow) {
		t.Fatalf("a fresh page at depth 40 is worth %g, a fresh one at depth 0 %g", deep, shallow)
	}
	s.Evictor().SetCutoffs([]float64{(shallow + deep) / 2 / eviction.DefaultAdmitShare}, 1, true)
	if putSpec(t, s, chainSpec(b, 0), pageData(2)) {
		t.Fatal("a lone shallow page below the cutoff was admitted")
	}
	head := chainSpec(b, 0)
	head.ChainDepth = 40
	if !putSpec(t, s, head, pageData(2)) {
		t.Fatal("the head of a sequence whose deep end is above the cutoff was refused")
	}
}

// Summaries describe what each tier holds; lookups count the prefill they
// saved and the tokens of their hit prefixes.
func TestSummariesAndSavings(t *testing.T) {
	s, _ := newTestStore(t, 8, nil)
	ns, a := profiledChain(t, s, namespace.ID{7}, "a", 3)
	sums := s.Evictor().Summaries()
	if len(sums) != 1 || sums[0].Total() != 3*pageSize {
		t.Fatalf("summaries %d, total %d; want 1 tier holding %d bytes", len(sums), sums[0].Total(), 3*pageSize)
	}
	missing := chainKeys("z", 1)[0]
	if _, err := s.Reader().Lookup(ns.ID, []namespace.Key{a[0], a[1], missing, a[2]}, false, 0); err != nil {
		t.Fatal(err)
	}
	st, err := s.Admin().NamespaceStats(ns.ID)
	if err != nil {
		t.Fatal(err)
	}
	prefill := func(tok float64) float64 { return 2e9*tok + 1e5*tok*tok }
	if want := prefill(32); math.Abs(st.SavedFLOPs-want) > 1e-9*want {
		t.Fatalf("saved %g FLOPs, want %g (two pages of 16 tokens)", st.SavedFLOPs, want)
	}
	if st.HitTokens != 32 {
		t.Fatalf("hit tokens %d, want 32", st.HitTokens)
	}
	// a[2] sits past a miss of its own parent's sequence? No: its parent a[1]
	// was present, so it is not an orphan.
	nst, _ := s.namespace(ns.ID)
	e := nst.shard(a[2]).get(a[2])
	var orphan bool
	locked(s, func() { orphan = s.policy.pol[0].Orphan(e.h) })
	if orphan {
		t.Fatal("a page whose parent is resident marked orphan")
	}
	if _, err := s.Publisher().Delete(ns.ID, a[1:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reader().Lookup(ns.ID, a, false, 0); err != nil {
		t.Fatal(err)
	}
	locked(s, func() { orphan = s.policy.pol[0].Orphan(e.h) })
	if !orphan {
		t.Fatal("a page whose parent a lookup found absent is not marked orphan")
	}
}

// checkChildCounts fails t if the lineage bookkeeping (child counts,
// child lists, the policy's local children: invariants.go) is inconsistent
// now.
func checkChildCounts(t *testing.T, s *Store) {
	t.Helper()
	if err := s.checkLineage(); err != nil {
		t.Errorf("store lineage:\n%v", err)
	}
}

// ListKeys pages through a namespace in key order, each page holding the
// smallest keys after the cursor, whatever the limit.
func TestListKeysPages(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	s, _ := newTestStore(t, 300, nil)
	var want []namespace.Key
	for i := range 200 {
		k := key(i)
		k[1] = byte(rng.Uint32()) // scatter the order
		putSpec(t, s, PageSpec{Key: k, Size: pageSize}, pageData(i))
		want = append(want, k)
	}
	slices.SortFunc(want, func(a, b namespace.Key) int { return bytes.Compare(a[:], b[:]) })
	for _, limit := range []int{1, 7, 64, 199, 200, 500} {
		var got []namespace.Key
		var after *namespace.Key
		for pages := 0; ; pages++ {
			if pages > 300 {
				t.Fatal("listing does not end")
			}
			infos, next, err := s.Admin().ListKeys(testNS.ID, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				got = append(got, in.Key)
			}
			if next == nil {
				break
			}
			after = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: listed %d keys, want %d in order", limit, len(got), len(want))
		}
	}
}

// A value hint raises a local parent to its remote child's worth, and the
// raise goes on up the parent's local chain.
func TestValueHints(t *testing.T) {
	s, _ := newTestStore(t, 8, nil)
	a := chainKeys("a", 2)
	putSpec(t, s, chainSpec(a, 0), pageData(0))
	putSpec(t, s, chainSpec(a, 1), pageData(1))
	worth := func(k namespace.Key) (w float64) {
		e := testNSState(t, s).shard(k).get(k)
		locked(s, func() { w = s.policy.pol[e.tier].Worth(e.h) })
		return w
	}
	before := worth(a[0])
	// a[1]'s child lives elsewhere and is worth a thousand times more.
	s.Evictor().ApplyHints([]ChildHint{{NS: testNS.ID, Parent: a[1], Worth: 1000 * worth(a[1])}})
	if w1, w0 := worth(a[1]), worth(a[0]); w0 < 999*before || w1 < w0 {
		t.Fatalf("after a value hint: worth a0 %g (was %g), a1 %g", w0, before, w1)
	}
	// A lower hint changes nothing.
	w := worth(a[0])
	s.Evictor().ApplyHints([]ChildHint{{NS: testNS.ID, Parent: a[1], Worth: before}})
	if worth(a[0]) != w {
		t.Fatal("a lower value hint lowered the chain")
	}
}

// Hints that arrive before their parent (its child, put on another node,
// committed first) apply when the parent arrives; withdrawn ones do not.
func TestHintsBeforeParent(t *testing.T) {
	s, _ := newTestStore(t, 8, nil)
	a, b := chainKeys("a", 1), chainKeys("b", 1)
	s.Evictor().ApplyHints([]ChildHint{
		{NS: testNS.ID, Parent: a[0], Added: true}, {NS: testNS.ID, Parent: a[0], Added: true},
		{NS: testNS.ID, Parent: a[0], Worth: 1e30},
		{NS: testNS.ID, Parent: b[0], Added: true}, {NS: testNS.ID, Parent: b[0]},
		{NS: testNS.ID, Parent: b[0], Worth: 1e30}, // b's only child is gone: ignored
	})
	putSpec(t, s, chainSpec(a, 0), pageData(0))
	putSpec(t, s, chainSpec(b, 0), pageData(1))
	n := testNSState(t, s)
	var remoteA, remoteB int
	var worthA, worthB float64
	locked(s, func() {
		ea, eb := n.shard(a[0]).get(a[0]), n.shard(b[0]).get(b[0])
		_, remoteA = s.policy.pol[0].Children(ea.h)
		_, remoteB = s.policy.pol[0].Children(eb.h)
		worthA, worthB = s.policy.pol[0].Worth(ea.h), s.policy.pol[0].Worth(eb.h)
	})
	if remoteA != 2 || remoteB != 0 {
		t.Fatalf("remote children: a %d (want 2), b %d (want 0)", remoteA, remoteB)
	}
	if worthA < 1e29 || worthB > 1e29 {
		t.Fatalf("worth: a %g (want the hint's 1e30), b %g (want its own)", worthA, worthB)
	}
	if len(n.remoteWaiting) != 0 || s.policy.remoteWaiting != 0 {
		t.Fatalf("%d hints still waiting (%d counted)", len(n.remoteWaiting), s.policy.remoteWaiting)
	}
}

// MarkOrphans marks the pages it holds (skipping others), a marked page is
// the first victim whatever its value, and a put of the page or a hit
// clears the mark.
func TestMarkOrphans(t *testing.T) {
	s, _ := newTestStore(t, 3, nil)
	a := chainKeys("a", 3)
	for i := range a {
		putSpec(t, s, chainSpec(a, i), pageData(i))
	}
	orphan := func(k namespace.Key) bool {
		infos, ok, err := s.Admin().Stat(testNS.ID, []namespace.Key{k})
		if err != nil || !ok[0] {
			t.Fatalf("stat %x: %v %v", k[:4], ok, err)
		}
		return infos[0].Orphan
	}
	absent := chainKeys("z", 1)[0]
	if n, err := s.Reader().MarkOrphans(testNS.ID, []namespace.Key{a[2], absent}); err != nil || n != 1 {
		t.Fatalf("marked %d, %v; want 1 (the absent key skipped)", n, err)
	}
	if n, _ := s.Reader().MarkOrphans(testNS.ID, []namespace.Key{a[2]}); n != 0 {
		t.Fatalf("marked %d again, want 0", n)
	}
	if !orphan(a[2]) || orphan(a[1]) {
		t.Fatal("the mark is not on the page it was set on")
	}
	// A put of the marked page clears the mark.
	if putSpec(t, s, chainSpec(a, 2), pageData(2)) {
		t.Fatal("a put of a published page reserved space")
	}
	if orphan(a[2]) {
		t.Fatal("a put of the page left its orphan mark")
	}
	// A hit clears it too.
	s.Reader().MarkOrphans(testNS.ID, []namespace.Key{a[2]})
	if _, err := s.Reader().Lookup(testNS.ID, a, false, 0); err != nil {
		t.Fatal(err)
	}
	if orphan(a[2]) {
		t.Fatal("a hit left the orphan mark")
	}
	// Marked, a page goes first: of a hot page and a cold one, a put into
	// a full tier evicts the hot one once it is marked.
	s, _ = newTestStore(t, 2, nil)
	hot, cold, next := chainKeys("hot", 1), chainKeys("cold", 1), chainKeys("next", 1)
	putSpec(t, s, chainSpec(hot, 0), pageData(0))
	putSpec(t, s, chainSpec(cold, 0), pageData(1))
	for range 5 {
		s.Reader().Lookup(testNS.ID, hot, false, 0)
	}
	s.Reader().MarkOrphans(testNS.ID, hot)
	if !putSpec(t, s, chainSpec(next, 0), pageData(2)) {
		t.Fatal("a third page refused")
	}
	if got := present(t, s, hot[0], cold[0]); got[0] || !got[1] {
		t.Fatalf("hot orphan present %v, cold page present %v; want the orphan evicted", got[0], got[1])
	}
}

// TestFlushHints: once FlushHints returns, every hint queued before it has
// reached Config.OnRemoteParent, whichever goroutine handed it over.
func TestFlushHints(t *testing.T) {
	var mu sync.Mutex
	var got []ChildHint
	s, _ := newTestStore(t, 8, func(c *Config) {
		c.OnRemoteParent = func(h []ChildHint) {
			mu.Lock()
			got = append(got, h...)
			mu.Unlock()
		}
	})
	a := chainKeys("flush", 4)
	for i := 1; i < len(a); i += 2 { // children whose parents are elsewhere
		putSpec(t, s, chainSpec(a, i), pageData(i))
		s.Evictor().FlushHints()
		mu.Lock()
		n := 0
		for _, h := range got {
			if h.Added && h.Parent == a[i-1] {
				n++
			}
		}
		mu.Unlock()
		if n != 1 {
			t.Fatalf("after FlushHints, %d child hints for the parent of page %d, want 1", n, i)
		}
	}
}

// TestTuningHalfLife: the store's queues learn their half-life (0: from
// eviction.DefaultHalfLife of their page capacity), or take Tuning.HalfLife
// capacities.
func TestTuningHalfLife(t *testing.T) {
	for _, tc := range []struct {
		tuning EvictionTuning
		pages  int64
		want   int
	}{
		{EvictionTuning{}, 100, 0},
		{EvictionTuning{}, 0, 0},
		{EvictionTuning{HalfLife: 0.5}, 100, 50},
		{EvictionTuning{HalfLife: 2}, 0, eviction.DefaultHalfLife(0)},
	} {
		if got := tc.tuning.halfLife(tc.pages); got != tc.want {
			t.Errorf("%+v.halfLife(%d) = %d, want %d", tc.tuning, tc.pages, got, tc.want)
		}
	}
	if got, want := eviction.DefaultHalfLife(100), 100; got != want {
		t.Errorf("DefaultHalfLife(100) = %d, want %d (1 capacity)", got, want)
	}
}

// TestTuningHistory: EvictionTuning.History sizes each queue's frequency
// history in keys per page of the tier (the default, 8, when 0), and a
// history or half-life that is not a number of capacities is refused.
func TestTuningHistory(t *testing.T) {
	const pages = 4096
	historyBytes := func(h float64) int {
		s, _ := newTestStore(t, pages, func(c *Config) { c.Tuning.History = h })
		var n int
		locked(s, func() { n = s.policy.pol[0].HistoryBytes() })
		return n
	}
	// The sketch keeps 2 bytes a key, for a power of two of keys.
	for _, c := range []struct {
		history float64
		want    int
	}{{0, 8 * pages * 2}, {8, 8 * pages * 2}, {2, 2 * pages * 2}, {0.5, pages}} {
		if got := historyBytes(c.history); got != c.want {
			t.Errorf("History %v: %d bytes of history, want %d", c.history, got, c.want)
		}
	}
	for _, h := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := New(Config{Tiers: []tiers.Tier{newMemTier(pages * pageSize)}, Tuning: EvictionTuning{History: h}}); err == nil {
			t.Errorf("History %v: no error", h)
		}
		if _, err := New(Config{Tiers: []tiers.Tier{newMemTier(pages * pageSize)}, Tuning: EvictionTuning{HalfLife: h}}); err == nil {
			t.Errorf("HalfLife %v: no error", h)
		}
	}
}
