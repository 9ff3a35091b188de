package main

import (
	"fmt"
	"io"
	"strings"
)

// writeTable prints the rows as a markdown table.
func writeTable(w io.Writer, cfg config, t *trace, rows []row) {
	ratios := make([]string, len(cfg.Ratios))
	for i, r := range cfg.Ratios {
		ratios[i] = fmt.Sprint(r)
	}
	placement := "weighted by capacity"
	if cfg.EqualPlacement {
		placement = "equal weights"
	}
	fmt.Fprintf(w, "trace: %d requests, %d distinct blocks (%.1f GiB of KV); %d nodes, capacity ratios %s, placement %s, %d placement(s); model %.3g params, %d layers, %d heads × %d, %d KV heads\n\n",
		len(t.reqs), len(t.blocks), float64(t.bytes)/(1<<30), cfg.Nodes, strings.Join(ratios, ":"), placement, max(cfg.Placements, 1),
		cfg.Profile.Params, cfg.Profile.Layers, cfg.Profile.Heads, cfg.Profile.HeadDim, cfg.Profile.KVHeads)
	multi := max(cfg.Placements, 1) > 1
	head := "| size | policy | prefill FLOPs saved | vs lru |"
	if multi {
		head += " vs lru (min … max) |"
	}
	head += " token hit rate | orphaned bytes, % of capacity (mean / max) | evictions | rejected puts | spilled puts |"
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
		line := fmt.Sprintf("| %g%% | %s | %.2f%% | %s |", r.sizePct, r.variant, 100*r.saved, rel)
		if multi {
			line += spread
		}
		line += fmt.Sprintf(" %.2f%% | %.3f / %.3f | %.0f | %.0f | %.0f |",
			100*r.hit, 100*r.orphanMean, 100*r.orphanMax, r.evictions, r.rejected, r.spilled)
		fmt.Fprintln(w, line)
	}
}
