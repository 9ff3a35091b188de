package admin_test

import (
	"testing"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

// TestMain fails the run if a goroutine the tests started (the client's
// calls to every member, the nodes they start) outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }
