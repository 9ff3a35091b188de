package placement

import (
	"encoding/binary"
	"math"
)

// This file is the portable scoring function specified in the package doc.
// Anything changed here changes every page's owner in a running cluster and
// must be changed in the Python client too; testdata/vectors.json pins it.

const (
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
)

// seedOf returns the per-node seed: mix64(fnv1a64(id)).
func seedOf(id string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= fnvPrime
	}
	return mix64(h)
}

// mix64 is the SplitMix64 finalizer, a bijection on 64-bit words with full
// avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// keyWord returns the first 8 bytes of key, little-endian.
func keyWord(key *[32]byte) uint64 {
	return binary.LittleEndian.Uint64(key[:8])
}

// uniform maps a hash to an exact binary64 in [2^-53, 1-2^-53]: the top 53
// bits with the lowest set, times 2^-53.
func uniform(h uint64) float64 {
	return float64((h>>11)|1) * 0x1p-53
}

// score is the weighted-HRW score w / -ln(uniform(h)).
func score(w float64, h uint64) float64 {
	return w / -ln(uniform(h))
}

// ln is the natural logarithm for positive, finite, normal x: FreeBSD's
// e_log.c exactly as Go's pure-Go math.log, with every product converted
// to float64 so that the compiler cannot fuse it into a multiply-add (the Go
// spec permits fusion, even across statements, unless a conversion rounds).
// Each operation is one IEEE round-to-nearest step, so other languages get
// the same bits by evaluating the same expressions in the same order. Error
// is below 1 ulp of the true value.
func ln(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
		ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
		l1    = 6.666666666666735130e-01   // 0x3fe5555555555593
		l2    = 3.999999999940941908e-01   // 0x3fd999999997fa04
		l3    = 2.857142874366239149e-01   // 0x3fd2492494229359
		l4    = 2.222219843214978396e-01   // 0x3fcc71c51d8e78af
		l5    = 1.818357216161805012e-01   // 0x3fc7466496cb03de
		l6    = 1.531383769920937332e-01   // 0x3fc39a09d078c69f
		l7    = 1.479819860511658591e-01   // 0x3fc2f112df3e5244
	)
	// Reduce: x = f1 * 2^ki with f1 in [sqrt2/2, sqrt2). This is
	//	f1, ki := frexp(x); if f1 < sqrt2/2 { f1 *= 2; ki-- }
	// done on the bits without a branch (the branch is a coin flip for
	// random x): adding 1-sqrt2/2's bit distance carries into the exponent
	// exactly when x's mantissa is at least sqrt2's. Valid for positive
	// normal x, which is all uniform returns.
	const sqrtHalf = 0x3fe6a09e667f3bcd // bits of sqrt2/2
	b := math.Float64bits(x) + (0x3ff0000000000000 - sqrtHalf)
	ki := int(b>>52) - 0x3ff
	f1 := math.Float64frombits(b&(1<<52-1) + sqrtHalf)
	f := f1 - 1
	k := float64(ki)

	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	r := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
}
