package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// run loads the trace, replays every placement × size × policy and prints
// the table.
func run(ctx context.Context, cfg config, w io.Writer) error {
	if cfg.WriteTrace != "" {
		recs, gen, err := genSource(cfg.Trace)
		if err != nil {
			return err
		}
		if !gen {
			return fmt.Errorf("--write-trace: --trace %s is a file already", cfg.Trace)
		}
		if err := writeTraceFile(cfg.WriteTrace, recs); err != nil {
			return err
		}
	}
	t, err := loadTrace(cfg.Trace, cfg.Profile.PageTokens, cfg.Every, cfg.Slice)
	if err != nil {
		return err
	}
	results, err := simulate(ctx, t, cfg)
	if err != nil {
		return err
	}
	rows := aggregate(results, cfg)
	if cfg.JSON {
		return writeJSON(w, cfg, t, rows)
	}
	if len(cfg.HalfLives) > 0 {
		writeSweep(w, cfg, t, rows)
	} else {
		writeTable(w, cfg, t, rows)
	}
	writeChoices(w, cfg, results)
	return nil
}

// simulate replays every placement × size × policy in parallel.
func simulate(ctx context.Context, t *trace, cfg config) ([]result, error) {
	bpt := cfg.Profile.KVBytesPerToken()
	t.bytes = 0
	for i := range t.blocks {
		t.bytes += int64(t.blocks[i].tokens) * bpt
	}
	var sum float64
	for _, r := range cfg.Ratios {
		sum += r
	}
	var jobs []simConfig
	for seed := range max(cfg.Placements, 1) {
		for _, size := range cfg.Sizes {
			total := float64(t.bytes) * size / 100
			caps := make([]int64, len(cfg.Ratios))
			for i, r := range cfg.Ratios {
				caps[i] = int64(total * r / sum)
			}
			for _, v := range cfg.Policies {
				jobs = append(jobs, simConfig{variant: v, profile: cfg.Profile, capacities: caps,
					epoch: cfg.Epoch, sizePct: size, seed: seed, equalPlace: cfg.EqualPlacement, halfLife: cmp.Or(v.halfLife, cfg.HalfLife), history: cfg.History, admitShare: cfg.AdmitShare})
			}
		}
	}
	results := make([]result, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, sc := range jobs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			res, err := replay(t, sc)
			if err != nil {
				errs[i] = fmt.Errorf("%s at %g%%: %w", sc.variant.name, sc.sizePct, err)
				return
			}
			results[i] = res
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// row is one line of the report: a policy at a size, over all placements.
type row struct {
	variant string
	sizePct float64
	n       int // placements

	saved, hit float64 // means of the fractions
	// vsLRU is FLOPs saved relative to per-node LRU on the same placement,
	// minus one: mean, min and max over placements (ok false without lru).
	vsLRU, vsLRUMin, vsLRUMax float64
	ok                        bool
	// ofBound is FLOPs saved over what the variant's Belady form saves on
	// the same placement (mean over placements; bound "" without it).
	ofBound float64
	bound   string

	orphanMean, orphanMax        float64
	evictions, rejected, spilled float64 // means

	// Means of the absolute figures, for comparison with a real cluster's
	// metrics over the same requests.
	flopsSaved, flopsTotal float64
	hitTokens, tokens      float64
	capacity               float64 // bytes, all nodes
	blocks                 float64 // pages, all nodes
}

// aggregate folds the results of every placement into one row per size ×
// policy, in the order of cfg.Sizes and cfg.Policies.
func aggregate(results []result, cfg config) []row {
	lru := map[[2]float64]float64{} // (seed, size) → lru's saved fraction
	type at struct {
		name string
		seed int
		size float64
	}
	bounds := map[at]float64{} // the Belady forms' saved fractions
	for _, r := range results {
		if r.variant == "lru" {
			lru[[2]float64{float64(r.seed), r.sizePct}] = r.savedFrac()
		}
		if r.variant == "belady" || r.variant == "belady-bypass" {
			bounds[at{r.variant, r.seed, r.sizePct}] = r.savedFrac()
		}
	}
	nBound := 0
	var rows []row
	for _, size := range cfg.Sizes {
		for _, v := range cfg.Policies {
			w := row{variant: v.name, sizePct: size}
			nBound = 0
			for _, r := range results {
				if r.variant != v.name || r.sizePct != size {
					continue
				}
				w.n++
				if b, ok := bounds[at{v.bound(), r.seed, size}]; ok && b > 0 {
					w.bound = v.bound()
					w.ofBound += r.savedFrac() / b
					nBound++
				}
				w.saved += r.savedFrac()
				w.hit += r.hitFrac()
				w.orphanMean += r.orphanMean
				w.orphanMax = max(w.orphanMax, r.orphanMax)
				w.evictions += float64(r.evictions)
				w.rejected += float64(r.rejected)
				w.spilled += float64(r.spilled)
				w.flopsSaved += r.flopsSaved
				w.flopsTotal += r.flopsTotal
				w.hitTokens += float64(r.hitTokens)
				w.tokens += float64(r.tokens)
				w.capacity += float64(r.capacity)
				w.blocks += float64(r.blocks)
				if base, ok := lru[[2]float64{float64(r.seed), size}]; ok && base > 0 {
					rel := r.savedFrac()/base - 1
					if !w.ok {
						w.vsLRUMin, w.vsLRUMax = rel, rel
					}
					w.ok = true
					w.vsLRU += rel
					w.vsLRUMin = min(w.vsLRUMin, rel)
					w.vsLRUMax = max(w.vsLRUMax, rel)
				}
			}
			if w.n == 0 {
				continue
			}
			if nBound > 0 {
				w.ofBound /= float64(nBound)
			}
			for _, f := range []*float64{&w.saved, &w.hit, &w.orphanMean, &w.evictions, &w.rejected, &w.spilled,
				&w.flopsSaved, &w.flopsTotal, &w.hitTokens, &w.tokens, &w.capacity, &w.blocks, &w.vsLRU} {
				*f /= float64(w.n) // sums to means
			}
			rows = append(rows, w)
		}
	}
	return rows
}
