package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSweep runs --half-lives end to end on a slice of the scan workload:
// each candidate is a replay of ours-node with its half-life fixed (the
// shortest and the longest disagree there), and the table's best fixed
// column names the candidate that saved the most.
func TestSweep(t *testing.T) {
	cfg, err := parseFlags([]string{"--trace", "gen:scan:1", "--slice", "800", "--nodes", "2",
		"--sizes", "10", "--policies", "lru,ours-node", "--half-lives", "0.125,8"})
	if err != nil {
		t.Fatal(err)
	}
	if got := variantNames(); strings.Contains(got, "hl=") {
		t.Fatalf("the candidates leaked into the policy list: %s", got)
	}
	tr, err := loadTrace(cfg.Trace, cfg.Profile.PageTokens, cfg.Every, cfg.Slice)
	if err != nil {
		t.Fatal(err)
	}
	res, err := simulate(context.Background(), tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows := aggregate(res, cfg)
	saved := map[string]float64{}
	for _, r := range rows {
		saved[r.variant] = r.saved
	}
	short, long := saved["hl=0.125"], saved["hl=8"]
	if len(saved) != 4 || short == long {
		t.Fatalf("saved %v: want lru, ours-node and two candidates that differ", saved)
	}
	best := "hl=0.125"
	if long > short {
		best = "hl=8"
	}
	var out bytes.Buffer
	writeSweep(&out, cfg, tr, rows)
	t.Log("\n" + out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	head, last := lines[len(lines)-3], lines[len(lines)-1]
	if !strings.HasPrefix(head, "| size | lru | ours-node | hl=0.125 | hl=8 | best fixed |") {
		t.Fatalf("header %q", head)
	}
	if cells := strings.Split(last, "|"); len(cells) != 10 || strings.TrimSpace(cells[6]) != best {
		t.Fatalf("row %q: want 8 cells, best fixed %s", last, best)
	}
	for _, bad := range []string{"0", "-1", "NaN", "x"} {
		if _, err := parseFlags([]string{"--trace", "gen:scan", "--half-lives", "1," + bad}); err == nil {
			t.Errorf("--half-lives 1,%s: no error", bad)
		}
	}
}
