package coord

import (
	"testing"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// TestNoGoroutineLeak runs a one-node coordination lifecycle (elected,
// publishing, applying) twice and checks that the second leaves no
// goroutine behind. It is not parallel: goroutines are counted
// process-wide.
func TestNoGoroutineLeak(t *testing.T) {
	e := startEtcd(t)
	lifecycle := func() {
		n := startNode(t, "solo", e.Endpoints(), nil, 1<<20, 10, 1<<20)
		allCoordinated(t, []*testNode{n}, 0)
		n.close()
	}
	leaktest.Twice(t, lifecycle)
}
