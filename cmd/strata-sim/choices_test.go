package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestChoicesPlot: the table is followed by one strip per node and size
// for ours-node, a letter of the legend per column, and none for lru,
// whose bare queues choose nothing, or a fixed half-life.
func TestChoicesPlot(t *testing.T) {
	cfg, err := parseFlags([]string{"--trace", "gen:recency:1", "--slice", "400", "--nodes", "2",
		"--sizes", "5,25", "--policies", "lru,ours-node", "--half-lives", "2"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	letters, _ := choiceLetters()
	strips := 0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 6 || !strings.Contains(f[4], "`") {
			continue
		}
		if strings.TrimSpace(f[2]) != "ours-node" {
			t.Fatalf("a strip for %q: %s", f[2], line)
		}
		strip := strings.Trim(strings.TrimSpace(f[4]), "`")
		if len(strip) != plotColumns {
			t.Fatalf("strip of %d columns, want %d: %s", len(strip), plotColumns, line)
		}
		for _, c := range []byte(strip) {
			found := false
			for _, l := range letters {
				found = found || l == c
			}
			if !found {
				t.Fatalf("column %q is no candidate's letter: %s", c, line)
			}
		}
		strips++
	}
	if strips != 2*2 {
		t.Fatalf("%d strips, want one per node and size (4):\n%s", strips, out.String())
	}
}
