package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/stratakv/strata/eviction/coord"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/placement"
	"github.com/stratakv/strata/store"
)

// quorum is the share of members a change must reach.
const quorum = 0.99

// timed is one timed phase's result: how long until quorum saw it, and
// how many of how many members ever did.
type timed struct {
	D         time.Duration
	OK        bool
	Saw, Of   int
	Attempted bool
}

// String is the time in seconds, or why there is none.
func (t timed) String() string {
	switch {
	case !t.Attempted:
		return "-"
	case !t.OK:
		return fmt.Sprintf(">timeout (%d/%d)", t.Saw, t.Of)
	}
	return fmt.Sprintf("%.2f", t.D.Seconds())
}

// gossipRate measures what crosses c's network over window, per member and
// second: bytes and messages (packets plus streams); and how often the
// first member's view changed (its Subscribe signals, coalesced as a
// node's WatchMembers coalesces them: each is one whole view sent to every
// client watching that node).
func gossipRate(ctx context.Context, c *cluster, window time.Duration) (bytes, msgs, views float64, err error) {
	changed, unsubscribe := c.members[0].Subscribe()
	defer unsubscribe()
	before := c.net.Stats()
	start := time.Now()
	t := time.NewTimer(window)
	defer t.Stop()
	signals := 0
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-changed:
			signals++
		case <-t.C:
			waiting = false
		}
	}
	after := c.net.Stats()
	secs := time.Since(start).Seconds()
	per := float64(len(c.live())) * secs
	bytes = float64(after.PacketBytes-before.PacketBytes+after.StreamBytes-before.StreamBytes) / per
	msgs = float64(after.Packets-before.Packets+after.Streams-before.Streams) / per
	return bytes, msgs, float64(signals) / secs, nil
}

// crash shuts the last member down, as a crash would, and times how long
// the others take to see it Dead.
func crash(ctx context.Context, c *cluster, timeout time.Duration) timed {
	i := len(c.members) - 1
	victim := c.members[i]
	start := time.Now()
	_ = victim.Shutdown()
	c.members[i] = nil
	return observe(ctx, c.live(), start, timeout, stateIs(c.ids[i], membership.Dead))
}

// join starts one more member and times how long the others take to see it
// Alive.
func join(ctx context.Context, c *cluster, timeout time.Duration) (timed, error) {
	others := c.live()
	i := len(c.members)
	start := time.Now()
	m, err := c.add(ctx, i)
	if err != nil {
		return timed{}, err
	}
	c.members, c.ids = append(c.members, m), append(c.ids, nodeID(i))
	return observe(ctx, others, start, timeout, stateIs(nodeID(i), membership.Alive)), nil
}

// leave makes the member in the middle leave gracefully and times how long
// the others take to see it Left; also how many saw it Dead instead.
func leave(ctx context.Context, c *cluster, timeout, bound time.Duration) (left timed, dead int) {
	i := len(c.members) / 2
	for c.members[i] == nil {
		i++
	}
	id, leaver := c.ids[i], c.members[i]
	c.members[i] = nil
	others := c.live()
	start := time.Now()
	_ = leaver.Leave(bound) // Close's bound (1 s, dilated), as a node leaves
	left = observe(ctx, others, start, timeout, stateIs(id, membership.Left))
	for _, m := range others {
		if stateIs(id, membership.Dead)(m) {
			dead++
		}
	}
	return left, dead
}

// watchEvery bounds how often a watcher re-reads one member's view of
// one member (membership.Member: cheap whatever N).
const watchEvery = 10 * time.Millisecond

func observe(ctx context.Context, ms []*membership.Membership, start time.Time, timeout time.Duration, cond func(*membership.Membership) bool) timed {
	return observeEvery(ctx, ms, start, timeout, watchEvery, cond)
}

func observeEvery(ctx context.Context, ms []*membership.Membership, start time.Time, timeout, every time.Duration, cond func(*membership.Membership) bool) timed {
	d, ok, saw := seenBy(ctx, ms, start, timeout, every, quorum, cond)
	return timed{D: d, OK: ok, Saw: saw, Of: len(ms), Attempted: true}
}

// startSample is how many members the start is watched on, and
// startEvery how often (in the cluster's time) each re-reads its whole
// view: Alive costs O(N), so watching every member would cost O(N²), and
// at a thousand members re-reading 50 views every 500 ms of wall time
// took 7% of the process.
const (
	startSample = 50
	startEvery  = 100 * time.Millisecond
)

// converge waits until a sample of startSample members all see every
// member alive, then checks that all do.
func converge(ctx context.Context, c *cluster, cfg config, start time.Time) (timed, error) {
	timeout := cfg.wall(cfg.PhaseTimeout)
	live := c.live()
	sample := live
	if len(live) > startSample {
		sample = make([]*membership.Membership, startSample)
		for i := range sample {
			sample[i] = live[i*len(live)/startSample]
		}
	}
	t := observeEvery(ctx, sample, start, timeout, cfg.wall(startEvery), allAlive(len(live)))
	if !t.OK {
		return t, fmt.Errorf("%d members did not converge within %v: %s", len(live), timeout, c.views())
	}
	t.Saw, t.Of = 0, len(live)
	for _, m := range live {
		if allAlive(len(live))(m) {
			t.Saw++
		}
	}
	return t, nil
}

// simChildren is how many children the evicted parent has, each on the
// node that owns its own key.
const simChildren = 4

// hintMessages returns how many messages one evicted parent's gone notice
// costs and one child hint, as the node's sender routes them
// (peer.RouteKnown over a placement view of the n members): the parent's
// simChildren children each send a child hint to the parent's candidates,
// which record their senders (peer.Holders), and the parent's owner then
// evicts it. total is every message of the parent's life: its children's
// hints and its notice.
func hintMessages(n int) (notice, child, total int, err error) {
	v, err := placement.NewView(weighted(n))
	if err != nil {
		return 0, 0, 0, err
	}
	idx := make(map[string]int, n)
	for i := range n {
		idx[v.Node(i).ID] = i
	}
	key := func(s string) namespace.Key { return namespace.Key(sha256.Sum256([]byte(s))) }
	candidates := func(k namespace.Key, dst []int) []int { return v.Candidates(k, dst) }
	parent := key("parent")
	owner := v.Owner(parent)
	holders := make([]peer.Holders, n)
	hints := 0
	for c := range simChildren {
		from := v.Owner(key(fmt.Sprint("child ", c)))
		if from == owner {
			continue // a child beside its parent sends no hint
		}
		hints++
		groups, _ := peer.RouteKnown(n, from, candidates, nil, []store.ChildHint{{Parent: parent, Added: true}})
		for to, g := range groups {
			if len(g) > 0 {
				holders[to].Record(v.Node(from).ID, g)
				child++
			}
		}
	}
	total = child
	child /= max(hints, 1)
	known := func(ns namespace.ID, p namespace.Key, dst []int) []int {
		for _, id := range holders[owner].Take(ns, p) {
			dst = append(dst, idx[id])
		}
		return dst
	}
	groups, _ := peer.RouteKnown(n, owner, candidates, known, []store.ChildHint{{Parent: parent, Gone: true}})
	for _, g := range groups {
		if len(g) > 0 {
			notice++
		}
	}
	return notice, child, total + notice, nil
}

// weighted returns n placement nodes weighted by their host capacity, as
// the client weighs them.
func weighted(n int) []placement.Node {
	nodes := make([]placement.Node, n)
	for i := range nodes {
		nodes[i] = placement.Node{ID: nodeID(i), Weight: float64(nodeMeta(i).Tiers[0].Capacity)}
	}
	return nodes
}

// movement is what a join and a leave move: the share of keys whose
// owner changes, and the share expected, the joiner's or leaver's share of
// the capacity weights (about 1/N; a key moves only to the joiner or from
// the leaver, placement/doc.go).
type movement struct {
	Join, Leave           float64
	JoinShare, LeaveShare float64
	// OK says both are within tolerance of their share: five standard
	// deviations of keys drawn at that share, plus a tenth of the share.
	OK bool
}

// moved measures the movement of keys keys when one member joins n,
// and when one of n leaves, all weighted by capacity.
func moved(n, keys int) (movement, error) {
	var mv movement
	nodes := weighted(n + 1)
	all, err := placement.NewView(nodes)
	if err != nil {
		return mv, err
	}
	before, err := placement.NewView(nodes[:n])
	if err != nil {
		return mv, err
	}
	less, err := placement.NewView(slices.Delete(slices.Clone(nodes[:n]), n/2, n/2+1))
	if err != nil {
		return mv, err
	}
	var joinMoves, leaveMoves int
	var seed [8]byte
	for k := range keys {
		binary.LittleEndian.PutUint64(seed[:], uint64(k))
		key := sha256.Sum256(seed[:])
		owner := before.Node(before.Owner(key)).ID
		if all.Node(all.Owner(key)).ID != owner {
			joinMoves++
		}
		if less.Node(less.Owner(key)).ID != owner {
			leaveMoves++
		}
	}
	var total float64
	for _, nd := range nodes[:n] {
		total += nd.Weight
	}
	mv.Join, mv.Leave = float64(joinMoves)/float64(keys), float64(leaveMoves)/float64(keys)
	mv.JoinShare = nodes[n].Weight / (total + nodes[n].Weight)
	mv.LeaveShare = nodes[n/2].Weight / total
	within := func(got, share float64) bool {
		return math.Abs(got-share) <= 5*math.Sqrt(share*(1-share)/float64(keys))+share/10
	}
	mv.OK = within(mv.Join, mv.JoinShare) && within(mv.Leave, mv.LeaveShare)
	return mv, nil
}

// coordRound times the coordinator's merge (coord.Compute, as
// coord.Coord runs it each round) over n members as its collection
// delivers them: each member's metadata with its reported summaries. It
// returns the median of rounds and the bytes one round allocates.
func coordRound(n, rounds int) (wall time.Duration, alloc uint64, err error) {
	members := make([]membership.Member, n)
	for i := range members {
		members[i] = membership.Member{NodeID: nodeID(i), State: membership.Alive, Meta: nodeMeta(i)}
		members[i].Meta.Summary = nodeReport(i)
	}
	times := make([]time.Duration, rounds)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for r := range times {
		start := time.Now()
		if _, err := coord.Compute(members, coord.DefaultHeadroom); err != nil {
			return 0, 0, err
		}
		times[r] = time.Since(start)
	}
	runtime.ReadMemStats(&after)
	slices.Sort(times)
	return times[rounds/2], (after.TotalAlloc - before.TotalAlloc) / uint64(rounds), nil
}

// reportsPerRound is how many members the coordinator asks for their
// summaries in one round: coord.DefaultReportRate a second over
// coord.DefaultRound.
const reportsPerRound = int(coord.DefaultReportRate * coord.DefaultRound / time.Second)

// collectRound times one round of the coordinator's collection as
// coord.Coord makes it: the first member asks reportsPerRound others for
// their reports (membership.Collect, a packet each way), waiting at most
// wait (a quarter of a round). It returns how long the answers took and
// how many of how many came.
func collectRound(ctx context.Context, c *cluster, wait time.Duration) (d time.Duration, got, asked int, err error) {
	asker := c.members[0]
	var ids []string
	for i, m := range c.members {
		if m != nil && i > 0 && len(ids) < reportsPerRound {
			ids = append(ids, c.ids[i])
		}
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	reports, err := asker.Collect(ctx, ids)
	return time.Since(start), len(reports), len(ids), err
}
