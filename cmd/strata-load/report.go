package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/stratakv/strata/benchmarks/load"
)

// writeReport writes results.md, results.csv and the plots into cfg.out
// and says where they are on cfg.log.
func writeReport(cfg config, started time.Time, results []load.Result) error {
	var h strings.Builder
	fmt.Fprintf(&h, "# strata-load\n\n- command: `strata-load %s`\n- started %s, %s\n",
		strings.Join(cfg.args, " "), started.Format(time.RFC3339), runtime.Version())
	fmt.Fprintf(&h, "- CPUs: %d (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		fmt.Fprintf(&h, "; %s", strings.TrimSpace(string(out)))
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&h, "\n- load average at the end: %s", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	servers := "the strata node, the tcp limit's page server and redis-server each run as a process of their own; " +
		"cpu-µs/op is this process's CPU (the clients) plus the measured system's server process's"
	if cfg.inProcess {
		servers = "the strata node and the tcp limit's page server run inside this process (--in-process), redis-server in its own; " +
			"cpu-µs/op is this process's CPU (clients and in-process servers) plus redis-server's for redis"
	}
	if cfg.addr != "" {
		servers += "; the node at --addr is not counted"
	}
	if cfg.nodeProcs > 0 {
		servers += fmt.Sprintf("; the strata node runs with GOMAXPROCS %d (--node-procs)", cfg.nodeProcs)
	}
	if cfg.oldNode != "" {
		servers += fmt.Sprintf("; the strata-old systems' node runs %s (--old-node), with this build's client", cfg.oldNode)
	}
	moves := "one page"
	if cfg.batch > 1 {
		moves = fmt.Sprintf("a batch of %d pages (--batch: strata one Put or Get, Redis pipelined SETs or GETs, memcpy that many copies), p50 and p99 per batch", cfg.batch)
	}
	h.WriteString("\n- one operation moves " + moves + "; a lookup asks about lookup-keys keys; " + servers + "\n")
	md, err := os.Create(filepath.Join(cfg.out, "results.md"))
	if err != nil {
		return err
	}
	defer md.Close()
	if err := load.WriteMarkdown(md, h.String(), results); err != nil {
		return err
	}
	csv, err := os.Create(filepath.Join(cfg.out, "results.csv"))
	if err != nil {
		return err
	}
	defer csv.Close()
	if err := load.WriteCSV(csv, results); err != nil {
		return err
	}
	plots, err := load.WritePlots(cfg.out, results)
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.log, "strata-load: %d cases; wrote %s, %s and %d plots\n", len(results),
		md.Name(), csv.Name(), len(plots))
	return nil
}
