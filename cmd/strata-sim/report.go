package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// writeTable prints the rows as a markdown table.
func writeTable(w io.Writer, cfg config, t *trace, rows []row) {
	writeSetup(w, cfg, t)
	multi := max(cfg.Placements, 1) > 1
	head := "| size | capacity (KV bytes = blocks) | policy | prefill FLOPs saved | vs lru |"
	if multi {
		head += " vs lru (min … max) |"
	}
	head += " of its bound (Belady form) | token hit rate | orphaned bytes, % of capacity (mean / max) | evictions | rejected puts | spilled puts |"
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, "|"+strings.Repeat("---:|", strings.Count(head, "|")-1))
	for _, r := range rows {
		rel, spread := "—", ""
		if r.ok && r.variant != "lru" {
			rel = fmt.Sprintf("%+.1f%%", 100*r.vsLRU)
			spread = fmt.Sprintf(" %+.1f%% … %+.1f%% |", 100*r.vsLRUMin, 100*r.vsLRUMax)
		} else {
			spread = " — |"
		}
		line := fmt.Sprintf("| %g%% | %.1f GiB = %.0f | %s | %.2f%% | %s |", r.sizePct, r.capacity/(1<<30), r.blocks, r.variant, 100*r.saved, rel)
		if multi {
			line += spread
		}
		bound := "—"
		if r.bound != "" {
			bound = fmt.Sprintf("%.0f%% (%s)", 100*r.ofBound, r.bound)
		}
		line += fmt.Sprintf(" %s | %.2f%% | %.3f / %.3f | %.0f | %.0f | %.0f |",
			bound, 100*r.hit, 100*r.orphanMean, 100*r.orphanMax, r.evictions, r.rejected, r.spilled)
		fmt.Fprintln(w, line)
	}
}

// writeSetup prints the line that states the trace and the cluster.
func writeSetup(w io.Writer, cfg config, t *trace) {
	ratios := make([]string, len(cfg.Ratios))
	for i, r := range cfg.Ratios {
		ratios[i] = fmt.Sprint(r)
	}
	placement := "weighted by capacity"
	if cfg.EqualPlacement {
		placement = "equal weights"
	}
	once := 0
	for i := range t.blocks {
		if len(t.blocks[i].uses) == 1 {
			once++
		}
	}
	fmt.Fprintf(w, "trace %s: %d requests, %d distinct blocks (%.1f GiB of KV), %.0f%% of them used by one request only; %d nodes, capacity ratios %s, placement %s, %d placement(s); model %.3g params, %d layers, %d heads × %d, %d KV heads\n\n",
		cfg.Trace, len(t.reqs), len(t.blocks), float64(t.bytes)/(1<<30), 100*float64(once)/float64(len(t.blocks)), cfg.Nodes, strings.Join(ratios, ":"), placement, max(cfg.Placements, 1),
		cfg.Profile.Params, cfg.Profile.Layers, cfg.Profile.Heads, cfg.Profile.HeadDim, cfg.Profile.KVHeads)
}

// jsonReport is the --json output: the replay's setup and one row per
// cache size × policy, with the absolute figures a real cluster's metrics
// can be compared with (FLOPs saved, hit-prefix tokens) next to the
// fractions of the table.
type jsonReport struct {
	Requests       int       `json:"requests"`
	Blocks         int       `json:"blocks"`
	KVBytes        int64     `json:"kv_bytes"`
	Nodes          int       `json:"nodes"`
	Ratios         []float64 `json:"capacity_ratios"`
	EqualPlacement bool      `json:"equal_placement"`
	Placements     int       `json:"placements"`
	Every          int       `json:"every"`
	Slice          int       `json:"slice"`
	Epoch          int       `json:"epoch"`
	Model          jsonModel `json:"model"`
	Rows           []jsonRow `json:"rows"`
}

type jsonModel struct {
	Params     float64 `json:"params"`
	Layers     int     `json:"layers"`
	Heads      int     `json:"heads"`
	HeadDim    int     `json:"head_dim"`
	KVHeads    int     `json:"kv_heads"`
	PageTokens int     `json:"page_tokens"`
}

// jsonRow is one row; figures are means over placements.
type jsonRow struct {
	SizePct       float64  `json:"size_pct"`
	Policy        string   `json:"policy"`
	CapacityBytes float64  `json:"capacity_bytes"`
	CapacityPages float64  `json:"capacity_blocks"`
	FLOPsSaved    float64  `json:"flops_saved"`
	FLOPsTotal    float64  `json:"flops_total"`
	SavedFrac     float64  `json:"flops_saved_frac"`
	HitTokens     float64  `json:"hit_tokens"`
	Tokens        float64  `json:"tokens"`
	HitRate       float64  `json:"token_hit_rate"`
	VsLRU         *float64 `json:"vs_lru,omitempty"` // saved / lru's saved − 1
	VsLRUMin      *float64 `json:"vs_lru_min,omitempty"`
	VsLRUMax      *float64 `json:"vs_lru_max,omitempty"`
	Bound         string   `json:"bound,omitempty"`    // the Belady form it is measured against
	OfBound       *float64 `json:"of_bound,omitempty"` // saved / the bound's saved
	OrphanMean    float64  `json:"orphaned_frac_mean"` // of capacity
	OrphanMax     float64  `json:"orphaned_frac_max"`
	Evictions     float64  `json:"evictions"`
	Rejected      float64  `json:"rejected_puts"`
	Spilled       float64  `json:"spilled_puts"`
}

// writeJSON prints the rows as one indented JSON document.
func writeJSON(w io.Writer, cfg config, t *trace, rows []row) error {
	rep := jsonReport{Requests: len(t.reqs), Blocks: len(t.blocks), KVBytes: t.bytes, Nodes: cfg.Nodes,
		Ratios: cfg.Ratios, EqualPlacement: cfg.EqualPlacement, Placements: max(cfg.Placements, 1),
		Every: cfg.Every, Slice: cfg.Slice, Epoch: cfg.Epoch,
		Model: jsonModel{Params: cfg.Profile.Params, Layers: cfg.Profile.Layers, Heads: cfg.Profile.Heads,
			HeadDim: cfg.Profile.HeadDim, KVHeads: cfg.Profile.KVHeads, PageTokens: cfg.Profile.PageTokens},
		Rows: make([]jsonRow, 0, len(rows))}
	for _, r := range rows {
		jr := jsonRow{SizePct: r.sizePct, Policy: r.variant, CapacityBytes: r.capacity, CapacityPages: r.blocks,
			FLOPsSaved: r.flopsSaved, FLOPsTotal: r.flopsTotal, SavedFrac: r.saved,
			HitTokens: r.hitTokens, Tokens: r.tokens, HitRate: r.hit,
			OrphanMean: r.orphanMean, OrphanMax: r.orphanMax,
			Evictions: r.evictions, Rejected: r.rejected, Spilled: r.spilled}
		if r.ok && r.variant != "lru" {
			jr.VsLRU, jr.VsLRUMin, jr.VsLRUMax = &r.vsLRU, &r.vsLRUMin, &r.vsLRUMax
		}
		if r.bound != "" {
			jr.Bound, jr.OfBound = r.bound, &r.ofBound
		}
		rep.Rows = append(rep.Rows, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}
