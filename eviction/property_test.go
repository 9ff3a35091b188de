package eviction

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("eviction.seed", 0, "seed for the randomized policy tests (0: from the clock)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -eviction.seed=%d)", seed, seed)
	return seed
}

// mpage is the harness's model of one tracked page: what a store knows.
type mpage struct {
	parent    Handle // resident local parent, 0 if none
	localKids int
	remote    int // remote children hints outstanding
	pins      int
}

// harness drives a Queue the way a store does and checks every victim
// against the model and against a brute-force minimum.
type harness struct {
	t     *testing.T
	q     *Queue
	r     *rand.Rand
	pages map[Handle]*mpage
	live  []Handle
}

func (m *harness) pick() Handle { return m.live[m.r.IntN(len(m.live))] }

func (m *harness) drop(h Handle) {
	for i, x := range m.live {
		if x == h {
			m.live[i] = m.live[len(m.live)-1]
			m.live = m.live[:len(m.live)-1]
			break
		}
	}
	mp := m.pages[h]
	delete(m.pages, h)
	if mp.parent != 0 {
		m.pages[mp.parent].localKids--
		m.q.ChildRemoved(mp.parent, true)
	}
	// Local children of a removed (deleted) page lose their parent.
	for ch, cp := range m.pages {
		if cp.parent == h {
			cp.parent = 0
			m.q.SetOrphan(ch, true)
		}
	}
}

func (m *harness) insert() {
	p := Page{Key: m.r.Uint64(), Bytes: int64(1 + m.r.IntN(4096)), Depth: uint32(m.r.IntN(200)), Freq: uint32(m.r.IntN(3))}
	var parent Handle
	if len(m.live) > 0 && m.r.IntN(10) < 7 {
		parent = m.pick()
	}
	h := m.q.Insert(p)
	if _, dup := m.pages[h]; dup {
		m.t.Fatalf("handle %d assigned twice", h)
	}
	m.pages[h] = &mpage{parent: parent}
	m.live = append(m.live, h)
	if parent != 0 {
		m.pages[parent].localKids++
		m.q.ChildAdded(parent, true)
	}
	if m.q.kind == KindOffline {
		m.q.SetPriority(h, m.r.Float64())
	}
}

// bruteVictim is the minimum over eligible pages, computed from scratch.
func (m *harness) bruteVictim() (Handle, bool) {
	var best Handle
	for _, h := range m.live {
		s := &m.q.pages[h]
		if !m.q.eligible(s) {
			continue
		}
		if best == 0 || m.q.less(h, best) {
			best = h
		}
	}
	return best, best != 0
}

func (m *harness) evict() {
	h, ok := m.q.Victim()
	bh, bok := m.bruteVictim()
	if ok != bok || (ok && m.q.less(bh, h)) {
		m.t.Fatalf("Victim() = %d, %v; brute force %d, %v", h, ok, bh, bok)
	}
	if !ok {
		return
	}
	mp := m.pages[h]
	if mp.pins > 0 {
		m.t.Fatalf("victim %d is pinned (%d pins)", h, mp.pins)
	}
	if mp.localKids > 0 {
		m.t.Fatalf("victim %d has %d resident local children", h, mp.localKids)
	}
	m.q.Evict(h)
	m.drop(h)
}

func (m *harness) step() {
	if len(m.live) == 0 {
		m.insert()
		return
	}
	switch op := m.r.IntN(100); {
	case op < 30:
		m.insert()
	case op < 45:
		m.q.Hit(m.pick())
	case op < 55:
		h := m.pick()
		m.pages[h].pins++
		m.q.Pin(h)
	case op < 65:
		for _, h := range m.live {
			if m.pages[h].pins > 0 {
				m.pages[h].pins--
				m.q.Unpin(h)
				break
			}
		}
	case op < 70:
		h := m.pick()
		m.pages[h].remote++
		m.q.ChildAdded(h, false)
	case op < 73:
		h := m.pick()
		if m.pages[h].remote > 0 {
			m.pages[h].remote--
			m.q.ChildRemoved(h, false)
		}
	case op < 75:
		m.q.SetOrphan(m.pick(), m.r.IntN(2) == 0)
	case op < 76:
		// A value hint: the best resident descendant's worth, anywhere
		// from none to far above the page's own.
		h := m.pick()
		w := 0.0
		if m.r.IntN(4) > 0 {
			w = m.q.Worth(h) * m.r.Float64() * 4
		}
		m.q.SetChildWorth(h, w)
	case op < 78:
		h := m.pick()
		m.q.Remove(h)
		m.drop(h)
	case op < 80:
		m.q.Record(m.r.Uint64() % 64)
	default:
		m.evict()
	}
}

// TestRandomWorkloads: whatever the sequence of calls, a victim is never
// pinned, never has resident local children (invariant 5), and is the
// minimum of the eligible pages.
func TestRandomWorkloads(t *testing.T) {
	seed := testSeed(t)
	for _, kind := range []Kind{KindLRU, KindLFU, KindGDSFBytes, KindCost, KindOffline} {
		t.Run(string(kind), func(t *testing.T) {
			for run := range 20 {
				r := rand.New(rand.NewPCG(seed, uint64(run)))
				m := &harness{t: t, q: mustNew(t, Config{Kind: kind, Capacity: 64}), r: r, pages: map[Handle]*mpage{}}
				for range 3000 {
					m.step()
				}
				if m.q.Len() != len(m.live) {
					t.Fatalf("run %d: queue tracks %d pages, model %d", run, m.q.Len(), len(m.live))
				}
				// Unpin everything and drain: every page must come out, children
				// before parents.
				for _, h := range m.live {
					for m.pages[h].pins > 0 {
						m.pages[h].pins--
						m.q.Unpin(h)
					}
				}
				for len(m.live) > 0 {
					before := len(m.live)
					m.evict()
					if len(m.live) == before {
						t.Fatalf("run %d: %d unpinned pages left but no victim", run, before)
					}
				}
			}
		})
	}
}

// TestPinnedNeverEvicted drives a full tier: pages are inserted until it is
// full, then each put evicts; a random subset is leased (pinned) throughout
// and must survive.
func TestPinnedNeverEvicted(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, kind := range []Kind{KindLRU, KindCost} {
		q := mustNew(t, Config{Kind: kind, CapacityBytes: 100 << 10})
		leased := map[Handle]bool{}
		var used int64
		for i := range 20000 {
			p := Page{Key: uint64(r.IntN(500)), Bytes: int64(512 + r.IntN(2048)), Depth: uint32(r.IntN(64))}
			q.Record(p.Key)
			for used+p.Bytes > 100<<10 {
				h, ok := q.Victim()
				if !ok {
					t.Fatalf("%s: full of leased pages", kind)
				}
				if leased[h] {
					t.Fatalf("%s: evicted leased page %d at put %d", kind, h, i)
				}
				used -= int64(q.ident(h).bytes)
				q.Evict(h)
			}
			h := q.Insert(p)
			used += p.Bytes
			if len(leased) < 8 && r.IntN(50) == 0 {
				leased[h] = true
				q.Pin(h)
			}
			if r.IntN(3) == 0 {
				q.Hit(h)
			}
		}
		for h := range leased {
			if q.pages[h].flags&flagLive == 0 {
				t.Fatalf("%s: leased page %d is gone", kind, h)
			}
		}
	}
}

func ExampleQueue() {
	q, _ := New(Config{Kind: KindCost})
	parent := q.Insert(Page{Key: 1, Bytes: 160 << 20, Depth: 0})
	child := q.Insert(Page{Key: 2, Bytes: 160 << 20, Depth: 1})
	q.ChildAdded(parent, true) // the child is resident on this node
	q.Hit(parent)
	q.Hit(parent)
	h, _ := q.Victim()
	fmt.Println(h == child) // the leaf goes first, however valuable its parent
	// Output: true
}
