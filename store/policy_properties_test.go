package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// The property test (issue 5): random puts of branching chains, lookups
// with and without leases, releases, deletes and lease expiries over two
// tiers with the mover running. Checked throughout: a page under a live
// lease always reads back byte-exact (never evicted or moved away), and no
// page is dropped while it has resident children on the node. At the end,
// every parent's children counts match the pages actually resident.
func TestEvictionProperties(t *testing.T) {
	for _, kind := range []eviction.Kind{eviction.KindCost, eviction.KindLRU, eviction.KindGDSFBytes} {
		t.Run(string(kind), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
			fast, slow := newMemTier(12*pageSize), &kindTier{memTier: newMemTier(20 * pageSize), kind: tiers.KindSSD}
			s := openStore(t, Config{Tiers: []tiers.Tier{fast, slow}, Eviction: kind, JanitorInterval: 5 * time.Millisecond,
				DefaultLeaseTTL: 50 * time.Millisecond, OrphanGrace: -1}, testNS)
			checkProperties(t, s, rng, 2000)
		})
	}
}

func checkProperties(t *testing.T, s *Store, rng *rand.Rand, ops int) {
	// Sequences: 12 roots, each extended by branches: a page's key is its
	// chain name and depth, so branches share prefixes.
	type page struct {
		spec PageSpec
		data []byte
	}
	pages := map[namespace.Key]page{}
	chain := func(root, branch, depth int) []PageSpec {
		specs := make([]PageSpec, depth)
		for i := range specs {
			var k namespace.Key
			b := 0
			if i >= 2 { // branches fork after two shared pages
				b = branch
			}
			copy(k[:], fmt.Sprintf("r%02d-b%d-d%02d", root, b, i))
			specs[i] = PageSpec{Key: k, Depth: uint32(i), Size: pageSize}
			if i > 0 {
				specs[i].Parent, specs[i].HasParent = specs[i-1].Key, true
			}
			if _, ok := pages[k]; !ok {
				d := make([]byte, pageSize)
				for j := range d {
					d[j] = byte(rng.Uint32())
				}
				pages[k] = page{spec: specs[i], data: d}
			}
		}
		return specs
	}
	var violation error
	s.lock()
	s.policy.observeDrop = func(e *entry) {
		for i := range e.ns.shards {
			for c := range e.ns.shards[i].m.all() {
				if parent, ok := s.parentKeyLocked(c); ok && parent == e.key && !c.dead && violation == nil {
					violation = fmt.Errorf("dropped %s while its child %s is resident (tier %d)", e.key, c.key, c.tier)
				}
			}
		}
		if e.pins > 0 && violation == nil {
			violation = fmt.Errorf("dropped pinned page %s", e.key)
		}
	}
	s.unlock()

	type held struct {
		id      uint64
		keys    []namespace.Key
		expires time.Time
	}
	var leases []held
	for op := range ops {
		specs := chain(rng.IntN(12), rng.IntN(3), 1+rng.IntN(6))
		switch r := rng.IntN(11); {
		case r < 5: // put a sequence (as a client would: the pages in order)
			for _, p := range specs {
				res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{p}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if res[0].Status != Reserved {
					continue
				}
				data := pages[p.Key].data
				if err := s.Publisher().Write(testNS.ID, res[0].WriteID, 0, data); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Publisher().Commit(testNS.ID, res[0].WriteID, pageSize, testNS.Checksum.Sum(data)); err != nil {
					t.Fatal(err)
				}
			}
		case r < 8: // look up, maybe leasing the hit prefix
			keys := make([]namespace.Key, len(specs))
			for i, p := range specs {
				keys[i] = p.Key
			}
			withLease := rng.IntN(2) == 0
			res, err := s.Reader().Lookup(testNS.ID, keys, withLease, 0)
			if errors.Is(err, ErrLeaseLimit) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Lease != nil {
				leases = append(leases, held{id: res.Lease.ID, keys: keys[:res.HitPrefix], expires: res.Lease.Expires})
			}
		case r < 9 && len(leases) > 0: // release one
			i := rng.IntN(len(leases))
			_ = s.Reader().ReleaseLease(testNS.ID, leases[i].id)
			leases = append(leases[:i], leases[i+1:]...)
		case r < 10: // delete a page
			p := specs[rng.IntN(len(specs))]
			if _, err := s.Publisher().Delete(testNS.ID, []namespace.Key{p.Key}); err != nil {
				t.Fatal(err)
			}
		default: // orphans: a parent gone elsewhere, or pages past a miss
			i := rng.IntN(len(specs))
			var err error
			if rng.IntN(2) == 0 {
				_, _, err = s.Evictor().ParentsGone(testNS.ID, []namespace.Key{specs[i].Key})
			} else {
				keys := make([]namespace.Key, 0, len(specs))
				for _, p := range specs[i:] {
					keys = append(keys, p.Key)
				}
				_, err = s.Reader().MarkOrphans(testNS.ID, keys)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		// Every live lease still reads its pages byte-exact (a deleted
		// page reads as a miss: Delete is not eviction).
		kept := leases[:0]
		for _, l := range leases {
			if time.Until(l.expires) < 10*time.Millisecond {
				continue // about to expire: no longer protected
			}
			err := s.Reader().Read(testNS.ID, l.id, l.keys, func(i int, v PageView) error {
				if v.Found && !bytes.Equal(v.Data, pages[l.keys[i]].data) {
					return fmt.Errorf("leased page %s reads wrong bytes", l.keys[i])
				}
				if !v.Found && !deletedOrNever(s, l.keys[i]) {
					return fmt.Errorf("leased page %s gone", l.keys[i])
				}
				return nil
			})
			if errors.Is(err, ErrLeaseExpired) {
				continue
			}
			if err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
			kept = append(kept, l)
		}
		leases = kept
		s.lock()
		v := violation
		s.unlock()
		if v != nil {
			t.Fatalf("op %d: %v", op, v)
		}
		if op%25 == 0 {
			checkChildCounts(t, s)
			if t.Failed() {
				t.Fatalf("op %d: counts or lists wrong", op)
			}
		}
	}
	checkChildCounts(t, s)
	st := s.Admin().Stats()
	ns, _ := s.Admin().NamespaceStats(testNS.ID)
	t.Logf("%d ops: %d evictions, %d demotions, %d orphans dropped, %d pages resident", ops, st.Evictions, st.Demotions,
		ns.Orphaned, st.Pages)
	if st.Evictions == 0 || st.Demotions == 0 {
		t.Fatalf("the workload never filled the tiers: %+v", st)
	}
}

// deletedOrNever reports whether k is absent from the index: a leased page
// that Delete removed reads as a miss, which the property allows.
func deletedOrNever(s *Store, k namespace.Key) bool {
	n, _ := s.namespace(testNS.ID)
	e := n.shard(k).get(k)
	return e == nil || e.dead
}
