package eviction

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDecision is the steady-state cost of one eviction decision per
// page put into a full tier: Record + Admit + Victim + Evict + Insert, with
// a parent link and a lookup hit, as the store would run them.
func BenchmarkDecision(b *testing.B) {
	for _, kind := range []Kind{KindLRU, KindCost} {
		for _, n := range []int{10_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/pages=%d", kind, n), func(b *testing.B) {
				q := mustNew(b, Config{Kind: kind, Capacity: n})
				r := rand.New(rand.NewPCG(1, 2))
				hs := make([]Handle, 0, n)
				for i := range n {
					hs = append(hs, q.Insert(Page{Key: uint64(i), Bytes: 1 << 20, Depth: uint32(i % 100)}))
				}
				b.ReportAllocs()
				b.ReportMetric(float64(StateBytes+IdentBytes), "state-B/page") // no Config.Ident
				b.ResetTimer()
				i := 0
				for b.Loop() {
					p := Page{Key: r.Uint64() % uint64(4*n), Bytes: 1 << 20, Depth: uint32(i % 100)}
					q.Record(p.Key)
					q.Hit(hs[r.IntN(len(hs))])
					q.Admit(p)
					v, ok := q.Victim()
					if !ok {
						b.Fatal("no victim")
					}
					q.Evict(v)
					h := q.Insert(p)
					hs[r.IntN(len(hs))] = h
					for j, x := range hs { // keep hs valid: replace the victim's slot
						if x == v && x != h {
							hs[j] = h
						}
						if j > 8 {
							break
						}
					}
					i++
				}
			})
		}
	}
}

// BenchmarkHit is the cost of recording a covering lookup of a resident
// page: in a tier of 100,000 pages without a capacity in bytes (no
// miniature simulations), and in a tier of 1,024 pages whose every key is
// in the sample (sampled=all: each hit is replayed in every shadow) or
// whose half-life is fixed (sampled=none).
func BenchmarkHit(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"tier=100000", Config{Kind: KindCost, Capacity: 100_000}},
		{"tier=1024/sampled=all", Config{Kind: KindCost, Capacity: 1024, CapacityBytes: 1024 << 20}},
		{"tier=1024/sampled=none", Config{Kind: KindCost, Capacity: 1024, CapacityBytes: 1024 << 20, HalfLife: 1024}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := mustNew(b, c.cfg)
			hs := make([]Handle, c.cfg.Capacity)
			for i := range hs {
				hs[i] = q.Insert(Page{Key: uint64(i), Bytes: 1 << 20, Depth: uint32(i % 100)})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q.Record(uint64(i))
				q.Hit(hs[i%len(hs)])
				i++
			}
		})
	}
}

// BenchmarkStateBytes reports the policy's memory per page: the per-page
// state and heap slot (and the pages' idents: no Config.Ident), and the
// whole queue (with history) per page.
func BenchmarkStateBytes(b *testing.B) {
	const n = 1 << 20
	q := mustNew(b, Config{Kind: KindCost, Capacity: n})
	for i := range n {
		q.Insert(Page{Key: uint64(i), Bytes: 1 << 20})
	}
	for b.Loop() {
	}
	b.ReportMetric(float64(StateBytes+IdentBytes), "state-B/page")
	b.ReportMetric(float64(StateBytes+IdentBytes)+float64(q.HistoryBytes())/n, "total-B/page")
}

// BenchmarkComputeCutoffs merges node summaries into a cutoff.
func BenchmarkComputeCutoffs(b *testing.B) {
	for _, n := range []int{3, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			sums := make([]Summary, n)
			caps := make([]int64, n)
			for i := range sums {
				sums[i].Lo = int16(40 + r.IntN(8))
				for j := range sums[i].Bytes {
					sums[i].Bytes[j] = r.Int64N(1 << 34)
				}
				caps[i] = sums[i].Total() * 9 / 10
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ComputeCutoffs(sums, caps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCoordinatorRound is one coordinator round: decode every node's
// gossiped Summary and merge them into Cutoffs.
func BenchmarkCoordinatorRound(b *testing.B) {
	for _, n := range []int{3, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(5, 6))
			enc := make([][]byte, n)
			caps := make([]int64, n)
			for i := range enc {
				s := Summary{Turnover: r.Float64(), Lo: int16(40 + r.IntN(8))}
				for j := range s.Bytes {
					s.Bytes[j] = r.Int64N(1 << 34)
				}
				caps[i] = s.Total() * 9 / 10
				var err error
				if enc[i], err = s.MarshalBinary(); err != nil {
					b.Fatal(err)
				}
			}
			sums := make([]Summary, n)
			b.ReportAllocs()
			for b.Loop() {
				for i := range enc {
					if err := sums[i].UnmarshalBinary(enc[i]); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := ComputeCutoffs(sums, caps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChildWorth is the cost of applying one value hint
// (SetChildWorth) and reading a page's Worth to pass on.
func BenchmarkChildWorth(b *testing.B) {
	const n = 100_000
	q := mustNew(b, Config{Kind: KindCost, Capacity: n})
	hs := make([]Handle, n)
	for i := range hs {
		hs[i] = q.Insert(Page{Key: uint64(i), Bytes: 1 << 20, Depth: uint32(i % 100)})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h := hs[i%n]
		q.SetChildWorth(h, q.Worth(hs[(i+1)%n])*float64(i&3))
		i++
	}
}

// BenchmarkSummarize is the O(pages) scan behind a node's Summary.
func BenchmarkSummarize(b *testing.B) {
	const n = 1_000_000
	q := mustNew(b, Config{Kind: KindCost, Capacity: n})
	for i := range n {
		q.Insert(Page{Key: uint64(i), Bytes: 1 << 20, Depth: uint32(i % 300)})
	}
	var s Summary
	b.ReportAllocs()
	for b.Loop() {
		q.Summarize(&s)
	}
}

// BenchmarkSummaryEncode is the gossip encoding.
func BenchmarkSummaryEncode(b *testing.B) {
	s := Summary{Turnover: 0.01, Lo: 40}
	for i := range s.Bytes {
		s.Bytes[i] = int64(i) << 30
	}
	buf := make([]byte, 0, SummarySize)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = s.AppendBinary(buf[:0])
	}
}

// BenchmarkRecord is the cost of recording a 1,000-key lookup in the
// frequency history of a tier of 1M pages (a 16 MiB history), key by key
// and with RecordAll.
func BenchmarkRecord(b *testing.B) {
	q := mustNew(b, Config{Kind: KindCost, Capacity: 1_000_000})
	r := rand.New(rand.NewPCG(5, 6))
	keys := make([]uint64, 1000)
	for _, all := range []bool{false, true} {
		b.Run(fmt.Sprintf("all=%v", all), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := range keys {
					keys[i] = r.Uint64()
				}
				if all {
					q.RecordAll(keys)
					continue
				}
				for _, k := range keys {
					q.Record(k)
				}
			}
		})
	}
}

// BenchmarkSwitch is the cost of a switch of the chosen half-life
// (Queue.setHalfLife: every page restated with its heap slot, the heap
// rebuilt) in a tier of a million pages, alternately to a longer and a
// shorter one: a pause of the store's lock, once per switch.
func BenchmarkSwitch(b *testing.B) {
	const pages = 1 << 20
	q := mustNew(b, Config{Kind: KindCost, Capacity: pages, History: -1, Static: true})
	for i := range pages {
		q.Insert(Page{Key: uint64(i), Bytes: 1 << 20, Depth: uint32(i % 100)})
	}
	hl := []float64{pages / 4, 8 * pages}
	i := 0
	for b.Loop() {
		q.setHalfLife(hl[i%2])
		i++
	}
}
