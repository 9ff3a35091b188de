package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/store"
)

// config is the simulator's command line.
type config struct {
	Trace    string                  // trace path; required
	Nodes    int                     // simulated nodes; default 4
	Ratios   []float64               // capacity ratios, one per node; default equal
	Sizes    []float64               // total cache sizes, % of the trace's distinct KV bytes; default 5,10,25,50
	Profile  eviction.ComputeProfile // default 70B-class
	Policies []variant               // default all
	Epoch    int                     // requests between cutoff recomputations; default 50
	Every    int                     // replay every n-th request; default 1
	// Placements is how many placements (node ID sets) to replay each
	// configuration over; results are averaged. Default 1.
	Placements int
	// EqualPlacement weights placement equally whatever the capacities
	// (a cluster whose placement does not follow capacity); default false.
	EqualPlacement bool
	// Slice replays only the first Slice requests (after --every); 0, the
	// default, replays them all. Cache sizes are then shares of the slice's
	// distinct blocks.
	Slice int
	// WriteTrace, when set, is a file the generated trace (--trace gen:...)
	// is written to before the replay.
	WriteTrace string
	// JSON prints the results as one JSON document instead of a table.
	JSON bool
	// HalfLife fixes KindCost's half-life in tier capacities (page
	// operations per page the node holds; store.EvictionTuning.HalfLife);
	// 0, the default, lets the policy learn it from
	// eviction.DefaultHalfLife (1 capacity).
	HalfLife float64
	// HalfLives, when set, is the sweep's candidate half-lives: ours-node
	// is replayed once more with each fixed, and the report is the sweep
	// table (sweep.go) instead of the full one; default none.
	HalfLives []float64
	// AdmitShare is the share of the cluster-wide cutoff below which the
	// stores refuse a put (store.EvictionTuning.AdmitShare; only
	// ours-global sets a cutoff); 0, the default, leaves
	// eviction.DefaultAdmitShare.
	AdmitShare float64
	// History sizes the cost policy's frequency history in tier
	// capacities (store.EvictionTuning.History); 0, the default, leaves
	// the policy's own (8).
	History float64
}

func parseFlags(args []string) (config, error) {
	var (
		cfg      config
		ratios   string
		sizes    string
		policies string
		sweep    string
	)
	fs := flag.NewFlagSet("strata-sim", flag.ContinueOnError)
	fs.StringVar(&cfg.Trace, "trace", "", "Mooncake-format JSON-lines trace (timestamp, input_length, output_length, hash_ids), or gen:NAME[:SEED] for a generated workload ("+workloadNames()+")")
	fs.StringVar(&cfg.WriteTrace, "write-trace", "", "write the generated trace (--trace gen:...) to this file as JSON lines, whole, then replay it")
	fs.IntVar(&cfg.Nodes, "nodes", 4, "simulated nodes")
	fs.StringVar(&ratios, "capacity-ratios", "equal", "per-node capacity ratios, e.g. 1:1:2:4, or equal")
	fs.StringVar(&sizes, "sizes", "5,10,25,50", "total cache sizes as % of the trace's distinct KV bytes")
	fs.Float64Var(&cfg.Profile.Params, "model-params", 70e9, "model parameters N")
	fs.IntVar(&cfg.Profile.Layers, "layers", 80, "transformer layers")
	fs.IntVar(&cfg.Profile.Heads, "heads", 64, "attention heads")
	fs.IntVar(&cfg.Profile.HeadDim, "head-dim", 128, "attention head dimension")
	fs.IntVar(&cfg.Profile.KVHeads, "kv-heads", 8, "KV heads")
	fs.IntVar(&cfg.Profile.PageTokens, "page-tokens", 512, "tokens per trace block")
	fs.StringVar(&policies, "policies", "all", "comma-separated policies: "+variantNames()+", or all")
	fs.IntVar(&cfg.Epoch, "epoch", 50, "requests between cutoff recomputations (ours-global)")
	fs.IntVar(&cfg.Placements, "placements", 1, "replay over this many placements (node ID sets) and average; the table shows the spread")
	fs.BoolVar(&cfg.EqualPlacement, "equal-placement", false, "weight placement equally instead of by capacity")
	fs.IntVar(&cfg.Every, "every", 1, "replay every n-th request of the trace (sampling)")
	fs.IntVar(&cfg.Slice, "slice", 0, "replay only the first N requests (after --every); 0: all")
	fs.BoolVar(&cfg.JSON, "json", false, "print the results as JSON instead of a table")
	fs.Float64Var(&cfg.HalfLife, "half-life", 0, "fixed half-life of the cost policy's reuse counts, in page operations per page of capacity; 0: learned online")
	fs.StringVar(&sweep, "half-lives", "", "sweep: also replay ours-node with each of these fixed half-lives (comma-separated, e.g. 0.125,0.25,0.5,1,2,4,8) and print one row per size: lru, the learned policies, each candidate, the best fixed one, belady")
	fs.Float64Var(&cfg.History, "history", 0, "distinct recent keys the cost policy's frequency history remembers, per page of a node's capacity (2 bytes each); 0: the policy's default, 8")
	fs.Float64Var(&cfg.AdmitShare, "admit-share", 0, "share of the cluster-wide cutoff below which the stores of ours-global refuse a put, in (0, 1]; 0: the policy's default")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if cfg.Trace == "" {
		return config{}, errors.New("--trace is required")
	}
	if cfg.Nodes < 1 || cfg.Nodes > 127 {
		return config{}, fmt.Errorf("--nodes %d: want 1..127", cfg.Nodes)
	}
	var err error
	if cfg.Ratios, err = parseRatios(ratios, cfg.Nodes); err != nil {
		return config{}, err
	}
	if cfg.Sizes, err = parseFloats(sizes, ","); err != nil {
		return config{}, fmt.Errorf("--sizes: %w", err)
	}
	if cfg.Policies, err = parsePolicies(policies); err != nil {
		return config{}, err
	}
	if sweep != "" {
		if cfg.HalfLives, err = parseFloats(sweep, ","); err != nil {
			return config{}, fmt.Errorf("--half-lives: %w", err)
		}
		for _, h := range cfg.HalfLives {
			if err := (store.EvictionTuning{HalfLife: h}).Validate(); err != nil {
				return config{}, fmt.Errorf("--half-lives: %w", err)
			}
			cfg.Policies = append(cfg.Policies, sweepVariant(h))
		}
	}
	if cfg.Epoch < 1 || cfg.Every < 1 || cfg.Placements < 1 {
		return config{}, errors.New("--epoch, --every and --placements must be >= 1")
	}
	if err := (store.EvictionTuning{HalfLife: cfg.HalfLife, History: cfg.History}).Validate(); err != nil {
		return config{}, fmt.Errorf("--half-life or --history: %w", err)
	}
	if !(cfg.AdmitShare >= 0 && cfg.AdmitShare <= 1) {
		return config{}, fmt.Errorf("--admit-share %g: want a share in [0, 1]", cfg.AdmitShare)
	}
	if cfg.Slice < 0 {
		return config{}, fmt.Errorf("--slice %d: want >= 0", cfg.Slice)
	}
	return cfg, cfg.Profile.Validate()
}

func variantNames() string {
	vs := variants()
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.name
	}
	return strings.Join(names, ",")
}

func parsePolicies(s string) ([]variant, error) {
	if s == "all" || s == "" {
		return variants(), nil
	}
	var out []variant
	for _, name := range strings.Split(s, ",") {
		v, ok := variantByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("--policies: unknown policy %q (want %s)", name, variantNames())
		}
		out = append(out, v)
	}
	return out, nil
}

func parseRatios(s string, nodes int) ([]float64, error) {
	if s == "equal" || s == "" {
		r := make([]float64, nodes)
		for i := range r {
			r[i] = 1
		}
		return r, nil
	}
	r, err := parseFloats(s, ":")
	if err != nil {
		return nil, fmt.Errorf("--capacity-ratios: %w", err)
	}
	if len(r) != nodes {
		return nil, fmt.Errorf("--capacity-ratios %q: %d ratios for %d nodes", s, len(r), nodes)
	}
	return r, nil
}

func parseFloats(s, sep string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, sep) {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}
