package coord

import (
	"errors"
	"math"
	"testing"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/membership"
)

func summary(turnover float64, lo int16, bytesAt map[int]int64) eviction.Summary {
	s := eviction.Summary{Turnover: turnover, Lo: lo}
	for b, n := range bytesAt {
		s.Bytes[b] = n
	}
	return s
}

func TestSummariesRoundTrip(t *testing.T) {
	sums := []eviction.Summary{
		summary(0.5, -10, map[int]int64{0: 4096, 63: 1 << 20}),
		summary(0, 3, map[int]int64{10: 1 << 30}),
		summary(2, 0, nil),
	}
	b, n, err := EncodeSummaries(sums, 1000)
	if err != nil || n != 3 || len(b) != 1+3*frameSize {
		t.Fatalf("EncodeSummaries = %d bytes, %d tiers, %v", len(b), n, err)
	}
	got, err := DecodeSummaries(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sums {
		g, ok := got[i]
		if !ok || g.Turnover != s.Turnover || g.Lo != s.Lo || g.Bytes != s.Bytes {
			t.Fatalf("tier %d: %+v, want %+v", i, g, s)
		}
	}
}

// TestSummariesFitGossip pins the claim of the framing comment: a node with
// a loopback address and three tiers gossips all three summaries, and a
// smaller budget sends the fastest tiers that fit.
func TestSummariesFitGossip(t *testing.T) {
	m := membership.Meta{GRPCAddress: "127.0.0.1:65535", Tiers: []membership.TierMeta{
		{Kind: "gpu", Capacity: 80 << 30, Used: 80 << 30},
		{Kind: "host", Capacity: 1 << 40, Used: 1 << 40},
		{Kind: "ssd", Capacity: 1 << 44, Used: 1 << 44},
	}}
	budget := membership.SummaryBudget(m)
	sums := make([]eviction.Summary, 3)
	b, n, err := EncodeSummaries(sums, budget)
	if err != nil || n != 3 || len(b) > budget {
		t.Fatalf("budget %d: %d bytes, %d tiers, %v; want all 3 tiers", budget, len(b), n, err)
	}
	t.Logf("metadata budget %d bytes, three summaries take %d", budget, len(b))
	for _, c := range []struct{ budget, want int }{{0, 0}, {frameSize, 0}, {1 + frameSize, 1}, {1 + 2*frameSize + 5, 2}} {
		b, n, err := EncodeSummaries(sums, c.budget)
		if err != nil || n != c.want || len(b) > c.budget {
			t.Fatalf("budget %d: %d bytes, %d tiers, %v; want %d tiers", c.budget, len(b), n, err, c.want)
		}
		got, err := DecodeSummaries(b)
		if err != nil || len(got) != c.want {
			t.Fatalf("budget %d: decoded %d tiers, %v", c.budget, len(got), err)
		}
	}
}

func TestDecodeSummariesErrors(t *testing.T) {
	good, _, _ := EncodeSummaries([]eviction.Summary{{}, {}}, 1000)
	dup := append([]byte{}, good...)
	dup[1+frameSize] = 0
	for name, b := range map[string][]byte{
		"version":   append([]byte{9}, good[1:]...),
		"truncated": good[:len(good)-1],
		"duplicate": dup,
		"summary":   func() []byte { b := append([]byte{}, good...); b[2] = 7; return b }(),
	} {
		if _, err := DecodeSummaries(b); !errors.Is(err, ErrBadFraming) {
			t.Errorf("%s: %v, want ErrBadFraming", name, err)
		}
	}
}

func FuzzDecodeSummaries(f *testing.F) {
	good, _, _ := EncodeSummaries([]eviction.Summary{summary(1, 2, map[int]int64{5: 99})}, 1000)
	f.Add(good)
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeSummaries(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to a decodable framing of the same tiers.
		sums := make([]eviction.Summary, 0, len(got))
		for i := range len(got) {
			s, ok := got[i]
			if !ok {
				return // tier indexes need not be dense
			}
			sums = append(sums, s)
		}
		re, n, err := EncodeSummaries(sums, 1<<16)
		if err != nil || n != len(sums) {
			t.Fatalf("re-encoding %d tiers: %d, %v", len(sums), n, err)
		}
		if _, err := DecodeSummaries(re); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCompute(t *testing.T) {
	enc := func(sums ...eviction.Summary) []byte {
		b, _, err := EncodeSummaries(sums, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	host := func(c int64) membership.TierMeta { return membership.TierMeta{Kind: "host", Capacity: c} }
	ssd := func(c int64) membership.TierMeta { return membership.TierMeta{Kind: "ssd", Capacity: c} }
	// Node a holds 100 bytes at bucket 40 and 100 at bucket 20 of host;
	// node b 100 at bucket 30. Capacity 200 keeps buckets 40 and 30.
	members := []membership.Member{
		{NodeID: "a", Meta: membership.Meta{Tiers: []membership.TierMeta{host(100), ssd(1000)},
			Summary: enc(summary(2, 0, map[int]int64{40: 100, 20: 100}), summary(0, 0, map[int]int64{1: 10}))}},
		{NodeID: "b", Meta: membership.Meta{Tiers: []membership.TierMeta{ssd(5), host(100)},
			Summary: enc(summary(0, 0, nil), summary(1, 0, map[int]int64{30: 100}))}},
		{NodeID: "c", Meta: membership.Meta{Tiers: []membership.TierMeta{host(1 << 30)}}},                     // no summary
		{NodeID: "d", Meta: membership.Meta{Tiers: []membership.TierMeta{host(1 << 30)}, Summary: []byte{7}}}, // bad one
	}
	got, err := Compute(members, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != "host" || got[1].Kind != "ssd" {
		t.Fatalf("Compute = %+v, want host then ssd", got)
	}
	h := got[0]
	if h.Nodes != 2 || !(h.Worth > 0) {
		t.Fatalf("host cutoff %+v, want a limit from 2 nodes", h)
	}
	// The cutoff lies between buckets 20 and 30: above everything of
	// bucket 20 (worth < 2^(21/4)) and at most bucket 30's lower edge.
	lo, hi := pow2q(21), pow2q(30)
	if h.Worth < lo || h.Worth > hi {
		t.Fatalf("host cutoff %v not in [%v, %v]", h.Worth, lo, hi)
	}
	if h.Pressure["a"] <= h.Pressure["b"] {
		t.Fatalf("pressure %v: a turns over twice as fast as b", h.Pressure)
	}
	if s := got[1]; s.Worth != 0 || s.Nodes != 2 {
		t.Fatalf("ssd cutoff %+v, want none (room for everything)", s)
	}
}

// pow2q is 2^(q/4), the lower edge of bucket q at scale 0.
func pow2q(q int) float64 {
	v := 1.0
	for range q {
		v *= 1.189207115002721
	}
	return v
}

// TestEncodedSizeFixed: the framing's size depends on the number of tiers
// alone, never on what the summaries hold (gossip metadata has a fixed
// budget, issue 45), and stays within one member's metadata.
func TestEncodedSizeFixed(t *testing.T) {
	full := eviction.Summary{Turnover: 1e9, Lo: -32768}
	for i := range full.Bytes {
		full.Bytes[i] = math.MaxInt64 >> 1
	}
	for tiers := 1; tiers <= 3; tiers++ {
		for _, s := range []eviction.Summary{{}, full} {
			sums := make([]eviction.Summary, tiers)
			for i := range sums {
				sums[i] = s
			}
			b, n, err := EncodeSummaries(sums, membership.MaxMetaSize)
			if err != nil || n != tiers || len(b) != 1+tiers*frameSize || len(b) > membership.MaxMetaSize {
				t.Fatalf("%d tiers: %d bytes, %d tiers encoded (%v); want %d", tiers, len(b), n, err, 1+tiers*frameSize)
			}
		}
	}
}
