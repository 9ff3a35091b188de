package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratakv/strata/benchmarks/load"
)

// TestMain lets the test binary serve as the node and page server
// processes the command starts (it re-executes itself).
func TestMain(m *testing.M) {
	load.ServeChild()
	os.Exit(m.Run())
}

// TestRunSmoke runs the whole command on tiny pages for a few milliseconds
// per case: every system (Redis only where redis-server is installed), every
// operation, the report and the plots.
func TestRunSmoke(t *testing.T) {
	out, md, log := runCommand(t, "results.md", "--sizes", "4K,16K", "--concurrency", "1,2", "--duration", "30ms", "--warmup", "20ms",
		"--settle", "20ms", "--working-set", "256K", "--put-budget", "128K", "--lookup-keys", "8", "--host-bytes", "16M", "--node-procs", "1")
	for _, want := range []string{"## put", "## get", "## lookup", "| strata | 4KiB | 1 |", "| tcp | 16KiB | 2 |",
		"| memcpy | 4KiB | 2 |", "strata get ÷ baselines", "the strata node runs with GOMAXPROCS 1 (--node-procs)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(log.String(), "skipping redis") {
		t.Log("redis-server not installed: Redis not measured")
	} else if !strings.Contains(string(md), "| redis | 16KiB | 2 |") {
		t.Errorf("results.md lacks redis rows:\n%s", md)
	}
	for _, f := range []string{"results.csv", "get-w1-throughput.png", "put-w2-latency.png", "lookup-w1-throughput.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestBatchSmoke: --batch 3 runs strata's puts and gets as batches of 3
// pages (each a fresh key or a working-set page found, or the case fails),
// memcpy's and Redis's likewise, skips the tcp limit's, and says so.
func TestBatchSmoke(t *testing.T) {
	_, md, log := runCommand(t, "results.md", "--sizes", "4K", "--concurrency", "2", "--duration", "30ms", "--warmup", "20ms",
		"--settle", "20ms", "--working-set", "64K", "--put-budget", "128K", "--ops", "put,get", "--batch", "3", "--host-bytes", "16M")
	for _, want := range []string{"one operation moves a batch of 3 pages", "| strata | 4KiB | 2 |", "| memcpy | 4KiB | 2 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "| tcp |") || strings.Contains(string(md), "failed") {
		t.Errorf("results.md has a tcp row or a failed case:\n%s", md)
	}
	if !strings.Contains(log.String(), "skipping redis") && !strings.Contains(string(md), "| redis | 4KiB | 2 |") {
		t.Errorf("results.md lacks redis rows:\n%s", md)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "64K": 64 << 10, "256KiB": 256 << 10, "1M": 1 << 20,
		"4MiB": 4 << 20, "2G": 2 << 30, "1gib": 1 << 30} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "-1", "1T", "x"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) succeeded", bad)
		}
	}
}

// TestNodeProcsNeedsItsOwnProcess: --node-procs sets the GOMAXPROCS of a
// node strata-load starts as a process; with --in-process or --addr there
// is no such process, and a negative count means nothing.
func TestNodeProcsNeedsItsOwnProcess(t *testing.T) {
	for _, args := range [][]string{
		{"--node-procs", "1", "--in-process"},
		{"--node-procs", "2", "--addr", "127.0.0.1:1"},
		{"--node-procs", "-1"},
	} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), "--node-procs") {
			t.Errorf("%q: error %v, want one about --node-procs", args, err)
		}
	}
	if cfg, err := parseFlags([]string{"--node-procs", "1"}); err != nil || cfg.nodeProcs != 1 {
		t.Errorf("--node-procs 1: %d, %v", cfg.nodeProcs, err)
	}
}

// TestOldNodeNeedsItsOwnProcess: --old-node runs a stratad binary beside
// the node strata-load starts as a process; with --in-process or --addr
// there is no such node to measure it beside.
func TestOldNodeNeedsItsOwnProcess(t *testing.T) {
	for _, args := range [][]string{{"--old-node", "/bin/stratad", "--in-process"}, {"--old-node", "/bin/stratad", "--addr", "127.0.0.1:1"}} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), "--old-node") {
			t.Errorf("%q: error %v, want one about --old-node", args, err)
		}
	}
	if cfg, err := parseFlags([]string{"--old-node", "/bin/stratad"}); err != nil || cfg.oldNode != "/bin/stratad" {
		t.Errorf("--old-node /bin/stratad: %q, %v", cfg.oldNode, err)
	}
}

// TestEventsSmoke: --events measures each strata transport also on a node
// publishing the KV event stream to a subscriber of the load generator,
// and writes the events-on over events-off table.
func TestEventsSmoke(t *testing.T) {
	_, md, _ := runCommand(t, "results.md", "--systems", "strata", "--sizes", "4K", "--concurrency", "1", "--duration", "30ms",
		"--warmup", "20ms", "--settle", "20ms", "--working-set", "64K", "--put-budget", "128K", "--ops", "put", "--events", "--host-bytes", "16M")
	for _, want := range []string{"| strata | 4KiB | 1 |", "| strata-events | 4KiB | 1 |", "strata-events ÷ strata, put", "events ÷ none"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
}
