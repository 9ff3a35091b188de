package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// result is one cluster size's figures.
type result struct {
	N              int
	Start          timed   // until quorum of the N see all N alive
	GossipBytes    float64 // per member per second
	GossipMsgs     float64 // per member per second
	Crash, Join    timed
	Leave          timed
	LeaveSeenDead  int     // members that saw the leaver Dead, not Left
	Lost           float64 // share of packets lost
	NoticeMsgs     int     // per evicted parent
	ChildHintMsgs  int     // per child hint
	EvictionMsgs   int     // per evicted parent: its children's hints and its notice
	Moved          movement
	CoordRound     time.Duration
	CoordAlloc     uint64 // bytes
	CoordSummaries int    // members whose summaries the round had
	CoordMembers   int
	Elapsed        time.Duration
	Err            string
}

// run measures every size in cfg.Sizes in turn and writes the table.
func run(ctx context.Context, cfg config, out io.Writer) error {
	var results []result
	for _, n := range cfg.Sizes {
		start := time.Now()
		r, err := measure(ctx, cfg, n)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			r.Err = err.Error()
		}
		r.Elapsed = time.Since(start)
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "strata-cluster-sim: N=%d done in %v\n", n, r.Elapsed.Round(time.Second))
	}
	if err := writeMarkdown(out, results); err != nil {
		return err
	}
	if cfg.CSV == "" {
		return nil
	}
	f, err := os.Create(cfg.CSV)
	if err != nil {
		return err
	}
	if err := writeCSV(f, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// measure runs one cluster of n members through every phase.
func measure(ctx context.Context, cfg config, n int) (result, error) {
	r := result{N: n}
	var err error
	if r.NoticeMsgs, r.ChildHintMsgs, r.EvictionMsgs, err = hintMessages(n); err != nil {
		return r, err
	}
	if r.Moved, err = moved(n, cfg.Keys); err != nil {
		return r, err
	}
	if r.CoordRound, r.CoordAlloc, err = coordRound(n, cfg.Rounds); err != nil {
		return r, err
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	c, err := startCluster(sctx, n, cfg)
	cancel()
	if err != nil {
		return r, err
	}
	defer c.Close()
	if r.Start, err = converge(ctx, c, start, cfg.PhaseTimeout); err != nil {
		return r, err
	}
	if r.GossipBytes, r.GossipMsgs, err = gossipRate(ctx, c, cfg.Window); err != nil {
		return r, err
	}
	if s := c.net.Stats(); s.Packets > 0 {
		r.Lost = float64(s.Lost) / float64(s.Packets)
	}
	r.CoordSummaries, r.CoordMembers = withSummaries(c.members[0]), n
	r.Crash = crash(ctx, c, cfg.PhaseTimeout)
	if r.Join, err = join(ctx, c, cfg.PhaseTimeout); err != nil {
		return r, err
	}
	r.Leave, r.LeaveSeenDead = leave(ctx, c, cfg.PhaseTimeout)
	return r, ctx.Err()
}
