package membership

import (
	"bytes"
	"errors"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestThreeMembersJoin(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	for _, n := range nodes {
		ms := n.Members()
		if len(ms) != 3 {
			t.Fatalf("%s sees %d members: %s", n.id, len(ms), describe(ms))
		}
		if !slices.IsSortedFunc(ms, func(a, b Member) int { return strings.Compare(a.NodeID, b.NodeID) }) {
			t.Errorf("%s: members not sorted: %s", n.id, describe(ms))
		}
		if got := n.Alive(); len(got) != 3 {
			t.Errorf("%s: Alive() = %s", n.id, describe(got))
		}
		for i, m := range ms {
			want := nodes[i]
			wantMeta := want.currentMeta()
			wantMeta.NodeID = want.id
			if m.NodeID != want.id || m.GossipAddress != want.GossipAddress() || m.GRPCAddress != wantMeta.GRPCAddress {
				t.Errorf("%s sees %+v, want id %s gossip %s grpc %s", n.id, m, want.id, want.GossipAddress(), wantMeta.GRPCAddress)
			}
			if !reflect.DeepEqual(m.Meta, wantMeta) {
				t.Errorf("%s sees %s's meta %+v, want %+v", n.id, m.NodeID, m.Meta, wantMeta)
			}
			if m.Incarnation != 1 {
				t.Errorf("%s sees %s at incarnation %d, want 1", n.id, m.NodeID, m.Incarnation)
			}
		}
	}
	// The copies handed out are the caller's.
	ms := nodes[0].Members()
	ms[0].Meta.Tiers[0].Used = -1
	if nodes[0].Members()[0].Meta.Tiers[0].Used == -1 {
		t.Error("Members shares its Tiers with the caller")
	}
}

func TestUpdateMetaPropagates(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	a, c := nodes[0], nodes[2]
	a.setMeta(func(m *Meta) {
		m.Tiers[0].Used = 777
		m.Summary = []byte("summary")
	})
	if err := a.UpdateMeta(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, c, 3*time.Second, "seeing a's new meta", func(ms []Member) bool {
		return len(ms) > 0 && ms[0].Meta.Tiers[0].Used == 777 && string(ms[0].Meta.Summary) == "summary"
	})
	t.Logf("metadata update seen in %v", took)
	if got := c.Members()[0].Incarnation; got != 2 {
		t.Errorf("incarnation after one update = %d, want 2", got)
	}
}

// seeC waits until n sees member c in state want, and logs how long after
// since (the moment of event) that took.
func seeC(t *testing.T, n *testNode, want State, within time.Duration, since time.Time, event string) {
	t.Helper()
	waitFor(t, n, within, "seeing c "+want.String(), func(ms []Member) bool { return stateOf(ms, "c") == want })
	t.Logf("%s sees c %v %v after %s", n.id, want, time.Since(since), event)
}

func TestCrashDetectedDead(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	start := time.Now()
	if err := c.Shutdown(); err != nil { // no leave: a crash
		t.Fatal(err)
	}
	for _, n := range []*testNode{a, b} {
		seeC(t, n, Dead, 10*time.Second, start, "the crash")
		if got := nodeIDs(n.Alive(), Alive); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s: alive %v", n.id, got)
		}
	}
}

func TestLeaveSeenLeft(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	start := time.Now()
	if err := c.Leave(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("Leave took %v", time.Since(start))
	for _, n := range []*testNode{a, b} {
		seeC(t, n, Left, 2*time.Second, start, "Leave began")
	}
	if err := c.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("second Leave: %v, want ErrClosed", err)
	}
	if err := c.UpdateMeta(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("UpdateMeta after Leave: %v, want ErrClosed", err)
	}
	if _, err := c.Join(t.Context(), []string{a.GossipAddress()}); !errors.Is(err, ErrClosed) {
		t.Errorf("Join after Leave: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after Leave: %v", err)
	}
	// A Left member stays Left: it is not reconnected, nor later taken for
	// dead. (Waiting for nothing to happen needs a clock.)
	time.Sleep(3 * a.cfg.ReconnectInterval)
	if s := stateOf(a.Members(), "c"); s != Left {
		t.Errorf("a sees c %v, want left", s)
	}
}

func TestPartitionAndHeal(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	start := time.Now()
	partition(c, a, b)
	for _, n := range []*testNode{a, b} {
		seeC(t, n, Dead, 10*time.Second, start, "the partition")
	}
	waitFor(t, c, 15*time.Second, "seeing a and b dead", func(ms []Member) bool {
		return slices.Equal(nodeIDs(ms, Dead), []string{"a", "b"})
	})
	t.Logf("c sees a and b dead %v after the partition", time.Since(start))

	start = time.Now()
	for _, n := range nodes {
		n.partition.Heal()
	}
	for _, n := range nodes {
		waitFor(t, n, 15*time.Second, "seeing all alive again", func(ms []Member) bool {
			return slices.Equal(nodeIDs(ms, Alive), []string{"a", "b", "c"})
		})
		t.Logf("%s sees all alive %v after healing", n.id, time.Since(start))
	}
}

func TestSubscribe(t *testing.T) {
	t.Parallel()
	a := startNode(t, "a", nil, nil)
	ch, unsubscribe := a.Subscribe()
	ch2, _ := a.Subscribe()
	select { // a's own join may have signalled before
	case <-ch:
	default:
	}
	b := startNode(t, "b", []string{a.GossipAddress()}, nil)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no signal for b's join")
	}
	unsubscribe()
	unsubscribe() // idempotent
	if _, ok := <-drain(ch); ok {
		t.Error("channel open after unsubscribe")
	}
	b.setMeta(func(m *Meta) { m.GRPCAddress = "127.0.0.1:1" })
	if err := b.UpdateMeta(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, 5*time.Second, "seeing b's new address", func(ms []Member) bool {
		return len(ms) == 2 && ms[1].GRPCAddress == "127.0.0.1:1"
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-drain(ch2); ok {
		t.Error("channel open after Close")
	}
	late, _ := a.Subscribe()
	if _, ok := <-late; ok {
		t.Error("Subscribe after Close gave an open channel")
	}
}

// drain returns ch after discarding the signals in it.
func drain(ch <-chan struct{}) <-chan struct{} {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return ch
			}
		default:
			return ch
		}
	}
}

func TestStartWithUnreachableSeeds(t *testing.T) {
	t.Parallel()
	dead := deadAddr
	start := time.Now()
	_, err := Start(ctxFor(t, 5*time.Second), Config{NodeID: "x", Seeds: []string{dead}, JoinTimeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrNoSeed) {
		t.Fatalf("Start with a dead seed: %v, want ErrNoSeed", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Start took %v to give up", d)
	}

	// AllowAlone: starts, then finds the cluster once there is one at the
	// seed.
	a := startNode(t, "a", nil, nil)
	x := startNode(t, "x", []string{"127.0.0.1:1", a.GossipAddress()}, nil)
	waitFor(t, a, 5*time.Second, "seeing x", func(ms []Member) bool { return stateOf(ms, "x") == Alive })
	alone := startNode(t, "alone", []string{dead}, func(c *Config) {
		c.AllowAlone = true
		c.JoinTimeout = 200 * time.Millisecond
	})
	if got := nodeIDs(alone.Members(), Alive); !slices.Equal(got, []string{"alone"}) {
		t.Errorf("alone sees %v", got)
	}
	// A seed list with only the member itself means starting alone.
	if n, err := x.Join(t.Context(), []string{x.GossipAddress()}); n != 0 || err != nil {
		t.Errorf("Join(self) = %d, %v", n, err)
	}
}

// deadAddr is a loopback address nothing listens on: port 1 is never an
// ephemeral port. (A port picked free and closed again was handed by the
// kernel to a node this test or a parallel one started next, and the
// member meant to be alone joined it.)
const deadAddr = "127.0.0.1:1"

func TestMetaTooLarge(t *testing.T) {
	t.Parallel()
	huge := Meta{GRPCAddress: strings.Repeat("x", MaxMetaSize)}
	if _, err := Start(t.Context(), Config{NodeID: "x", Meta: func() Meta { return huge }}); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("Start with huge meta: %v", err)
	}

	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	budget := SummaryBudget(a.currentMeta())
	if budget <= 0 || budget >= MaxMetaSize {
		t.Fatalf("budget %d", budget)
	}
	// A Summary that fits exactly goes out whole.
	a.setMeta(func(m *Meta) { m.Summary = bytes.Repeat([]byte{1}, budget) })
	if err := a.UpdateMeta(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("summary of exactly the budget: %v", err)
	}
	waitFor(t, b, 5*time.Second, "seeing the full summary", func(ms []Member) bool { return len(ms[0].Meta.Summary) == budget })
	// One byte more: the rest still goes out, without Summary.
	a.setMeta(func(m *Meta) {
		m.Tiers[1].Used = 99
		m.Summary = bytes.Repeat([]byte{2}, SummaryBudget(*m)+1)
	})
	if err := a.UpdateMeta(ctxFor(t, 5*time.Second)); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("summary over the budget: %v, want ErrMetaTooLarge", err)
	}
	waitFor(t, b, 5*time.Second, "seeing the update without summary", func(ms []Member) bool {
		return ms[0].Meta.Tiers[1].Used == 99 && ms[0].Meta.Summary == nil
	})
	// Too large even without Summary: nothing new goes out.
	a.setMeta(func(m *Meta) {
		m.Summary = nil
		m.Tiers[1].Used = 100
		m.GRPCAddress = strings.Repeat("y", MaxMetaSize)
	})
	if err := a.UpdateMeta(ctxFor(t, 5*time.Second)); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("huge address: %v, want ErrMetaTooLarge", err)
	}
	// Back to a sane size: it goes out.
	a.setMeta(func(m *Meta) { m.GRPCAddress = "127.0.0.1:5"; m.Tiers[1].Used = 101 })
	if err := a.UpdateMeta(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, 5*time.Second, "seeing the sane update", func(ms []Member) bool { return ms[0].Meta.Tiers[1].Used == 101 })
	for _, m := range b.Members() {
		if m.NodeID == "a" && m.Meta.Tiers[1].Used == 100 {
			t.Error("b saw the oversized update")
		}
	}
}

func TestConfigRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no NodeID", Config{}},
		{"BindAddr a name", Config{NodeID: "x", BindAddr: "localhost"}},
		{"wildcard advertise", Config{NodeID: "x", BindAddr: "0.0.0.0"}},
		{"BindPort", Config{NodeID: "x", BindPort: 70000}},
		{"seed without port", Config{NodeID: "x", Seeds: []string{"127.0.0.1"}}},
		{"negative duration", Config{NodeID: "x", ProbeInterval: -time.Second}},
		{"probe timeout over interval", Config{NodeID: "x", ProbeInterval: time.Second, ProbeTimeout: 2 * time.Second}},
		{"negative multiplier", Config{NodeID: "x", SuspicionMult: -1}},
		{"unknown profile", Config{NodeID: "x", Profile: "lan-large"}},
		{"negative gossip nodes", Config{NodeID: "x", GossipNodes: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Start(t.Context(), tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Start: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestBindPortTaken(t *testing.T) {
	t.Parallel()
	a := startNode(t, "a", nil, nil)
	_, port, err := net.SplitHostPort(a.GossipAddress())
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.Context(), Config{NodeID: "b", BindPort: p}); err == nil {
		t.Fatal("Start on a taken port succeeded")
	}
}

func TestRestartOnNewPort(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	a, c := nodes[0], nodes[2]
	old := c.GossipAddress()
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c2 := startNode(t, "c", []string{a.GossipAddress()}, nil)
	if c2.GossipAddress() == old {
		t.Fatalf("restarted on the same address %s", old)
	}
	for _, n := range nodes[:2] {
		waitFor(t, n, 10*time.Second, "seeing c back on its new address", func(ms []Member) bool {
			return len(ms) == 3 && ms[2].State == Alive && ms[2].GossipAddress == c2.GossipAddress()
		})
		t.Logf("%s sees c back %v after the restart", n.id, time.Since(start))
		if got := n.Members()[2].Incarnation; got != 1 {
			t.Errorf("%s sees the restarted c at incarnation %d, want 1", n.id, got)
		}
	}
}

// TestLeaveSeenLeftByEveryone: in a cluster of four, every other member
// sees a member that left as Left, never Dead: the leave's metadata
// (leaving flag) reaches each of them before memberlist's leave message
// does, which gossip alone does not promise (before syncLeaving, one of
// the three saw it Dead in most runs). Not parallel: four members' start
// on a busy machine is slow enough already.
func TestLeaveSeenLeftByEveryone(t *testing.T) {
	nodes := startCluster(t, 4)
	start := time.Now()
	if err := nodes[3].Leave(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:3] {
		waitFor(t, n, 3*time.Second, "seeing d left", func(ms []Member) bool { return stateOf(ms, "d") == Left })
		t.Logf("%s sees d left %v after Leave began", n.id, time.Since(start))
	}
}
