package coord

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/stratakv/strata/membership"
)

// Summaries reach the coordinator as reports (membership.Collect), not in
// gossip metadata: each round the coordinator asks the members whose
// reports it holds are oldest (never received first), at most
// Config.ReportRate a second, and merges the latest report of every alive
// member. Up to ReportRate × Round members (200 by default) every member is
// asked every round; past that each member's report is at most about
// N / ReportRate seconds old (10 s at a thousand), and what the
// coordinator takes in stays about ReportRate reports a second (some
// 30 KB/s with two tiers) whatever N. A member that does not answer (a
// lost packet, a node of an older release) keeps its last report until it
// is StaleCycles cycles old, and a member of an older release that still
// gossips its summaries in its metadata is merged from those.

// DefaultReportRate is Config.ReportRate's default.
const DefaultReportRate = 100

// staleCycles is how many collection cycles (the time to ask every
// member once) a report stays in the merge without a newer one.
const staleCycles = 4

// report is a member's summaries as it last reported them.
type report struct {
	summary []byte
	at      time.Time
}

// collector is the coordinator's reports: the latest of each member.
// Only the loop's goroutine uses it.
type collector struct {
	byNode map[string]report
}

// collect asks the members due for a report, waiting at most wait, and
// returns alive with each member's Meta.Summary set to its latest report
// (left as gossiped where there is none).
func (c *collector) collect(ctx context.Context, members Members, alive []membership.Member, perRound int,
	round, wait time.Duration) []membership.Member {
	now := time.Now()
	if c.byNode == nil {
		c.byNode = make(map[string]report, len(alive))
	}
	due := make([]string, 0, len(alive))
	for _, m := range alive {
		due = append(due, m.NodeID)
	}
	// Oldest first; never received (the zero time) before all.
	slices.SortStableFunc(due, func(a, b string) int { return c.byNode[a].at.Compare(c.byNode[b].at) })
	due = due[:min(len(due), max(perRound, 1))]
	if len(due) > 0 {
		cctx, cancel := context.WithTimeout(ctx, wait)
		got, err := members.Collect(cctx, due)
		cancel()
		if err == nil {
			for id, s := range got {
				c.byNode[id] = report{summary: s, at: now}
			}
		}
	}
	cycles := (len(alive) + perRound - 1) / max(perRound, 1)
	stale := time.Duration(staleCycles*cmp.Or(cycles, 1)) * round
	out := slices.Clone(alive)
	live := make(map[string]bool, len(out))
	for i := range out {
		live[out[i].NodeID] = true
		if r, ok := c.byNode[out[i].NodeID]; ok && now.Sub(r.at) <= stale && len(r.summary) > 0 {
			out[i].Meta.Summary = r.summary
		}
	}
	for id, r := range c.byNode {
		if !live[id] || now.Sub(r.at) > stale {
			delete(c.byNode, id)
		}
	}
	return out
}
