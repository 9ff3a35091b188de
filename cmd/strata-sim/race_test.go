//go:build race

package main

// raceEnabled: the race detector slows the replays about tenfold, so the
// acceptance replays skip under it (skipUnderRace).
const raceEnabled = true
