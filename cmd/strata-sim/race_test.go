//go:build race

package main

// raceEnabled: the race detector slows the replays about tenfold, so
// TestAcceptance replays fewer placements under it.
const raceEnabled = true
