package eviction

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestSummaryRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		var s Summary
		s.Turnover = r.Float64()
		s.Lo = int16(r.IntN(200) - 100)
		for i := range s.Bytes {
			if r.IntN(3) == 0 {
				s.Bytes[i] = r.Int64N(1 << uint(r.IntN(50)))
			}
		}
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != SummarySize || SummarySize >= 400 {
			t.Fatalf("encoded %d bytes (SummarySize %d), want < 400", len(b), SummarySize)
		}
		var got Summary
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if got.Turnover != s.Turnover || got.Lo != s.Lo {
			t.Fatalf("header %v/%d, want %v/%d", got.Turnover, got.Lo, s.Turnover, s.Lo)
		}
		var top int64
		for _, v := range s.Bytes {
			top = max(top, v)
		}
		unit := max(1, (top+math.MaxUint16-1)/math.MaxUint16) * 2 // rounding slack
		for i := range s.Bytes {
			if d := got.Bytes[i] - s.Bytes[i]; d < 0 || d > unit || (s.Bytes[i] > 0) != (got.Bytes[i] > 0) {
				t.Fatalf("bucket %d: %d, want %d (unit %d)", i, got.Bytes[i], s.Bytes[i], unit)
			}
		}
	}
}

func TestSummaryDecodeErrors(t *testing.T) {
	var s Summary
	good, _ := (&Summary{Turnover: 1}).MarshalBinary()
	for name, b := range map[string][]byte{
		"empty":   nil,
		"short":   good[:SummarySize-1],
		"long":    append(append([]byte{}, good...), 0),
		"version": append([]byte{9}, good[1:]...),
		"shift":   func() []byte { b := append([]byte{}, good...); b[11] = 60; return b }(),
		"nan": func() []byte {
			b := append([]byte{}, good...)
			copy(b[3:11], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
			return b
		}(),
	} {
		if err := s.UnmarshalBinary(b); !errors.Is(err, ErrBadSummary) {
			t.Errorf("%s: err = %v, want ErrBadSummary", name, err)
		}
	}
	bad := Summary{}
	bad.Bytes[3] = -1
	if _, err := bad.MarshalBinary(); !errors.Is(err, ErrBadSummary) {
		t.Errorf("negative bucket: err = %v", err)
	}
	if _, err := (&Summary{Turnover: math.NaN()}).MarshalBinary(); !errors.Is(err, ErrBadSummary) {
		t.Errorf("NaN turnover: err = %v", err)
	}
}

func FuzzSummary(f *testing.F) {
	good, _ := (&Summary{Turnover: 3, Lo: 40, Bytes: [SummaryBuckets]int64{5: 1 << 30}}).MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Summary
		if err := s.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded summary does not encode: %v", err)
		}
		var s2 Summary
		if err := s2.UnmarshalBinary(again); err != nil || s2.Turnover != s.Turnover || s2.Lo != s.Lo || s2 != s {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

func TestSummarize(t *testing.T) {
	q := mustNew(t, Config{Kind: KindCost, History: -1})
	var want int64
	for d := range uint32(50) {
		h := q.Insert(page(d))
		for range d % 7 {
			q.Hit(h)
		}
		want += page(d).Bytes
	}
	var s Summary
	q.Summarize(&s)
	if s.Total() != want {
		t.Fatalf("summarised %d bytes, want %d", s.Total(), want)
	}
	if s.Bytes[SummaryBuckets-1] == 0 {
		t.Fatal("the most valuable page is not in the top bucket")
	}
	// The least valuable page (depth 0, no hits) lands in its bucket.
	low := q.WorthOf(page(0))
	if b := bucketOf(low, s.Lo); s.Bytes[b] == 0 {
		t.Fatalf("bucket %d of the cheapest worth %g is empty", b, low)
	}
}

func TestQuarterLog2(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		x := math.Exp2(r.Float64()*200 - 100)
		want := int(math.Floor(4 * math.Log2(x)))
		if got := quarterLog2(x); got != want && math.Abs(4*math.Log2(x)-math.Round(4*math.Log2(x))) > 1e-9 {
			t.Fatalf("quarterLog2(%g) = %d, want %d", x, got, want)
		}
	}
	for _, c := range []struct {
		x    float64
		want int
	}{{1, 0}, {2, 4}, {0.5, -4}, {1.2, 1}, {1.5, 2}, {1.7, 3}, {1.99, 3}} {
		if got := quarterLog2(c.x); got != c.want {
			t.Errorf("quarterLog2(%g) = %d, want %d", c.x, got, c.want)
		}
	}
}

// TestSummarizeSampled: past summarySample pages Summarize reads a sample;
// its total and its cumulative shares, what the cutoff reads, stay close to
// the whole queue's.
func TestSummarizeSampled(t *testing.T) {
	const n = 8 * summarySample
	q := mustNew(t, Config{Kind: KindCost, Capacity: n, History: -1})
	hs := make([]Handle, n)
	for i := range hs {
		hs[i] = q.Insert(Page{Key: uint64(i), Bytes: 1<<16 + int64(i%7)<<12, Depth: uint32(i % 97)})
	}
	for i := range 3 * n { // uneven reuse
		q.Hit(hs[(i*i+7*i)%n])
	}
	var got, exact Summary
	q.Summarize(&got)
	exact.Lo = got.Lo
	for i := 1; i < len(q.pages); i++ {
		if s := &q.pages[i]; s.flags&flagLive != 0 {
			exact.Bytes[bucketOf(q.worth(s), exact.Lo)] += int64(q.ident(Handle(i)).bytes)
		}
	}
	if d := math.Abs(float64(got.Total()-exact.Total())) / float64(exact.Total()); d > 0.001 {
		t.Fatalf("sampled total %d, exact %d", got.Total(), exact.Total())
	}
	var cg, ce int64
	for b := range SummaryBuckets {
		cg += got.Bytes[b]
		ce += exact.Bytes[b]
		if d := math.Abs(float64(cg-ce)) / float64(exact.Total()); d > 0.01 {
			t.Fatalf("bucket %d: sampled cumulative share %.4f, exact %.4f", b,
				float64(cg)/float64(got.Total()), float64(ce)/float64(exact.Total()))
		}
	}
}

// TestSummaryFixedSize: a tier's summary encodes in SummarySize bytes
// whatever its history (gossip metadata has a fixed budget, issue 45): a
// queue that has held pages of every size and depth, hit unevenly and
// emptied and refilled, and summaries at the extremes of every field.
func TestSummaryFixedSize(t *testing.T) {
	q := mustNew(t, Config{Kind: KindCost, History: -1})
	r := rand.New(rand.NewPCG(45, 2))
	var hs []Handle
	for round := range 6 {
		for i := range 2000 {
			p := Page{Key: uint64(round*2000 + i), Bytes: 1 << r.IntN(40), Depth: uint32(r.IntN(1 << 12))}
			h := q.Insert(p)
			for range r.IntN(20) {
				q.Hit(h)
			}
			hs = append(hs, h)
		}
		if round%2 == 1 { // empty it
			for _, h := range hs {
				q.Remove(h)
			}
			hs = hs[:0]
		}
		var s Summary
		s.Turnover = r.Float64() * 1e6
		q.Summarize(&s)
		if b, err := s.MarshalBinary(); err != nil || len(b) != SummarySize {
			t.Fatalf("round %d: %d bytes (%v), want %d", round, len(b), err, SummarySize)
		}
	}
	for _, s := range []Summary{
		{},
		{Lo: math.MinInt16, Turnover: math.MaxFloat64},
		{Lo: math.MaxInt16, Bytes: [SummaryBuckets]int64{0: math.MaxInt64, SummaryBuckets - 1: math.MaxInt64}},
	} {
		if b, err := s.MarshalBinary(); err != nil || len(b) != SummarySize {
			t.Fatalf("%+v: %d bytes (%v), want %d", s, len(b), err, SummarySize)
		}
	}
}
