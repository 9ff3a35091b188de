package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/stratakv/strata/eviction/coord"
)

// result is one cluster size's figures.
type result struct {
	N             int
	Start         timed   // until quorum of the N see all N alive
	GossipBytes   float64 // per member per second
	GossipMsgs    float64 // per member per second
	ViewUpdates   float64 // a member's view changes per second: a watching client's updates
	Crash, Join   timed
	Leave         timed
	LeaveSeenDead int     // members that saw the leaver Dead, not Left
	Lost          float64 // share of packets lost
	NoticeMsgs    int     // per evicted parent
	ChildHintMsgs int     // per child hint
	EvictionMsgs  int     // per evicted parent: its children's hints and its notice
	Moved         movement
	CoordRound    time.Duration
	CoordAlloc    uint64        // bytes
	Collect       time.Duration // one round's collection of reports
	CollectGot    int           // reports that came
	CollectAsked  int           // members asked
	Dilate        float64       // --dilate
	Cores         float64       // the process's CPU time over Elapsed
	Elapsed       time.Duration
	Err           string
}

// run measures every size in cfg.Sizes in turn and writes the table.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var results []result
	for _, n := range cfg.Sizes {
		start, cpu := time.Now(), cpuTime()
		r, err := measure(ctx, cfg, n)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			r.Err = err.Error()
		}
		r.Elapsed = time.Since(start)
		r.Cores = (cpuTime() - cpu).Seconds() / r.Elapsed.Seconds()
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

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// wall is d of the simulated cluster's time in wall time (--dilate).
func (cfg config) wall(d time.Duration) time.Duration { return time.Duration(float64(d) * cfg.Dilate) }

// sim is t in the simulated cluster's time (--dilate).
func (t timed) sim(cfg config) timed {
	t.D = time.Duration(float64(t.D) / cfg.Dilate)
	return t
}

// measure runs one cluster of n members through every phase.
func measure(ctx context.Context, cfg config, n int) (result, error) {
	r := result{N: n, Dilate: cfg.Dilate}
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
	c, err := startCluster(ctx, n, cfg)
	if err != nil {
		return r, err
	}
	defer c.Close()
	stopProgress := c.progress(cfg, start)
	r.Start, err = converge(ctx, c, cfg, start)
	stopProgress()
	r.Start = r.Start.sim(cfg)
	if err != nil {
		return r, err
	}
	if err := sleep(ctx, cfg.wall(cfg.Quiet)); err != nil {
		return r, err
	}
	if r.GossipBytes, r.GossipMsgs, r.ViewUpdates, err = gossipRate(ctx, c, cfg.wall(cfg.Window)); err != nil {
		return r, err
	}
	r.GossipBytes, r.GossipMsgs, r.ViewUpdates = r.GossipBytes*cfg.Dilate, r.GossipMsgs*cfg.Dilate, r.ViewUpdates*cfg.Dilate
	if s := c.net.Stats(); s.Packets > 0 {
		r.Lost = float64(s.Lost) / float64(s.Packets)
	}
	if r.Collect, r.CollectGot, r.CollectAsked, err = collectRound(ctx, c, cfg.wall(coord.DefaultRound/4)); err != nil {
		return r, err
	}
	r.Collect = time.Duration(float64(r.Collect) / cfg.Dilate)
	r.Crash = crash(ctx, c, cfg.wall(cfg.PhaseTimeout)).sim(cfg)
	if r.Join, err = join(ctx, c, cfg.wall(cfg.PhaseTimeout)); err != nil {
		return r, err
	}
	r.Join = r.Join.sim(cfg)
	r.Leave, r.LeaveSeenDead = leave(ctx, c, cfg.wall(cfg.PhaseTimeout), cfg.wall(time.Second))
	r.Leave = r.Leave.sim(cfg)
	return r, ctx.Err()
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
