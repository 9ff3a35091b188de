package store

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

// TestMain fails the run if a goroutine the tests started outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }

// advance moves a synctest bubble's clock on by d, then waits until every
// goroutine of the bubble is blocked again: the janitor's and the mover's
// ticks that fell due have run. It must be called inside synctest.Test.
// The sleep is the only way synctest's clock moves, and costs no real time.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}
