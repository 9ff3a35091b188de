// Package testseed gives randomized tests their seed, so that every run
// prints how to repeat it (STYLE.md): the value of the test's seed flag
// when set, else one from the clock.
package testseed

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Choose returns flagValue, or a seed from the clock when it is 0, and logs
// it with the flag (named without its dash) that reruns it.
func Choose(tb testing.TB, flagValue uint64, flag string) uint64 {
	tb.Helper()
	seed := flagValue
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (rerun with -%s=%d)", seed, flag, seed)
	return seed
}

// Rand is New of the seed Choose returns.
func Rand(tb testing.TB, flagValue uint64, flag string) *rand.Rand {
	tb.Helper()
	return New(Choose(tb, flagValue, flag))
}

// New is the generator a seed stands for.
func New(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
