package store

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// nullTier hands out extents that hold no bytes, so that a benchmark
// measures the index alone. Reads return zeros. It reports capacity as
// its size (0: unknown), so that the eviction queues size their state for
// it as for a real tier of that size; it never runs out.
type nullTier struct {
	next     atomic.Int64
	capacity int64
}

func (n *nullTier) Kind() tiers.Kind { return tiers.KindHost }
func (n *nullTier) Alloc(size int64) (tiers.Extent, error) {
	off := n.next.Add(size)
	return tiers.Extent{Off: off, Len: size, Cap: size, Gen: uint64(off)}, nil
}
func (n *nullTier) WriteAt(tiers.Extent, []byte, int64) error { return nil }
func (n *nullTier) ReadAt(_ tiers.Extent, p []byte, _ int64) error {
	clear(p)
	return nil
}
func (n *nullTier) Free(tiers.Extent) {}
func (n *nullTier) Stats() tiers.Stats {
	return tiers.Stats{Kind: tiers.KindHost, Capacity: n.capacity}
}
func (n *nullTier) Close() error { return nil }
func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func fill(b *testing.B, s *Store, n int, size int64) []namespace.Key {
	b.Helper()
	return fillEvery(b, s, n, size, 1)
}

// fillEvery publishes n pages of one chain, every every-th page of it (the
// rest left to other nodes: with every > 1 no page's parent is here), and
// returns their keys. With every 0 they are n pages without parents.
func fillEvery(b *testing.B, s *Store, n int, size int64, every int) []namespace.Key {
	b.Helper()
	page := make([]byte, size)
	zero := testNS.Checksum.Sum(page)
	keys := make([]namespace.Key, n)
	prev := namespace.Key(testNS.ID)
	specs := make([]PageSpec, 0, 1024)
	chain := every > 0
	every = max(every, 1)
	for i, d := 0, 0; i < n; d++ {
		k := namespace.NextKey(prev, []uint32{uint32(d)})
		if d%every != every-1 {
			prev = k
			continue
		}
		keys[i] = k
		specs = append(specs, PageSpec{Key: keys[i], Parent: prev, HasParent: chain && d > 0, Depth: uint32(d), Size: size})
		prev = keys[i]
		if i++; len(specs) == cap(specs) || i == n {
			res, err := s.Publisher().Reserve(testNS.ID, specs, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if err := s.Publisher().Write(testNS.ID, r.WriteID, 0, page); err != nil {
					b.Fatal(err)
				}
				if st, _ := s.Publisher().Commit(testNS.ID, r.WriteID, size, zero); st != CommitCommitted {
					b.Fatalf("commit: %v", st)
				}
			}
			specs = specs[:0]
		}
	}
	return keys
}

// BenchmarkIndexBytesPerPage reports the heap a store spends per
// published page at 1M pages (docs/design.md §4.2: the budget is ~128 bytes): the
// live heap after a collection, with the store full, less the heap before
// it was made. That counts everything kept per page: the entries, the
// index tables, the eviction queue's state and heap, the handle-to-entry
// table, and the queue's frequency history, ghost list and miniature
// simulations, sized (as for a real tier) for a tier that holds exactly
// these pages.
//
// It also breaks the figure down, from the structures' sizes: entry-B
// (an entry's size, a Go size class), table-B (the shards' index tables),
// waiters-B (kids.go), owner-B (the handle-to-entry tables), history-B
// (the queues' frequency histories), ghosts-B (the queues' ghost lists of
// departed keys, adapt.go), sample-B (the queues' miniature simulations,
// eviction/mini.go: shadow queues over a sample of the keys) and queue-B,
// the rest: the queues' state and heap.
func BenchmarkIndexBytesPerPage(b *testing.B) { indexBytes(b, 1) }

// BenchmarkIndexBytesRemoteParents is BenchmarkIndexBytesPerPage for a
// node that holds every other page of a chain (a cluster's placement puts
// the rest elsewhere): no page's parent is resident, so each has a waiter
// for its parent key (kids.go).
func BenchmarkIndexBytesRemoteParents(b *testing.B) { indexBytes(b, 2) }

// BenchmarkIndexBytesLeaves is BenchmarkIndexBytesPerPage for pages without
// parents: every page is a leaf, which the queues' heaps hold.
func BenchmarkIndexBytesLeaves(b *testing.B) { indexBytes(b, 0) }

// indexBytes reports the heap per page of a store that holds 1M pages,
// every every-th of one chain, or (every 0) without parents (fillEvery).
func indexBytes(b *testing.B, every int) {
	const pages = 1_000_000
	for range b.N {
		before := heapBytes()
		s, err := New(Config{Tiers: []tiers.Tier{&nullTier{capacity: pages * pageSize}}, RecentOutcomes: 16})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.AddNamespace(testNS); err != nil {
			b.Fatal(err)
		}
		fillEvery(b, s, pages, pageSize, every)
		after := heapBytes()
		total := float64(after - before)
		b.ReportMetric(total/pages, "index-bytes/page")
		parts := indexParts(s)
		for _, p := range parts {
			b.ReportMetric(p.bytes/pages, p.name)
			total -= p.bytes
		}
		b.ReportMetric(total/pages, "queue-B/page")
		runtime.KeepAlive(s)
		s.Close()
	}
}

// indexParts is what s's index structures take (indexBytes).
func indexParts(s *Store) []struct {
	name  string
	bytes float64
} {
	var entries, tables, waiting, owner, history, ghosts, sample int
	s.lock()
	defer s.unlock()
	s.nsMu.RLock()
	defer s.nsMu.RUnlock()
	for _, n := range s.ns {
		entries += int(n.pages.Load()) * int(unsafe.Sizeof(entry{}))
		for i := range n.shards {
			m := &n.shards[i].m
			tables += cap(m.slots)*int(unsafe.Sizeof(m.slots[0])) + cap(m.tags)
		}
		ws := &n.waiting
		waiting += cap(ws.slab)*int(unsafe.Sizeof(waiter{})) + 4*(cap(ws.slots)+cap(ws.free))
	}
	for t, q := range s.policy.pol {
		owner += cap(s.policy.owner[t]) * int(unsafe.Sizeof(s.policy.owner[t][0]))
		history += q.HistoryBytes()
		ghosts += q.GhostBytes()
		sample += q.SampleBytes()
	}
	return []struct {
		name  string
		bytes float64
	}{{"entry-B/page", float64(entries)}, {"table-B/page", float64(tables)}, {"waiters-B/page", float64(waiting)},
		{"owner-B/page", float64(owner)}, {"history-B/page", float64(history)}, {"ghosts-B/page", float64(ghosts)},
		{"sample-B/page", float64(sample)}}
}

// BenchmarkPublish publishes pages of one chain (Reserve, Write and Commit
// in batches of 1,024, as fill does) into a store sized for 1M pages: each
// page's parent resident (parents=here) or, every other page being left to
// other nodes, none (parents=elsewhere: each page makes a waiter).
func BenchmarkPublish(b *testing.B) {
	for _, c := range []struct {
		name  string
		every int
	}{{"here", 1}, {"elsewhere", 2}} {
		b.Run("parents="+c.name, func(b *testing.B) {
			s, err := New(Config{Tiers: []tiers.Tier{&nullTier{capacity: 1 << 20 * pageSize}}, RecentOutcomes: 16})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.AddNamespace(testNS); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			fillEvery(b, s, b.N, pageSize, c.every)
		})
	}
}

// BenchmarkLookup1000 looks up a 1,000-key prompt that is fully present,
// with and without a lease. shed/op is the share of lookups that shed
// their bookkeeping (hitlog.go): lookups one after another may spend the
// bookkeeping's budget.
func BenchmarkLookup1000(b *testing.B) {
	for _, lease := range []bool{false, true} {
		b.Run("lease="+strconv.FormatBool(lease), func(b *testing.B) {
			s, err := New(Config{Tiers: []tiers.Tier{&nullTier{capacity: 1 << 20 * pageSize}}, MaxLeasesPerTenant: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.AddNamespace(testNS)
			keys := fill(b, s, 1000, pageSize)
			b.ReportAllocs()
			shed := s.Admin().LookupsShed()
			b.ResetTimer()
			for range b.N {
				res, err := s.Reader().Lookup(testNS.ID, keys, lease, 0)
				if err != nil || res.HitPrefix != 1000 {
					b.Fatal(err, res.HitPrefix)
				}
				if res.Lease != nil {
					s.Reader().ReleaseLease(testNS.ID, res.Lease.ID)
				}
			}
			b.ReportMetric(float64(s.Admin().LookupsShed()-shed)/float64(b.N), "shed/op")
		})
	}
}

// BenchmarkLookup1000Parallel looks up fully present 1,000-key prompts
// from 8 goroutines at once (a node serving 8 engine workers), without a
// lease, in a store sized for 1M pages (so that the eviction queues'
// state is as large as a real tier's): where the lookups contend inside
// the store. Besides ns/op (wall time over lookups) it reports the
// process's CPU time per lookup, the share of lookups that shed their
// bookkeeping and the 99th percentile of one lookup's latency.
func BenchmarkLookup1000Parallel(b *testing.B) {
	const prompts, workers = 16, 8
	s, err := New(Config{Tiers: []tiers.Tier{&nullTier{capacity: 1 << 20 * pageSize}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.AddNamespace(testNS)
	keys := fill(b, s, prompts*1000, pageSize)
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
	)
	b.ReportAllocs()
	b.SetParallelism((workers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	cpu0, shed := cpuTime(b), s.Admin().LookupsShed()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			p := int(next.Add(1) % prompts)
			t0 := time.Now()
			res, err := s.Reader().Lookup(testNS.ID, keys[p*1000:(p+1)*1000], false, 0)
			mine = append(mine, time.Since(t0))
			if err != nil || res.HitPrefix != 1000 {
				b.Error(err, res.HitPrefix)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(s.Admin().LookupsShed()-shed)/float64(b.N), "shed/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
