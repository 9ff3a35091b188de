package eviction

import "math"

// log2p1exp2 is log2(1 + 2^x): what a use does to a reuse count kept as
// its log2 (log2(C + 1) from log2(C)), on every hit of the store's lookup
// path. Between ±softplusSpan it interpolates a table linearly (error under
// 1e-5, far below what separates two pages' priorities in practice); past
// it, log2(1 + 2^x) is x (or 0) to within 2^-softplusSpan.
func log2p1exp2(x float64) float64 {
	switch {
	case x >= softplusSpan:
		return x
	case !(x > -softplusSpan): // NaN too
		return 0
	}
	f := (x + softplusSpan) * softplusStep
	i := int(f)
	frac := f - float64(i)
	return softplusTable[i] + frac*(softplusTable[i+1]-softplusTable[i])
}

const (
	softplusSpan = 32 // the table covers [−span, span]
	softplusStep = 64 // points per unit of x
)

var softplusTable = func() []float64 {
	t := make([]float64, 2*softplusSpan*softplusStep+2)
	for i := range t {
		x := float64(i)/softplusStep - softplusSpan
		t[i] = math.Log2(1 + math.Exp2(x))
	}
	return t
}()
