package node

import (
	"testing"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

// TestMain fails the run if a goroutine the tests started outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }
