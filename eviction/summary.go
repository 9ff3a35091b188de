package eviction

import (
	"encoding/binary"
	"fmt"
	"math"
)

// SummaryBuckets is the number of value buckets in a Summary.
const SummaryBuckets = 64

// bucketsPerOctave sets the resolution: each bucket spans a factor 2^(1/4)
// (19%) of value, so 64 buckets span 16 octaves.
const bucketsPerOctave = 4

// SummarySize is the length of an encoded Summary: small enough for
// memberlist node metadata (512 bytes) next to an address.
const SummarySize = 12 + 2*SummaryBuckets

const summaryVersion = 1

// Summary is what a node gossips about one tier: a compact histogram of the
// worth of the bytes it holds (Queue.Worth: freq · cost / bytes, which unlike
// the GDSF value does not depend on the node's aging clock, so histograms of
// different nodes can be merged), and how fast the tier turns over. Bucket i
// holds worth in [2^((Lo+i)/4), 2^((Lo+i+1)/4)); bucket 0 also holds
// everything below, the last bucket everything above.
type Summary struct {
	// Turnover is the bytes the tier evicted or refused per byte of
	// capacity per unit of time, smoothed by the node (e.g. an EWMA over a
	// minute); Summarize leaves it 0. How long a page survives there is
	// about 1/Turnover: the tier's pressure.
	Turnover float64
	Lo       int16 // scale: bucket 0's upper edge is 2^((Lo+1)/4)
	Bytes    [SummaryBuckets]int64
}

// Total is the bytes summarised.
func (s *Summary) Total() int64 {
	var t int64
	for _, b := range s.Bytes {
		t += b
	}
	return t
}

// bucketOf returns the bucket of worth c at scale lo.
func bucketOf(c float64, lo int16) int {
	if !(c > 0) {
		return 0
	}
	return min(max(quarterLog2(c)-int(lo), 0), SummaryBuckets-1)
}

// Mantissa thresholds of the quarter octaves: 2^(1/4), 2^(1/2), 2^(3/4).
const q1, q2, q3 = 1.189207115002721, 1.4142135623730951, 1.681792830507429

// quarterLog2 is floor(4·log2(x)) for finite x > 0, from the exponent bits
// and three mantissa comparisons (no logarithm: Summarize runs it per page).
func quarterLog2(x float64) int {
	b := math.Float64bits(x)
	e := int(b>>52&0x7ff) - 1023
	if e == -1023 { // subnormal: far below any bucket
		return math.MinInt32
	}
	m := math.Float64frombits(b&^(0x7ff<<52) | 1023<<52) // in [1, 2)
	k := 0
	switch {
	case m >= q3:
		k = 3
	case m >= q2:
		k = 2
	case m >= q1:
		k = 1
	}
	return 4*e + k
}

// loFor is the scale that puts worth top in the top bucket.
func loFor(top float64) int16 {
	if !(top > 0) || math.IsInf(top, 0) {
		return 0
	}
	lo := quarterLog2(top) - (SummaryBuckets - 1)
	return int16(min(max(lo, math.MinInt16), math.MaxInt16))
}

// summarySample bounds the pages Summarize reads. Past it, Summarize reads
// summarySample slots of the page slab picked at random (a new draw each
// call; slots are random, not evenly spaced, because a workload's pattern
// can line up with any stride: every eighth page a hot root) and scales the
// bytes up by the live bytes over the sampled ones. A node summarises
// under its store lock, where one pass over a million pages took 24 ms
// (BenchmarkSummarize) and stalled every lookup and put for as long; a
// sample of 32,768 slots puts the cumulative shares that the cutoff reads
// within about sqrt(F(1−F)/32768), under 0.3%, of the whole.
const summarySample = 1 << 15

// Summarize fills dst's histogram with the worth of the pages the queue
// holds (Turnover is the node's to set): one allocation-free pass (two for
// KindCost, whose top worth decays) over at most summarySample pages, a few
// ns each; call it every few seconds, not per request.
func (q *Queue) Summarize(dst *Summary) {
	n := len(q.pages) - 1
	sampled := n > summarySample
	draws := n
	if sampled {
		draws = summarySample
	}
	seed := mix64(q.now ^ uint64(n)<<32)
	slot := func(j int) int {
		if !sampled {
			return 1 + j
		}
		return 1 + int(mix64(seed+uint64(j))%uint64(n))
	}
	// maxWorth bounds every page's worth (it never shrinks), so the scale is
	// known before the pass; KindCost's worth decays, so its top is found by
	// a first pass.
	top := q.maxWorth
	if q.kind == KindCost {
		top = math.Inf(-1)
		for j := range draws {
			if s := &q.pages[slot(j)]; s.flags&flagLive != 0 {
				top = max(top, s.eff())
			}
		}
		top = math.Exp2(top - q.age())
	}
	*dst = Summary{Turnover: dst.Turnover, Lo: loFor(top)}
	var seen int64
	for j := range draws {
		if h := Handle(slot(j)); q.pages[h].flags&flagLive != 0 {
			b := int64(q.ident(h).bytes)
			dst.Bytes[bucketOf(q.worth(&q.pages[h]), dst.Lo)] += b
			seen += b
		}
	}
	if sampled && seen > 0 {
		scale := float64(q.bytes) / float64(seen)
		for i, b := range dst.Bytes {
			dst.Bytes[i] = int64(math.Round(float64(b) * scale))
		}
	}
}

// MarshalBinary encodes s in SummarySize bytes: version, Lo (int16 LE),
// Turnover (float64 LE), a unit shift u, then each bucket as a uint16 LE
// count of 2^u-byte units, rounded up so that no non-empty bucket reads
// empty.
func (s *Summary) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, SummarySize))
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (s *Summary) AppendBinary(b []byte) ([]byte, error) {
	var top int64
	if !(s.Turnover >= 0) || math.IsInf(s.Turnover, 0) {
		return b, fmt.Errorf("%w: turnover %v", ErrBadSummary, s.Turnover)
	}
	for _, v := range s.Bytes {
		if v < 0 {
			return b, fmt.Errorf("%w: negative bucket", ErrBadSummary)
		}
		top = max(top, v)
	}
	shift := uint8(0)
	for (top+(1<<shift)-1)>>shift > math.MaxUint16 {
		shift++
	}
	b = append(b, summaryVersion)
	b = binary.LittleEndian.AppendUint16(b, uint16(s.Lo))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Turnover))
	b = append(b, shift)
	for _, v := range s.Bytes {
		b = binary.LittleEndian.AppendUint16(b, uint16((v+(1<<shift)-1)>>shift))
	}
	return b, nil
}

// UnmarshalBinary decodes an encoding of MarshalBinary. Bucket sizes come
// back rounded up to the encoding's unit.
func (s *Summary) UnmarshalBinary(b []byte) error {
	if len(b) != SummarySize || b[0] != summaryVersion || b[11] > 47 {
		return fmt.Errorf("%w: %d bytes", ErrBadSummary, len(b))
	}
	turnover := math.Float64frombits(binary.LittleEndian.Uint64(b[3:11]))
	if !(turnover >= 0) || math.IsInf(turnover, 0) {
		return fmt.Errorf("%w: turnover %v", ErrBadSummary, turnover)
	}
	s.Lo = int16(binary.LittleEndian.Uint16(b[1:3]))
	s.Turnover = turnover
	shift := b[11]
	for i := range s.Bytes {
		s.Bytes[i] = int64(binary.LittleEndian.Uint16(b[12+2*i:])) << shift
	}
	return nil
}
