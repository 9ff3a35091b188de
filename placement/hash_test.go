package placement

import (
	"math"
	"math/bits"
	"testing"
)

// unmix64 inverts mix64, so tests can build keys that hit chosen hashes.
func unmix64(z uint64) uint64 {
	z ^= z>>31 ^ z>>62
	z *= inverse(0x94d049bb133111eb)
	z ^= z>>27 ^ z>>54
	z *= inverse(0xbf58476d1ce4e5b9)
	z ^= z>>30 ^ z>>60
	return z
}

// inverse returns the multiplicative inverse of odd a modulo 2^64.
func inverse(a uint64) uint64 {
	x := a // correct to 3 bits; each Newton step doubles that
	for range 5 {
		x *= 2 - a*x
	}
	return x
}

func TestMix64Inverse(t *testing.T) {
	r := testRand(t)
	for _, x := range []uint64{0, 1, math.MaxUint64, 1 << 63} {
		if got := unmix64(mix64(x)); got != x {
			t.Fatalf("unmix64(mix64(%#x)) = %#x", x, got)
		}
	}
	for range 10_000 {
		x := r.Uint64()
		if got := unmix64(mix64(x)); got != x {
			t.Fatalf("unmix64(mix64(%#x)) = %#x", x, got)
		}
	}
}

func TestFNV1a(t *testing.T) {
	// Published FNV-1a 64 values; seedOf is mix64 of them.
	for _, tt := range []struct {
		in   string
		want uint64
	}{
		{"", 0xcbf29ce484222325},
		{"a", 0xaf63dc4c8601ec8c},
		{"foobar", 0x85944171f73967e8},
	} {
		if got := unmix64(seedOf(tt.in)); got != tt.want {
			t.Errorf("fnv1a64(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

func TestUniformRange(t *testing.T) {
	lo, hi := uniform(0), uniform(math.MaxUint64)
	if lo != 0x1p-53 || hi != 1-0x1p-53 {
		t.Fatalf("uniform range [%g, %g], want [2^-53, 1-2^-53]", lo, hi)
	}
	for _, h := range []uint64{0, math.MaxUint64} {
		u := uniform(h)
		if l := ln(u); !(l < 0) || math.IsInf(l, 0) {
			t.Errorf("ln(%g) = %g, want finite and < 0", u, l)
		}
		if s := score(1, h); !(s > 0) || math.IsInf(s, 0) {
			t.Errorf("score at u=%g is %g, want finite and > 0", u, s)
		}
	}
	if got, want := ln(lo), -53*math.Ln2; math.Abs(got-want) > 1e-13 {
		t.Errorf("ln(2^-53) = %v, want %v", got, want)
	}
}

// TestLn checks the portable ln against math.Log: at most one ulp apart, as
// both are within one ulp of the true value and almost always agree.
func TestLn(t *testing.T) {
	r := testRand(t)
	check := func(x float64) bool {
		got, want := ln(x), math.Log(x)
		d := int64(math.Float64bits(got)) - int64(math.Float64bits(want))
		if d < -1 || d > 1 {
			t.Fatalf("ln(%v) = %v, math.Log = %v: %d ulp apart", x, got, want, d)
		}
		return d == 0
	}
	for e := -53; e <= 0; e++ {
		check(math.Ldexp(1, e))
		check(math.Nextafter(math.Ldexp(1, e), 0))
	}
	check(math.Sqrt2 / 2)
	check(math.Nextafter(math.Sqrt2/2, 0))
	check(uniform(math.MaxUint64))
	const n = 1_000_000
	same := 0
	for range n {
		x := uniform(r.Uint64())
		if r.IntN(4) == 0 { // also cover small u, down to 2^-53
			x = math.Ldexp(x, -bits.Len64(r.Uint64()>>12))
		}
		if check(x) {
			same++
		}
	}
	t.Logf("ln agrees bit for bit with math.Log on %.5f of %d inputs", float64(same)/n, n)
}

// TestLnReduction checks the branch-free range reduction in ln against the
// frexp form that the package doc and the Python script use.
func TestLnReduction(t *testing.T) {
	r := testRand(t)
	const sqrtHalfBits = 0x3fe6a09e667f3bcd
	if math.Float64frombits(sqrtHalfBits) != math.Sqrt2/2 {
		t.Fatalf("%#x is not the bits of sqrt2/2", uint64(sqrtHalfBits))
	}
	sqrtHalf := math.Sqrt2 / 2
	xs := []float64{sqrtHalf, math.Nextafter(sqrtHalf, 0), math.Nextafter(sqrtHalf, 1),
		math.Sqrt2, math.Nextafter(math.Sqrt2, 0), 0.5, 1, 0x1p-53, 1 - 0x1p-53}
	for range 100_000 {
		xs = append(xs, uniform(r.Uint64()))
	}
	for _, x := range xs {
		b := math.Float64bits(x) + (0x3ff0000000000000 - sqrtHalfBits)
		ki := int(b>>52) - 0x3ff
		f1 := math.Float64frombits(b&(1<<52-1) + sqrtHalfBits)
		wf1, wki := math.Frexp(x)
		if wf1 < sqrtHalf {
			wf1 *= 2
			wki--
		}
		if f1 != wf1 || ki != wki {
			t.Fatalf("x=%v: reduced to %v * 2^%d, frexp form gives %v * 2^%d", x, f1, ki, wf1, wki)
		}
	}
}
