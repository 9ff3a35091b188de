package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/eviction/coord"
	"github.com/stratakv/strata/membership"
)

// cluster is N members over one in-process network. Close stops them all.
type cluster struct {
	net     *membership.Network
	members []*membership.Membership // nil once stopped
	ids     []string
}

// seedCount is how many of the first members every other one joins.
const seedCount = 3

// startParallel is how many members start at once.
const startParallel = 16

// startCluster starts n members, each joining the first seedCount.
func startCluster(ctx context.Context, n int) (*cluster, error) {
	c := &cluster{net: membership.NewNetwork()}
	first, err := c.add(ctx, 0)
	if err != nil {
		return nil, err
	}
	c.members, c.ids = []*membership.Membership{first}, []string{nodeID(0)}
	c.members = append(c.members, make([]*membership.Membership, n-1)...)
	for i := 1; i < n; i++ {
		c.ids = append(c.ids, nodeID(i))
	}
	errs := make([]error, n)
	sem := make(chan struct{}, startParallel)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		if i <= seedCount { // the seeds join one by one, so each has one to join
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
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func nodeID(i int) string { return fmt.Sprintf("node-%04d", i) }

// add starts member i, joining the seeds among those started.
func (c *cluster) add(ctx context.Context, i int) (*membership.Membership, error) {
	var seeds []string
	for _, m := range c.members[:min(len(c.members), seedCount)] {
		if m != nil {
			seeds = append(seeds, m.GossipAddress())
		}
	}
	meta := nodeMeta(i)
	m, err := membership.Start(ctx, membership.Config{
		NodeID: nodeID(i), Seeds: seeds, Meta: func() membership.Meta { return meta }, Network: c.net,
	})
	if err != nil {
		return nil, fmt.Errorf("starting member %d: %w", i, err)
	}
	return m, nil
}

// nodeMeta is what member i advertises: an address, a host and an ssd tier
// of distinct capacities, and a value summary of each, as a node's
// withSummaries encodes them.
func nodeMeta(i int) membership.Meta {
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
	b, _, err := coord.EncodeSummaries(sums, membership.SummaryBudget(m))
	if err == nil {
		m.Summary = b
	}
	return m
}

// live returns the members not stopped.
func (c *cluster) live() []*membership.Membership {
	return slices.DeleteFunc(slices.Clone(c.members), func(m *membership.Membership) bool { return m == nil })
}

// Close stops every member, without leaving (the cluster goes down whole).
func (c *cluster) Close() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		if m != nil {
			wg.Go(func() { _ = m.Shutdown() })
		}
	}
	wg.Wait()
	c.members = nil
}

// evalEvery bounds how often a watcher re-reads its member's view.
const evalEvery = 20 * time.Millisecond

// seenBy waits until a share q of members see cond hold in their
// Members (each watched on its subscription, re-read at most every
// evalEvery), or timeout passes since start. It returns how long after
// start the q-th share did (ok false if they did not), and how many
// members ever saw it.
func seenBy(ctx context.Context, members []*membership.Membership, start time.Time, timeout time.Duration, q float64,
	cond func([]membership.Member) bool) (d time.Duration, ok bool, saw int) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	need := max(1, int(q*float64(len(members))+0.999999))
	times := make(chan time.Duration, len(members))
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { watch(ctx, m, start, cond, times) })
	}
	var seen []time.Duration
	go func() { wg.Wait(); close(times) }()
	for t := range times {
		seen = append(seen, t)
		if len(seen) == need {
			d, ok = t, true
			cancel()
		}
	}
	return d, ok, len(seen)
}

// watch sends on times how long after start m first saw cond, if it did
// before ctx ended.
func watch(ctx context.Context, m *membership.Membership, start time.Time, cond func([]membership.Member) bool, times chan<- time.Duration) {
	ch, unsubscribe := m.Subscribe()
	defer unsubscribe()
	tick := time.NewTimer(0)
	defer tick.Stop()
	for {
		if cond(m.Members()) {
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
			tick.Reset(evalEvery)
		}
	}
}

// stateIs returns a condition: id is in state s.
func stateIs(id string, s membership.State) func([]membership.Member) bool {
	return func(ms []membership.Member) bool {
		i := slices.IndexFunc(ms, func(m membership.Member) bool { return m.NodeID == id })
		return i >= 0 && ms[i].State == s
	}
}

// allAlive returns a condition: n members are alive.
func allAlive(n int) func([]membership.Member) bool {
	return func(ms []membership.Member) bool {
		alive := 0
		for _, m := range ms {
			if m.State == membership.Alive {
				alive++
			}
		}
		return alive == n
	}
}
