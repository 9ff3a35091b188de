package membership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/testlog"
)

// testNode is a member under test with metadata the test can change.
type testNode struct {
	*Membership
	id        string
	partition *Partition

	// mu guards meta.
	mu   sync.Mutex
	meta Meta
}

func (n *testNode) setMeta(f func(*Meta)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(&n.meta)
}

func (n *testNode) currentMeta() Meta {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.meta.clone()
}

// startNode starts a member on loopback with a Partition, closing it when
// the test ends. tweak, if not nil, adjusts the Config first.
func startNode(t *testing.T, id string, seeds []string, tweak func(*Config)) *testNode {
	t.Helper()
	n := &testNode{id: id, partition: &Partition{}}
	n.meta = Meta{
		GRPCAddress: "127.0.0.1:" + fmt.Sprint(9000+len(id)),
		Tiers: []TierMeta{
			{Kind: "host", Capacity: 1 << 30, Used: 0},
			{Kind: "ssd", Capacity: 1 << 40, Used: 12345},
		},
	}
	cfg := Config{
		NodeID:    id,
		Seeds:     seeds,
		Meta:      n.currentMeta,
		Partition: n.partition,
		Logger:    testLogger(t),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	m, err := Start(ctxFor(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("starting %s: %v", id, err)
	}
	n.Membership = m
	t.Cleanup(func() { _ = m.Close() })
	return n
}

// startCluster starts members a, b, c, … joined through the first, and
// waits until each sees all of them alive.
func startCluster(t *testing.T, size int) []*testNode {
	t.Helper()
	nodes := []*testNode{startNode(t, "a", nil, nil)}
	for i := 1; i < size; i++ {
		id := string(rune('a' + i))
		nodes = append(nodes, startNode(t, id, []string{nodes[0].GossipAddress()}, nil))
	}
	ids := make([]string, size)
	for i, n := range nodes {
		ids[i] = n.id
	}
	for _, n := range nodes {
		waitFor(t, n, 15*time.Second, "all alive", func(ms []Member) bool {
			return slices.Equal(nodeIDs(ms, Alive), ids)
		})
	}
	return nodes
}

// partition cuts victim off from others, in both directions.
func partition(victim *testNode, others ...*testNode) {
	for _, o := range others {
		victim.partition.Block(o.GossipAddress())
		o.partition.Block(victim.GossipAddress())
	}
}

// waitFor waits, on n's subscription rather than by sleeping, until cond
// holds for n's Members, and returns how long that took. It fails the test
// after timeout.
func waitFor(t *testing.T, n *testNode, timeout time.Duration, what string, cond func([]Member) bool) time.Duration {
	t.Helper()
	start := time.Now()
	ch, unsubscribe := n.Subscribe()
	defer unsubscribe()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		ms := n.Members()
		if cond(ms) {
			return time.Since(start)
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s: not %s after %v; members: %s", n.id, what, timeout, describe(n.Members()))
		}
	}
}

// nodeIDs returns the NodeIDs of the members in state s.
func nodeIDs(ms []Member, s State) []string {
	var ids []string
	for _, m := range ms {
		if m.State == s {
			ids = append(ids, m.NodeID)
		}
	}
	return ids
}

// stateOf returns id's State in ms, or -1 if id is absent.
func stateOf(ms []Member, id string) State {
	for _, m := range ms {
		if m.NodeID == id {
			return m.State
		}
	}
	return -1
}

func describe(ms []Member) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s=%s(v%d) ", m.NodeID, m.State, m.Incarnation)
	}
	return b.String()
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// testLogger returns a logger into a buffer that is printed if the test
// fails. (Not t.Log: memberlist's goroutines may log after the test.)
func testLogger(t *testing.T) *slog.Logger {
	buf := &testlog.Buffer{Limit: 4 << 20}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", buf.String())
		}
	})
	return buf.Logger()
}
