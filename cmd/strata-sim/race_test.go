//go:build race

package main

// raceEnabled: the race detector slows the replays about sevenfold, so
// TestAcceptance averages over fewer placements under it.
const raceEnabled = true
