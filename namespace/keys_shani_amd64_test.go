//go:build amd64 && !purego

package namespace

import (
	"math/big"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestSHAConstants derives the tables keys_shani_amd64.s reads from their
// definitions (FIPS 180-4 §4.2.2, §5.3.3): the first 32 bits of the
// fractional parts of the cube roots of the first 64 primes, and of the
// square roots of the first 8.
func TestSHAConstants(t *testing.T) {
	var primes []int64
	for n := int64(2); len(primes) < 64; n++ {
		if !slices.ContainsFunc(primes, func(p int64) bool { return n%p == 0 }) {
			primes = append(primes, n)
		}
	}
	frac := func(root *big.Int) uint32 { return uint32(root.Uint64()) }
	for i, p := range primes {
		// floor(cbrt(p) * 2^32) = floor(cbrt(p * 2^96)).
		if got, want := shaK[i], frac(cubeRoot(new(big.Int).Lsh(big.NewInt(p), 96))); got != want {
			t.Errorf("shaK[%d] = %#08x, want %#08x", i, got, want)
		}
	}
	for i, p := range primes[:8] {
		if got, want := shaIV[i], frac(new(big.Int).Sqrt(new(big.Int).Lsh(big.NewInt(p), 64))); got != want {
			t.Errorf("shaIV[%d] = %#08x, want %#08x", i, got, want)
		}
	}
	for i, b := range shaBswap {
		if want := byte(i&^3 | (3 - i&3)); b != want {
			t.Errorf("shaBswap[%d] = %d, want %d", i, b, want)
		}
	}
}

// cubeRoot returns floor(cbrt(n)) for n >= 0.
func cubeRoot(n *big.Int) *big.Int {
	lo, hi := big.NewInt(0), new(big.Int).Lsh(big.NewInt(1), uint(n.BitLen()/3+1))
	for new(big.Int).Sub(hi, lo).Cmp(big.NewInt(1)) > 0 {
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		if new(big.Int).Exp(mid, big.NewInt(3), nil).Cmp(n) <= 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// TestDetectSHANI: where Linux reports the SHA extensions and SSSE3
// (sha_ni, ssse3), the CPUID check finds them, so the tests here run the
// assembly. (The other way round, running it without them, would crash.)
func TestDetectSHANI(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/cpuinfo")
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	var flags []string
	for line := range strings.Lines(string(info)) {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags = strings.Fields(value)
			break
		}
	}
	has := slices.Contains(flags, "sha_ni") && slices.Contains(flags, "ssse3") && slices.Contains(flags, "sse2")
	if has && !haveSHANI {
		t.Fatal("/proc/cpuinfo lists sha_ni, ssse3 and sse2 but haveSHANI is false")
	}
	t.Logf("SHA extensions: cpuinfo %v, CPUID %v", has, haveSHANI)
}
