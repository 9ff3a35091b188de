package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRunFive runs the whole measurement on five members over a short
// window and checks the figures that do not depend on timing exactly, and
// that the timed ones were reached (within 30 s a phase: a CI machine
// running other packages' tests beside it once took more than 10 s for a
// join to reach the fourth member).
func TestRunFive(t *testing.T) {
	cfg, err := parseFlags([]string{"--n", "5", "--window", "500ms", "--quiet", "500ms", "--phase-timeout", "30s", "--keys", "20000", "--rounds", "3"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := measure(t.Context(), cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	var md, csv bytes.Buffer
	if err := writeMarkdown(&md, []result{r}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", md.String())
	if r.NoticeMsgs < 1 || r.NoticeMsgs > simChildren || r.ChildHintMsgs < 1 || r.ChildHintMsgs > 2 || r.EvictionMsgs > 3*simChildren {
		t.Errorf("messages: notice %d, child hint %d, in all %d; want 1 to %d (the children's nodes), 1 or 2, at most %d",
			r.NoticeMsgs, r.ChildHintMsgs, r.EvictionMsgs, simChildren, 3*simChildren)
	}
	if !r.Start.OK || !r.Crash.OK || !r.Join.OK {
		t.Errorf("start %v, crash %v, join %v: want each seen by 99%%", r.Start, r.Crash, r.Join)
	}
	if r.GossipBytes <= 0 || r.GossipMsgs <= 0 {
		t.Errorf("gossip %v B/s, %v msgs/s: want both counted", r.GossipBytes, r.GossipMsgs)
	}
	if r.CollectAsked != 4 || r.CollectGot != 4 || r.CoordRound <= 0 || r.CoordRound > time.Second {
		t.Errorf("coordinator round %v, %d of %d reports collected; want the 4 others' in under 1 s",
			r.CoordRound, r.CollectGot, r.CollectAsked)
	}
	if !r.Moved.OK || r.Moved.Join <= 0 || r.Moved.Join > 0.5 || r.Moved.Leave <= 0 || r.Moved.Leave > 0.5 {
		t.Errorf("moved %+v; want about the capacity shares, about 1/5 each", r.Moved)
	}
	if err := writeCSV(&csv, []result{r}); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csv.String(), "\n"); lines != 2 {
		t.Errorf("CSV has %d lines, want a heading and one row:\n%s", lines, csv.String())
	}
}

// TestPlacementMovesShare: with capacity weights in place, a join or a
// leave moves about the joiner's or leaver's share of the keys (about 1/N)
// at every size the simulator runs.
func TestPlacementMovesShare(t *testing.T) {
	for _, n := range []int{10, 100, 300, 1000} {
		mv, err := moved(n, 50_000)
		if err != nil {
			t.Fatal(err)
		}
		if !mv.OK || mv.JoinShare > 3/float64(n) || mv.LeaveShare > 3/float64(n) {
			t.Errorf("N=%d: %+v, want moves at the capacity shares, about 1/N", n, mv)
		}
	}
}

func TestFlagsRejected(t *testing.T) {
	for _, args := range [][]string{{"--n", "2"}, {"--n", "x"}, {"--window", "0s"}, {"--keys", "-1"},
		{"--wave", "-1"}, {"--quiet", "-1s"}, {"--compression", "lzw"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestStartWaves: a rolling start, in waves of four, starts every member
// and each wave only once the earlier ones see each other alive.
func TestStartWaves(t *testing.T) {
	cfg, err := parseFlags([]string{"--n", "9", "--wave", "4", "--phase-timeout", "30s"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := startCluster(t.Context(), 9, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if live := len(c.live()); live != 9 {
		t.Fatalf("%d members started, want 9", live)
	}
	if r, err := converge(t.Context(), c, cfg, time.Now()); err != nil || r.Saw != 9 {
		t.Fatalf("after the waves, %d of 9 see all (%v)", r.Saw, err)
	}
}
