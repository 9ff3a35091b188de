// Command strata-cluster-sim runs N strata members' cluster code in one
// process and measures what grows with N (issue 45, step 1): the shipped
// membership package over an in-process gossip network
// (membership.Config.Network, with the shipped timing defaults and
// metadata as a node advertises it; each member reports its value
// summaries when asked, membership.Collect), the shipped hint routing
// (peer.RouteKnown, peer.Holders), placement (package placement) and the
// coordinator's round (coord.Compute over N members' metadata with their
// reported summaries). Nothing is re-implemented. --dilate slows the
// whole protocol by a factor (membership.Config.TimeScale) so that N
// members in one process get the CPU each would have, and reports times
// in the cluster's time.
//
//	go run ./cmd/strata-cluster-sim --n 10,100,300,1000 --dilate 8 --profile lan --advertise 2s --csv cluster.csv
//
// For each N it starts N members (each joining three of up to 32 started
// before it, as a node joins three of the registered nodes; with --wave,
// in waves, each once the earlier members see each other alive, as a
// rolling deploy starts them), waits until all see all alive (--progress
// prints what they see meanwhile) and then --quiet more, for the start's
// last exchanges to pass, then reports:
//   - gossip bytes and messages per node per second over --window
//     (packets and streams, as they would cross UDP and TCP);
//   - the time until 99% of the others see a crash (Dead), a new member
//     (Alive) and a graceful leave (Left; members that see the leaver
//     Dead instead are counted apart), each bounded by --phase-timeout;
//   - the messages one evicted parent's gone notice costs (its four
//     children on their own keys' owners, whose child hints its
//     candidates recorded) and one child hint costs, and both together,
//     as RouteKnown groups them;
//   - the fraction of --keys keys whose owner changes on a join and on a
//     leave, beside the joiner's and the leaver's share of the capacity
//     weights (about 1/N) and whether each is within five standard
//     deviations plus a tenth of it ("moves as shares");
//   - the time (one thread: its CPU time) and bytes allocated by one
//     coordinator round, on N members' metadata built as the gossiping
//     members advertise it (so it is measured even where N members do not
//     converge); beside it, how long one round's collection of 200
//     members' reports took, and how many came;
//   - how often one member's view changed (a watching client's updates),
//     and the cores the process got.
//
// Output is a markdown table, one row per N, and with --csv the same as
// CSV. A cluster that does not converge within --phase-timeout is
// reported as such and its timed figures left empty.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/stratakv/strata/membership"
)

// config is the command line.
type config struct {
	Sizes  []int         // cluster sizes; default 10,100,300,1000
	Window time.Duration // gossip measuring window; default 10 s
	// Quiet is how long after the start (cluster time) the gossip window
	// opens, so that it measures the steady state and not the start's
	// last exchanges (each joiner's settling sync, 2-4 s after its join
	// with ProfileLAN). Default 10 s.
	Quiet        time.Duration
	PhaseTimeout time.Duration // bound on each timed phase; default 30 s
	Keys         int           // keys for the placement figures; default 100,000
	Rounds       int           // coordinator rounds timed; default 20
	CSV          string        // CSV output path; default none
	// Sockets gossips over loopback UDP and TCP instead of the in-process
	// network, to check the network against them; gossip is then not
	// counted. Default false.
	Sockets bool
	// Profile is the members' membership.Profile. Default local.
	Profile string
	// Compression overrides the profile's gossip compression (on, off);
	// "" keeps the profile's. Default "".
	Compression string
	// Advertise is how often each member re-advertises changed metadata,
	// as a node does each coordinator round (2 s by default); 0: never.
	// Default 0.
	Advertise time.Duration
	// Dilate runs the members' protocol this many times slower
	// (membership.Config.TimeScale: every interval and timeout, the
	// advertising and the phases' bounds too) and reports times divided
	// by it and rates multiplied, as a cluster whose members each had
	// Dilate times the CPU this process gives them would see. Default 1.
	Dilate float64
	// Wave starts the members in waves of this many, each once all
	// before it see each other alive, as a rolling deploy starts them;
	// 0: all at once. Default 0.
	Wave int
	// Progress is how often (in the cluster's time) the start prints what
	// the members see to stderr; 0: never. Default 0.
	Progress time.Duration
	// CPUProfile is where to write a CPU profile of the whole run (the
	// simulator's own overhead beside the members'). Default none.
	CPUProfile string
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("strata-cluster-sim", flag.ContinueOnError)
	sizes := fs.String("n", "10,100,300,1000", "cluster sizes, comma-separated")
	fs.DurationVar(&cfg.Window, "window", 10*time.Second, "gossip measuring window")
	fs.DurationVar(&cfg.Quiet, "quiet", 10*time.Second, "cluster time between the start and the gossip window")
	fs.DurationVar(&cfg.PhaseTimeout, "phase-timeout", 30*time.Second, "bound on each timed phase (start, crash, join, leave)")
	fs.IntVar(&cfg.Keys, "keys", 100_000, "keys for the placement figures")
	fs.IntVar(&cfg.Rounds, "rounds", 20, "coordinator rounds timed")
	fs.BoolVar(&cfg.Sockets, "sockets", false, "gossip over loopback sockets instead of the in-process network (gossip not counted)")
	fs.StringVar(&cfg.CSV, "csv", "", "also write the table as CSV to this file")
	fs.Float64Var(&cfg.Dilate, "dilate", 1, "run the protocol this many times slower, reporting times divided by it and rates multiplied (members get that much more CPU)")
	fs.IntVar(&cfg.Wave, "wave", 0, "start the members in waves of this many, each once the earlier see each other alive (a rolling start); 0: all at once")
	fs.DurationVar(&cfg.Progress, "progress", 0, "print what the members see this often during the start (cluster time); 0: never")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&cfg.Profile, "profile", "local", "membership profile: local, lan or wan")
	fs.StringVar(&cfg.Compression, "compression", "", "gossip compression, on or off (default the profile's)")
	fs.DurationVar(&cfg.Advertise, "advertise", 0, "how often each member re-advertises changed metadata (a node: every coordinator round, 2s); 0: never")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 {
			return cfg, fmt.Errorf("--n %q: sizes are integers of at least 3", *sizes)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if cfg.Window <= 0 || cfg.PhaseTimeout <= 0 || cfg.Keys <= 0 || cfg.Rounds <= 0 || cfg.Advertise < 0 || cfg.Quiet < 0 || cfg.Wave < 0 || !(cfg.Dilate >= 1) {
		return cfg, fmt.Errorf("--window, --phase-timeout, --keys and --rounds must be positive, --advertise, --quiet and --wave not negative, --dilate at least 1")
	}
	switch membership.Profile(cfg.Profile) {
	case membership.ProfileLocal, membership.ProfileLAN, membership.ProfileWAN:
	default:
		return cfg, fmt.Errorf("--profile %q: local, lan or wan", cfg.Profile)
	}
	switch membership.Compression(cfg.Compression) {
	case "", membership.CompressionOn, membership.CompressionOff:
	default:
		return cfg, fmt.Errorf("--compression %q: on or off", cfg.Compression)
	}
	return cfg, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata-cluster-sim:", err)
		os.Exit(2)
	}
	// The simulator's own overhead: the collector took a third of the CPU
	// at 300 members at the default 100 (400 held 2.6 GB there).
	debug.SetGCPercent(200)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "strata-cluster-sim:", err)
		os.Exit(1)
	}
}
