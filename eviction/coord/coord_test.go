package coord

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/registry"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testlog"
)

// fakeStore is an in-memory Store: fixed summaries, recorded cutoffs.
type fakeStore struct {
	sums []eviction.Summary

	mu          sync.Mutex // guards the fields below
	worth       []float64
	epoch       uint64
	coordinated bool
	sets        int
}

func (s *fakeStore) Summaries() []eviction.Summary { return slices.Clone(s.sums) }

func (s *fakeStore) SetCutoffs(worth []float64, epoch uint64, coordinated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worth, s.epoch, s.coordinated = slices.Clone(worth), epoch, coordinated
	s.sets++
}

func (s *fakeStore) cutoffs() ([]float64, uint64, bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.worth), s.epoch, s.coordinated, s.sets
}

// testNode is one node of a coordination test: gossip, registry, loop.
type testNode struct {
	id      string
	store   *fakeStore
	members *membership.Membership
	reg     *registry.Registry
	coord   *Coord
	closed  atomic.Bool
}

func (n *testNode) close() {
	if n.closed.Swap(true) {
		return
	}
	n.coord.Close()
	n.members.Close()
	n.reg.Close()
}

const testRound = 200 * time.Millisecond

// startNode starts a node gossiping with seeds and coordinating through
// etcd at endpoints; its host tier holds hostBytes bytes at bucket and has
// capacity capacity.
func startNode(t testing.TB, id string, endpoints, seeds []string, capacity int64, bucket int, hostBytes int64) *testNode {
	t.Helper()
	return startNodeRound(t, id, endpoints, seeds, capacity, bucket, hostBytes, testRound)
}

// startNodeRound is startNode with round as the time between rounds.
func startNodeRound(t testing.TB, id string, endpoints, seeds []string, capacity int64, bucket int, hostBytes int64, round time.Duration) *testNode {
	t.Helper()
	return startNodeLogged(t, id, endpoints, seeds, capacity, bucket, hostBytes, round, testLogger(t))
}

// startNodeLogged is startNodeRound with log as the coordination loop's
// logger, and tweaks applied to its Config.
func startNodeLogged(t testing.TB, id string, endpoints, seeds []string, capacity int64, bucket int, hostBytes int64,
	round time.Duration, log *slog.Logger, tweaks ...func(*Config)) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := &testNode{id: id, store: &fakeStore{sums: []eviction.Summary{summary(1, 0, map[int]int64{bucket: hostBytes})}}}
	var err error
	n.reg, err = registry.Open(ctx, registry.Config{Endpoints: endpoints, RequestTimeout: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var loop atomic.Pointer[Coord]
	tiers := []membership.TierMeta{{Kind: "host", Capacity: capacity}}
	meta := func() membership.Meta { return membership.Meta{GRPCAddress: "127.0.0.1:1", Tiers: tiers} }
	// The summaries go to the coordinator as reports, as a node's do: gossip
	// metadata carries none.
	report := func() []byte {
		if c := loop.Load(); c != nil {
			return c.Report()
		}
		return nil
	}
	n.members, err = membership.Start(ctx, membership.Config{NodeID: id, Seeds: seeds, Meta: meta, Report: report,
		Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: id, Registry: n.reg, Store: n.store, Members: n.members,
		Tiers: []string{"host"}, Capacities: []int64{capacity}, Advertise: n.members.UpdateMeta,
		Round: round, StaleRounds: 3, CandidateTTL: 2 * time.Second, Logger: log}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	n.coord, err = Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	loop.Store(n.coord)
	t.Cleanup(n.close)
	return n
}

func startEtcd(t testing.TB) *registry.Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func testLogger(t testing.TB) *slog.Logger {
	return testlog.New(t, slog.LevelInfo)
}

// startCluster starts three nodes: each holds 1 MiB of host pages at a
// different worth bucket (10, 20, 30); a and b have 1 MiB of capacity, c
// one byte, so the cluster holds 3 MiB in 2 MiB and a cutoff exists.
func startCluster(t testing.TB, e *registry.Embedded) []*testNode {
	t.Helper()
	var nodes []*testNode
	for i, id := range []string{"a", "b", "c"} {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].members.GossipAddress()}
		}
		capacity := int64(1 << 20)
		if i == 2 {
			capacity = 0 // c contributes pages but no room
		}
		nodes = append(nodes, startNode(t, id, e.Endpoints(), seeds, max(capacity, 1), 10*(i+1), 1<<20))
	}
	return nodes
}

// leaderOf waits until exactly one live node leads and returns it.
func leaderOf(t testing.TB, nodes []*testNode) *testNode {
	t.Helper()
	var leader *testNode
	poll.Until(t, 15*time.Second, 20*time.Millisecond, "one coordinator", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.closed.Load() || !n.coord.State().Leading {
				continue
			}
			if leader != nil {
				t.Fatalf("%s and %s both lead", leader.id, n.id)
			}
			leader = n
		}
		return leader != nil
	})
	return leader
}

// allCoordinated waits until every live node applies coordinated cutoffs
// of an epoch above after, and returns that epoch.
func allCoordinated(t testing.TB, nodes []*testNode, after uint64) uint64 {
	t.Helper()
	var epoch uint64
	poll.Until(t, 15*time.Second, 20*time.Millisecond, fmt.Sprintf("coordinated cutoffs of an epoch above %d everywhere", after), func() bool {
		epoch = 0
		for _, n := range nodes {
			if n.closed.Load() {
				continue
			}
			_, e, coordinated, _ := n.store.cutoffs()
			if !coordinated || e <= after || (epoch != 0 && e != epoch) {
				return false
			}
			epoch = e
		}
		return true
	})
	return epoch
}

func TestCutoffsReachAllNodesAndSurviveTakeover(t *testing.T) {
	e := startEtcd(t)
	nodes := startCluster(t, e)
	leader := leaderOf(t, nodes)
	epoch := allCoordinated(t, nodes, 0)

	// Every node applies the same floor. The cluster keeps 90% of its
	// 2 MiB (headroom): bucket 30's MiB and 0.8 MiB of bucket 20's, so the
	// floor lies in bucket 20.
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "a floor from all three summaries", func() bool {
		for _, n := range nodes {
			w, _, _, _ := n.store.cutoffs()
			if len(w) != 1 || w[0] < pow2q(20) || w[0] > pow2q(21) {
				return false
			}
		}
		return true
	})
	st := nodes[0].coord.State()
	if !st.Coordinated || st.Coordinator != leader.id || st.Epoch != epoch {
		t.Fatalf("state %+v, want coordinated by %s at epoch %d", st, leader.id, epoch)
	}

	// The leader's node closes: another takes over with a larger epoch and
	// its cutoffs reach the others.
	leader.close()
	next := leaderOf(t, nodes)
	if next == leader {
		t.Fatal("closed node still leads")
	}
	epoch2 := allCoordinated(t, nodes, epoch)
	t.Logf("coordinator %s epoch %d, then %s epoch %d", leader.id, epoch, next.id, epoch2)
}

func TestEtcdDownFallsBackToLocalCutoffs(t *testing.T) {
	e := startEtcd(t)
	nodes := startCluster(t, e)
	leaderOf(t, nodes)
	allCoordinated(t, nodes, 0)

	e.Close()
	poll.Until(t, 15*time.Second, 20*time.Millisecond, "every node on local cutoffs", func() bool {
		for _, n := range nodes {
			if _, epoch, coordinated, _ := n.store.cutoffs(); coordinated || epoch != 0 {
				return false
			}
			if n.coord.State().Coordinated {
				return false
			}
		}
		return true
	})
	// Local cutoffs come from each node's own summary: each holds 1 MiB at
	// bucket 10·(i+1) in 90% of its capacity, so its floor lies in that
	// bucket.
	for i, n := range nodes {
		w, _, _, _ := n.store.cutoffs()
		if b := 10 * (i + 1); len(w) != 1 || w[0] < pow2q(b) || w[0] > 1.0001*pow2q(b+1) {
			t.Errorf("node %s local floor %v, want in bucket %d", n.id, w, b)
		}
	}
}
