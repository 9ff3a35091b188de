package main

import (
	"testing"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

// TestMain fails the run if a goroutine the tests started (the replays run
// in parallel, the stores they open) outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }
