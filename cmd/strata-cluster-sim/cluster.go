package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/eviction/coord"
	"github.com/stratakv/strata/membership"
)

// cluster is N members over one in-process network. Close stops them all.
type cluster struct {
	net       *membership.Network
	sockets   bool                     // gossip over loopback sockets, not net
	profile   membership.Profile       // the members'
	compress  membership.Compression   // the members'; "": the profile's
	advertise time.Duration            // how often each re-advertises (wall time); 0: never
	dilate    float64                  // the members' membership.Config.TimeScale
	members   []*membership.Membership // nil once stopped
	ids       []string

	mu      sync.Mutex // guards started
	started []string   // the gossip addresses of members started

	stop chan struct{} // closed by Close: ends the advertisers
	wg   sync.WaitGroup
}

// seedSample is how many of the members started before it each member
// names as its seeds (a node names every node registered in etcd; its
// join picks membership.Config.JoinFanout of them at random).
const seedSample = 32

// startParallel is how many members start at once.
const startParallel = 16

// startCluster starts n members, each joining members started before it:
// all at once, or with cfg.Wave, in waves of that many, each wave started
// once every member of the ones before sees all of them alive (a rolling
// start). Each wave's starts are bounded by cfg.PhaseTimeout, and so is
// each wait between waves.
func startCluster(ctx context.Context, n int, cfg config) (*cluster, error) {
	c := &cluster{net: membership.NewNetwork(), sockets: cfg.Sockets, profile: membership.Profile(cfg.Profile),
		compress:  membership.Compression(cfg.Compression),
		advertise: cfg.wall(cfg.Advertise), dilate: cfg.Dilate, stop: make(chan struct{})}
	first, err := c.add(ctx, 0)
	if err != nil {
		return nil, err
	}
	c.members, c.ids = []*membership.Membership{first}, []string{nodeID(0)}
	c.members = append(c.members, make([]*membership.Membership, n-1)...)
	for i := 1; i < n; i++ {
		c.ids = append(c.ids, nodeID(i))
	}
	wave := cfg.Wave
	if wave <= 0 {
		wave = n
	}
	for lo := 1; lo < n; lo += wave {
		hi := min(n, lo+wave)
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, cfg.wall(cfg.PhaseTimeout))
		err := c.startWave(wctx, lo, hi)
		cancel()
		if err == nil && cfg.Wave > 0 && hi < n {
			var t timed
			t, err = converge(ctx, c, cfg, start)
			fmt.Fprintf(os.Stderr, "strata-cluster-sim: N=%d: %d started, all see all in %s s\n", n, hi, t.sim(cfg))
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// startWave starts members lo to hi-1, startParallel at a time (the
// first startParallel of the cluster one by one, so that each has one to
// join).
func (c *cluster) startWave(ctx context.Context, lo, hi int) error {
	errs := make([]error, hi)
	sem := make(chan struct{}, startParallel)
	var wg sync.WaitGroup
	for i := lo; i < hi; i++ {
		if i < startParallel {
			c.members[i], errs[i] = c.add(ctx, i)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.members[i], errs[i] = c.add(ctx, i)
		}()
	}
	wg.Wait()
	failed := slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d members failed to start; the first: %w", len(failed), hi-lo, failed[0])
	}
	return nil
}

func nodeID(i int) string { return fmt.Sprintf("node-%04d", i) }

// seeds returns up to seedSample of the members started so far, at random.
func (c *cluster) seeds() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.started) <= seedSample {
		return slices.Clone(c.started)
	}
	out := make([]string, 0, seedSample)
	for _, j := range rand.Perm(len(c.started))[:seedSample] {
		out = append(out, c.started[j])
	}
	return out
}

// add starts member i, joining members started before it, and its
// advertiser.
func (c *cluster) add(ctx context.Context, i int) (*membership.Membership, error) {
	meta, report := nodeMeta(i), nodeReport(i)
	var used atomic.Int64 // bumped by each re-advertisement
	cfg := membership.Config{NodeID: nodeID(i), Seeds: c.seeds(), Network: c.net, Profile: c.profile, Compression: c.compress,
		Report: func() []byte { return report }, TimeScale: c.dilate,
		Meta: func() membership.Meta {
			m := meta
			m.Tiers = slices.Clone(meta.Tiers)
			m.Tiers[0].Used += used.Load()
			return m
		}}
	if c.sockets {
		cfg.Network = nil
	}
	m, err := membership.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting member %d: %w", i, err)
	}
	c.mu.Lock()
	c.started = append(c.started, m.GossipAddress())
	c.mu.Unlock()
	if c.advertise > 0 {
		c.wg.Go(func() { c.readvertise(m, &used) })
	}
	return m, nil
}

// readvertise changes m's metadata and re-advertises it, paced as a node
// paces it (UpdateMetaPaced), every c.advertise (the first after a random part of it, so that members do
// not advertise in step), until m stops or c closes.
func (c *cluster) readvertise(m *membership.Membership, used *atomic.Int64) {
	t := time.NewTimer(rand.N(c.advertise))
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		used.Add(4096)
		ctx, cancel := context.WithTimeout(context.Background(), c.advertise)
		err := m.UpdateMetaPaced(ctx)
		cancel()
		if errors.Is(err, membership.ErrClosed) {
			return
		}
		t.Reset(c.advertise)
	}
}

// nodeMeta is what member i advertises in gossip: an address and a host
// and an ssd tier of distinct capacities (its value summaries go to the
// coordinator as reports, nodeReport).
func nodeMeta(i int) membership.Meta {
	m, _ := nodeMetaSums(i)
	return m
}

// nodeMetaSums is nodeMeta and a value summary of each tier.
func nodeMetaSums(i int) (membership.Meta, []eviction.Summary) {
	r := rand.New(rand.NewPCG(uint64(i), 45))
	m := membership.Meta{
		GRPCAddress: fmt.Sprintf("10.%d.%d.%d:7000", i>>16&255, i>>8&255, i&255),
		Tiers: []membership.TierMeta{
			{Kind: "host", Capacity: (64 + r.Int64N(192)) << 30},
			{Kind: "ssd", Capacity: (1 + r.Int64N(7)) << 40},
		},
	}
	sums := make([]eviction.Summary, len(m.Tiers))
	for t := range sums {
		s := &sums[t]
		s.Turnover, s.Lo = r.Float64()/60, int16(-40+r.IntN(8))
		for b := range s.Bytes {
			s.Bytes[b] = r.Int64N(m.Tiers[t].Capacity / eviction.SummaryBuckets)
			m.Tiers[t].Used += s.Bytes[b]
		}
	}
	return m, sums
}

// nodeReport is member i's value summaries as a node reports them to the
// coordinator that asks (coord.Coord.Report): not in its gossip metadata.
func nodeReport(i int) []byte {
	_, sums := nodeMetaSums(i)
	b, _, err := coord.EncodeSummaries(sums, membership.MaxReportSize)
	if err != nil {
		panic(err) // a fixed-size encoding of valid summaries
	}
	return b
}

// live returns the members not stopped.
func (c *cluster) live() []*membership.Membership {
	return slices.DeleteFunc(slices.Clone(c.members), func(m *membership.Membership) bool { return m == nil })
}

// Close stops every member, without leaving (the cluster goes down whole).
func (c *cluster) Close() {
	close(c.stop)
	c.wg.Wait()
	var wg sync.WaitGroup
	for _, m := range c.members {
		if m != nil {
			wg.Go(func() { _ = m.Shutdown() })
		}
	}
	wg.Wait()
	c.members = nil
}

// seenBy waits until a share q of members see cond hold (each watched on
// its subscription, cond re-evaluated at most every every), or timeout
// passes since start. It returns how long after start the q-th share did
// (ok false if they did not), and how many members ever saw it.
func seenBy(ctx context.Context, members []*membership.Membership, start time.Time, timeout, every time.Duration, q float64,
	cond func(*membership.Membership) bool) (d time.Duration, ok bool, saw int) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	need := max(1, int(q*float64(len(members))+0.999999))
	times := make(chan time.Duration, len(members))
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { watch(ctx, m, start, every, cond, times) })
	}
	go func() { wg.Wait(); close(times) }()
	for t := range times {
		saw++
		if saw == need {
			d, ok = t, true
			cancel()
		}
	}
	return d, ok, saw
}

// watch sends on times how long after start m first saw cond, if it did
// before ctx ended, re-evaluating cond at most every every.
func watch(ctx context.Context, m *membership.Membership, start time.Time, every time.Duration,
	cond func(*membership.Membership) bool, times chan<- time.Duration) {
	ch, unsubscribe := m.Subscribe()
	defer unsubscribe()
	tick := time.NewTimer(0)
	defer tick.Stop()
	for {
		if cond(m) {
			times <- time.Since(start)
			return
		}
		select {
		case <-ctx.Done():
			return
		case _, open := <-ch:
			if !open {
				return
			}
		}
		select { // coalesce bursts of changes
		case <-ctx.Done():
			return
		case <-tick.C:
			tick.Reset(every)
		}
	}
}

// stateIs returns a condition: a member sees id in state s.
func stateIs(id string, s membership.State) func(*membership.Membership) bool {
	return func(m *membership.Membership) bool {
		mem, ok := m.Member(id)
		return ok && mem.State == s
	}
}

// allAlive returns a condition: a member sees n members alive.
func allAlive(n int) func(*membership.Membership) bool {
	return func(m *membership.Membership) bool { return len(m.Alive()) == n }
}

// views summarises what the members see: the fewest and most members each
// holds alive, and how many views hold some member dead.
func (c *cluster) views() string {
	live := c.live()
	fewest, most, withDead, short := len(c.members), 0, 0, 0
	for _, m := range live {
		alive, dead := 0, 0
		for _, mem := range m.Members() {
			switch mem.State {
			case membership.Alive:
				alive++
			case membership.Dead:
				dead++
			}
		}
		fewest, most = min(fewest, alive), max(most, alive)
		if dead > 0 {
			withDead++
		}
		if alive < len(live) {
			short++
		}
	}
	s := c.net.Stats()
	return fmt.Sprintf("members see %d to %d alive; %d views miss a live member, %d hold a member dead; %d of %d packets lost",
		fewest, most, short, withDead, s.Lost, s.Packets)
}

// progress prints what the members see (views) to stderr every
// cfg.Progress of the cluster's time, from start, until the returned
// func is called.
func (c *cluster) progress(cfg config, start time.Time) (stop func()) {
	if cfg.Progress <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(cfg.wall(cfg.Progress))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(os.Stderr, "strata-cluster-sim: N=%d at %.1fs: %s\n", len(c.members),
					time.Since(start).Seconds()/cfg.Dilate, c.views())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
