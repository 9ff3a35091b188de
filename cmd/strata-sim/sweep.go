package main

import (
	"fmt"
	"io"
	"strings"
)

// The half-life sweep (--half-lives, issue 44): ours-node replayed once
// per candidate half-life, fixed, beside the policies --policies names
// (lru, ours-node and ours-global with the learned half-life, belady), one
// row per size, so that one can read where the learned half-life loses
// and which fixed candidate a per-size selector would have to find. Every
// figure is the percent of prefill FLOPs saved, averaged over placements.
//
// Per workload:
//
//	for w in ../shared/data/mooncake_synthetic_trace.jsonl gen:conversation gen:agent gen:recency gen:scan; do
//		go run ./cmd/strata-sim --trace $w --policies lru,ours-node,ours-global,belady \
//			--half-lives 0.125,0.25,0.5,1,2,4,8
//	done

// sweepName is the policy name of the candidate with half-life h.
func sweepName(h float64) string { return fmt.Sprintf("hl=%g", h) }

// sweepVariant is ours-node with half-life h fixed, named sweepName(h).
func sweepVariant(h float64) variant {
	v, _ := variantByName("ours-node")
	v.name, v.halfLife = sweepName(h), h
	return v
}

// writeSweep prints the sweep table: one row per size, one column per
// policy in cfg.Policies' order, then the best candidate, its margin over
// lru and the learned ours-node's distance from it in points.
func writeSweep(w io.Writer, cfg config, t *trace, rows []row) {
	writeSetup(w, cfg, t)
	head := "| size |"
	for _, v := range cfg.Policies {
		head += " " + v.name + " |"
	}
	head += " best fixed | best fixed vs lru | ours-node − best fixed (points) |"
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, "|"+strings.Repeat("---:|", strings.Count(head, "|")-1))
	for _, size := range cfg.Sizes {
		saved := map[string]row{}
		for _, r := range rows {
			if r.sizePct == size {
				saved[r.variant] = r
			}
		}
		line := fmt.Sprintf("| %g%% |", size)
		for _, v := range cfg.Policies {
			line += fmt.Sprintf(" %.2f |", 100*saved[v.name].saved)
		}
		best, found := row{}, false
		for _, h := range cfg.HalfLives {
			if r := saved[sweepName(h)]; !found || r.saved > best.saved {
				best, found = r, true
			}
		}
		rel, gap := "—", "—"
		if best.ok {
			rel = fmt.Sprintf("%+.1f%%", 100*best.vsLRU)
		}
		if learned, ok := saved["ours-node"]; ok {
			gap = fmt.Sprintf("%+.2f", 100*(learned.saved-best.saved))
		}
		line += fmt.Sprintf(" %s | %s | %s |", best.variant, rel, gap)
		fmt.Fprintln(w, line)
	}
}
