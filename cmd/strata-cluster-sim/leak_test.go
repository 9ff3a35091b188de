package main

import (
	"testing"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

// TestMain fails the run if a goroutine the tests started (a member, a
// watcher) outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }
