package store

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// nullTier hands out extents that hold no bytes, so that a benchmark
// measures the index alone. Reads return zeros.
type nullTier struct{ next atomic.Int64 }

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
func (n *nullTier) Free(tiers.Extent)  {}
func (n *nullTier) Stats() tiers.Stats { return tiers.Stats{Kind: tiers.KindHost} }
func (n *nullTier) Close() error       { return nil }
func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func fill(b *testing.B, s *Store, n int, size int64) []namespace.Key {
	b.Helper()
	page := make([]byte, size)
	zero := testNS.Checksum.Sum(page)
	keys := make([]namespace.Key, n)
	prev := namespace.Key(testNS.ID)
	specs := make([]PageSpec, 0, 1024)
	for i := range keys {
		keys[i] = namespace.NextKey(prev, []uint32{uint32(i)})
		specs = append(specs, PageSpec{Key: keys[i], Parent: prev, HasParent: i > 0, Depth: uint32(i), Size: size})
		prev = keys[i]
		if len(specs) == cap(specs) || i == n-1 {
			res, err := s.Reserve(testNS.ID, specs, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if err := s.Write(testNS.ID, r.WriteID, 0, page); err != nil {
					b.Fatal(err)
				}
				if st, _ := s.Commit(testNS.ID, r.WriteID, size, zero); st != CommitCommitted {
					b.Fatalf("commit: %v", st)
				}
			}
			specs = specs[:0]
		}
	}
	return keys
}

// BenchmarkIndexBytesPerPage reports the heap the index spends per
// published page (key, parent, extent, checksum, recency, map overhead).
func BenchmarkIndexBytesPerPage(b *testing.B) {
	const pages = 200_000
	for range b.N {
		before := heapBytes()
		s, err := New(Config{Tiers: []tiers.Tier{&nullTier{}}, RecentOutcomes: 16})
		if err != nil {
			b.Fatal(err)
		}
		ns := testNS
		if err := s.AddNamespace(ns); err != nil {
			b.Fatal(err)
		}
		fill(b, s, pages, pageSize)
		after := heapBytes()
		b.ReportMetric(float64(after-before)/pages, "index-bytes/page")
		runtime.KeepAlive(s)
		s.Close()
	}
}

// BenchmarkLookup1000 looks up a 1,000-key prompt that is fully present,
// with and without a lease.
func BenchmarkLookup1000(b *testing.B) {
	for _, lease := range []bool{false, true} {
		b.Run("lease="+strconv.FormatBool(lease), func(b *testing.B) {
			s, err := New(Config{Tiers: []tiers.Tier{&nullTier{}}, MaxLeasesPerTenant: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.AddNamespace(testNS)
			keys := fill(b, s, 1000, pageSize)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				res, err := s.Lookup(testNS.ID, keys, lease, 0)
				if err != nil || res.HitPrefix != 1000 {
					b.Fatal(err, res.HitPrefix)
				}
				if res.Lease != nil {
					s.ReleaseLease(testNS.ID, res.Lease.ID)
				}
			}
		})
	}
}
