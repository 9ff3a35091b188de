package eviction

import (
	"fmt"
	"math"
)

// SpillRatio is how much more pressure (turnover) a page's owner must be
// under than its second placement candidate before Cutoffs.Spill sends the
// page there: enough margin that measurement noise between equally loaded
// nodes does not shuffle pages back and forth.
const SpillRatio = 1.5

// Cutoffs is what a coordinator computes from every node's Summary of one
// tier and publishes.
type Cutoffs struct {
	// Worth is the cutoff, in Queue.Worth units: the cluster holds more
	// bytes worth at least this than it has room for, so a node may evict
	// what is worth less and refuse puts worth less (Queue.SetCutoff).
	// Meaningful only when Limited.
	Worth float64
	// Limited is false when the summed capacities hold every summarised
	// byte: there is no cutoff.
	Limited bool
	// Kept is how many of the summarised bytes are worth at least the
	// cutoff.
	Kept int64
	// Excess is, per node, the bytes it holds worth at least the cutoff
	// minus its capacity: > 0 when the node is full of pages the cluster
	// wants to keep.
	Excess []int64
	// Pressure is, per node, its turnover over the cluster's
	// (capacity-weighted) mean: 1 is average, 4 means pages there live a
	// quarter as long.
	Pressure []float64
}

// Spill reports whether a put that its owner can only take by evicting
// should go to its second placement candidate instead: the owner is under
// SpillRatio times the candidate's pressure. Placement weighted by capacity
// keeps pressures equal on average; they part when load and capacity do
// (hot keys, a weight that lags a resize, a slow tier).
func (c Cutoffs) Spill(owner, second int) bool {
	if owner < 0 || second < 0 || owner >= len(c.Pressure) || second >= len(c.Pressure) {
		return false
	}
	return c.Pressure[owner] > SpillRatio*c.Pressure[second]
}

// Floor is the admission floor for Queue.SetCutoff: the cutoff when
// Limited, else 0 (none).
func (c Cutoffs) Floor() float64 {
	if !c.Limited {
		return 0
	}
	return c.Worth
}

// ComputeCutoffs merges every node's Summary of a tier. The cutoff is the
// worth w such that the bytes worth at least w across all summaries fill
// the summed capacities (pass capacities scaled down to keep headroom).
// Buckets are merged on a common scale (the coarsest Lo; bytes that fall
// below it count in the lowest bucket) and the cutoff is interpolated
// log-linearly inside its bucket. It is O(nodes · buckets) and allocates
// only the Excess and Pressure slices.
func ComputeCutoffs(sums []Summary, capacities []int64) (Cutoffs, error) {
	if len(sums) != len(capacities) {
		return Cutoffs{}, fmt.Errorf("%w: %d summaries, %d capacities", ErrBadCapacity, len(sums), len(capacities))
	}
	out := Cutoffs{Excess: make([]int64, len(sums)), Pressure: make([]float64, len(sums))}
	if len(sums) == 0 {
		return out, nil
	}
	var capTotal int64
	var turnover float64
	lo := int16(math.MinInt16)
	for i := range sums {
		if capacities[i] < 0 {
			return Cutoffs{}, fmt.Errorf("%w: node %d has capacity %d", ErrBadCapacity, i, capacities[i])
		}
		capTotal += capacities[i]
		turnover += sums[i].Turnover * float64(capacities[i])
		lo = max(lo, sums[i].Lo)
	}
	if turnover > 0 {
		mean := turnover / float64(capTotal)
		for i := range sums {
			out.Pressure[i] = sums[i].Turnover / mean
		}
	}
	var merged [SummaryBuckets]int64
	for i := range sums {
		for b, n := range sums[i].Bytes {
			merged[rebucket(b, sums[i].Lo, lo)] += n
		}
	}
	var above int64
	cut := -1
	for b := SummaryBuckets - 1; b >= 0; b-- {
		if above+merged[b] > capTotal {
			cut = b
			break
		}
		above += merged[b]
	}
	if cut < 0 {
		out.Kept = above
		for i := range sums {
			out.Excess[i] = sums[i].Total() - capacities[i]
		}
		return out, nil // everything fits: no cutoff
	}
	// Keep the top part of bucket cut: the fraction that still fits.
	frac := float64(capTotal-above) / float64(merged[cut])
	out.Worth = math.Exp2((float64(int(lo)+cut) + 1 - frac) / bucketsPerOctave)
	out.Limited = true
	out.Kept = capTotal
	for i := range sums {
		var kept float64
		for b, n := range sums[i].Bytes {
			switch rb := rebucket(b, sums[i].Lo, lo); {
			case rb > cut:
				kept += float64(n)
			case rb == cut:
				kept += frac * float64(n)
			}
		}
		out.Excess[i] = int64(kept) - capacities[i]
	}
	return out, nil
}

// rebucket maps bucket b at scale from to scale to >= from.
func rebucket(b int, from, to int16) int {
	return min(max(b+int(from)-int(to), 0), SummaryBuckets-1)
}
