// Command strata-load measures put, get and lookup throughput and latency
// of a strata node for several page sizes and concurrencies, and in the same
// run the same workload against Redis (a redis-server it starts on
// loopback, persistence off), the raw loopback TCP limit and the memcpy
// limit, and on request Mooncake Store (--systems mooncake, with Redis
// through the same Python workers as redis-py). It writes results.md (markdown tables), results.csv and PNG plots
// into --out. With --transfer it measures instead the transfer of one
// prompt's KV from a producer process to a consumer process (transfer.go).
// benchmarks/README.md documents the command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/stratakv/strata/benchmarks/load"
)

// config is what one run does.
type config struct {
	addr       string
	systems    []string
	transports []string
	ops        []load.Op
	sizes      []int
	conc       []int
	duration   time.Duration
	warmup     time.Duration
	settle     time.Duration
	rounds     int
	inProcess  bool
	workingSet int
	putBudget  int
	lookupKeys int
	batch      int
	hostBytes  int64
	nodeProcs  int
	oldNode    string // a stratad binary measured beside this build's node (strata-old)
	events     bool   // each strata system also measured on a node publishing its KV events (strata-events)
	token      string
	// mooncakePython is the interpreter with the mooncake wheel, for the
	// mooncake and redis-py systems.
	mooncakePython string
	transfer       transferConfig // --transfer: the transfer case instead (transfer.go)
	out            string
	progress       io.Writer
	log            io.Writer
	args           []string
}

func main() {
	load.ServeChild() // when re-executed as a node or page server
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata-load:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "strata-load:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("strata-load", flag.ContinueOnError)
	var (
		cfg                                              = config{progress: os.Stderr, log: os.Stdout, args: args}
		systems, transports, ops, sizes, conc, ws, pb, h string
	)
	fs.StringVar(&cfg.addr, "addr", "", "strata node to measure (default: start one in this process)")
	fs.StringVar(&systems, "systems", "strata,redis,tcp,memcpy", "systems to measure: strata, redis, tcp, memcpy, mooncake (Mooncake Store, Python workers), redis-py (Redis through the same Python workers)")
	fs.StringVar(&transports, "transport", "tcp", "strata client transports, each a system: tcp (raw tcp data plane), tcp-nopoll (tcp without polling for answers), grpc, shm, auto; tcp-tls and grpc-tls with TLS (a CA made at start)")
	fs.StringVar(&ops, "ops", "put,get,lookup", "operations")
	fs.StringVar(&sizes, "sizes", "64K,256K,1M,4M", "page sizes")
	fs.StringVar(&conc, "concurrency", "1,4,8,32", "concurrent workers, each with its own connection")
	fs.DurationVar(&cfg.duration, "duration", time.Second, "measured time per case")
	fs.DurationVar(&cfg.warmup, "warmup", 0, "unmeasured time per case before it (split over its rounds like the case); 0: a fifth of --duration")
	fs.DurationVar(&cfg.settle, "settle", 3*time.Second, "unmeasured time per system and page size before its first case: its server process was just started")
	fs.BoolVar(&cfg.inProcess, "in-process", false, "run the strata node and the tcp limit's page server in this process instead of as processes of their own")
	fs.IntVar(&cfg.rounds, "rounds", 5, "slices each case is cut into, the systems taking turns slice by slice so that a drifting machine slows them alike")
	fs.StringVar(&ws, "working-set", "256M", "bytes of pages a get reads round-robin")
	fs.StringVar(&pb, "put-budget", "512M", "about the most bytes of fresh pages a strata put case holds (it deletes the oldest as it runs); a mooncake put case stops after writing this much")
	fs.IntVar(&cfg.lookupKeys, "lookup-keys", 1000, "keys per lookup")
	fs.BoolVar(&cfg.events, "events", false, "measure each strata transport also on a node that publishes the tenant's KV event stream to a subscriber this process runs, as system strata-events (issue 43: the stream's cost)")
	fs.IntVar(&cfg.batch, "batch", 1, "pages one put or get moves: strata one Put or Get of that many pages, Redis as many SETs or GETs pipelined; memcpy copies that many pages; systems without batches (tcp, mooncake, redis-py) skip put and get")
	fs.StringVar(&h, "host-bytes", "1G", "host tier of the in-process node")
	fs.StringVar(&cfg.oldNode, "old-node", "", "a stratad binary (an older build) whose node is measured too, as system strata-old (one per transport), with this build's client, taking turns with the others")
	fs.IntVar(&cfg.nodeProcs, "node-procs", 0, "GOMAXPROCS of the strata node's process: the CPUs its goroutines run on at once (0: Go's default, every CPU)")
	fs.StringVar(&cfg.mooncakePython, "mooncake-python", os.Getenv(load.MooncakePythonEnv),
		"Python interpreter with the mooncake-transfer-engine-non-cuda wheel, for the mooncake and redis-py systems (default $"+load.MooncakePythonEnv+")")
	fs.StringVar(&cfg.token, "token", os.Getenv("STRATA_TOKEN"), "tenant token (default $STRATA_TOKEN)")
	fs.StringVar(&cfg.out, "out", "strata-load-out", "directory for results.md, results.csv and the plots")
	quiet := fs.Bool("quiet", false, "no progress bar")
	addTransferFlags(fs, &cfg.transfer)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *quiet {
		cfg.progress = nil
	}
	if cfg.rounds < 1 {
		return cfg, fmt.Errorf("--rounds: %d, want at least 1", cfg.rounds)
	}
	switch {
	case cfg.nodeProcs < 0:
		return cfg, fmt.Errorf("--node-procs: %d, want 0 (Go's default) or more", cfg.nodeProcs)
	case cfg.nodeProcs > 0 && (cfg.inProcess || cfg.addr != ""):
		return cfg, errors.New("--node-procs: only for the node strata-load starts in a process of its own (no --in-process, no --addr)")
	case cfg.oldNode != "" && (cfg.inProcess || cfg.addr != ""):
		return cfg, errors.New("--old-node: only beside the node strata-load starts in a process of its own (no --in-process, no --addr)")
	}
	var err error
	cfg.systems, cfg.transports = split(systems), split(transports)
	for _, o := range split(ops) {
		op, err := load.ParseOp(o)
		if err != nil {
			return cfg, err
		}
		cfg.ops = append(cfg.ops, op)
	}
	for _, s := range split(sizes) {
		n, err := parseBytes(s)
		if err != nil {
			return cfg, fmt.Errorf("--sizes: %w", err)
		}
		cfg.sizes = append(cfg.sizes, int(n))
	}
	for _, s := range split(conc) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("--concurrency: %q", s)
		}
		cfg.conc = append(cfg.conc, n)
	}
	ws64, err := parseBytes(ws)
	if err != nil {
		return cfg, fmt.Errorf("--working-set: %w", err)
	}
	pb64, err := parseBytes(pb)
	if err != nil {
		return cfg, fmt.Errorf("--put-budget: %w", err)
	}
	if cfg.hostBytes, err = parseBytes(h); err != nil {
		return cfg, fmt.Errorf("--host-bytes: %w", err)
	}
	cfg.workingSet, cfg.putBudget = int(ws64), int(pb64)
	return cfg, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseBytes reads 4096, 64K, 256KiB, 1M, 2GiB (K, M, G are powers of 1024).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult, t = 1<<10, t[:len(t)-1]
		case 'M':
			mult, t = 1<<20, t[:len(t)-1]
		case 'G':
			mult, t = 1<<30, t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// run starts the systems, measures, and writes the report.
func run(ctx context.Context, cfg config) (err error) {
	if cfg.transfer.on {
		return runTransfer(ctx, cfg)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	systems, closeAll, err := startSystems(ctx, cfg)
	defer func() { err = errors.Join(err, closeAll()) }()
	if err != nil {
		return err
	}
	started := time.Now().UTC()
	results, runErr := load.Run(ctx, load.Config{Ops: cfg.ops, PageSizes: cfg.sizes, Concurrency: cfg.conc,
		Duration: cfg.duration, Warmup: cfg.warmup, Settle: cfg.settle, Rounds: cfg.rounds, WorkingSet: cfg.workingSet, PutBudget: cfg.putBudget,
		LookupKeys: cfg.lookupKeys, Batch: cfg.batch, Progress: cfg.progress}, systems)
	if len(results) == 0 {
		return runErr
	}
	err = errors.Join(runErr, writeReport(cfg, started, results))
	if failed := load.Failed(results); len(failed) > 0 {
		// The report holds every case; the exit status says some failed.
		var b strings.Builder
		fmt.Fprintf(&b, "%d of %d cases failed (their rows in results.md say why):", len(failed), len(results))
		for _, r := range failed {
			fmt.Fprintf(&b, "\n%s %s %s ×%d: %s", r.System, r.Op, load.SizeLabel(r.PageBytes), r.Workers, r.Err)
		}
		err = errors.Join(err, errors.New(b.String()))
	}
	return err
}
