package membership

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestProfileDefaults: a zero field takes its profile's default, a set
// one stays, and the default profile is the timing strata had before
// profiles.
func TestProfileDefaults(t *testing.T) {
	cfg, err := Config{NodeID: "x"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Profile != ProfileLocal || cfg.ProbeInterval != 500*time.Millisecond || cfg.ProbeTimeout != 250*time.Millisecond ||
		cfg.SuspicionMult != 4 || cfg.GossipInterval != 100*time.Millisecond || cfg.TCPTimeout != time.Second || cfg.JoinFanout != 3 {
		t.Fatalf("default profile: %+v", cfg)
	}
	cfg, err = Config{NodeID: "x", Profile: ProfileLAN, GossipNodes: 5}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	lan, _ := defaultsOf(ProfileLAN)
	if cfg.GossipNodes != 5 || cfg.ProbeInterval != lan.ProbeInterval || cfg.TCPTimeout != lan.TCPTimeout || cfg.PushPullInterval != lan.PushPullInterval {
		t.Fatalf("lan profile with 5 gossip nodes: %+v", cfg)
	}
	wan, _ := defaultsOf(ProfileWAN)
	if cfg, _ := (Config{NodeID: "x", Profile: ProfileWAN}).withDefaults(); cfg.ProbeTimeout != wan.ProbeTimeout {
		t.Fatalf("wan profile: probe timeout %v, want %v", cfg.ProbeTimeout, wan.ProbeTimeout)
	}
}

// TestTimeScale: TimeScale multiplies every time, set or defaulted, and
// divides the metadata rate; counts stay.
func TestTimeScale(t *testing.T) {
	lan, _ := defaultsOf(ProfileLAN)
	cfg, err := Config{NodeID: "x", Profile: ProfileLAN, TimeScale: 4, ReconnectInterval: 300 * time.Millisecond}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"ProbeInterval", cfg.ProbeInterval, 4 * lan.ProbeInterval},
		{"ProbeTimeout", cfg.ProbeTimeout, 4 * lan.ProbeTimeout},
		{"GossipInterval", cfg.GossipInterval, 4 * lan.GossipInterval},
		{"PushPullInterval", cfg.PushPullInterval, 4 * lan.PushPullInterval},
		{"TCPTimeout", cfg.TCPTimeout, 4 * lan.TCPTimeout},
		{"ReconnectInterval", cfg.ReconnectInterval, 1200 * time.Millisecond},
		{"JoinTimeout", cfg.JoinTimeout, 40 * time.Second},
		{"DeadRetention", cfg.DeadRetention, 40 * time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("%s %v, want %v", c.name, c.got, c.want)
		}
	}
	if cfg.MetaRate != 0.5 || cfg.SuspicionMult != lan.SuspicionMult || cfg.GossipNodes != lan.GossipNodes {
		t.Errorf("MetaRate %v, SuspicionMult %d, GossipNodes %d: want 0.5 and the profile's counts", cfg.MetaRate, cfg.SuspicionMult, cfg.GossipNodes)
	}
	for _, k := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := (Config{NodeID: "x", TimeScale: k}).withDefaults(); err == nil {
			t.Errorf("TimeScale %v accepted", k)
		}
	}
}

// TestJoinFanout: a member given every member as its seeds exchanges
// state with JoinFanout of them, not with each (a thousand-node cluster
// would send its whole state a thousand times per join).
func TestJoinFanout(t *testing.T) {
	t.Parallel()
	net := NewNetwork()
	onNet := func(c *Config) { c.Network, c.JoinFanout = net, 2 }
	first := startNode(t, "m0", nil, onNet)
	seeds := []string{first.GossipAddress()}
	for i := 1; i < 8; i++ {
		n := startNode(t, fmt.Sprint("m", i), seeds[:1], onNet)
		seeds = append(seeds, n.GossipAddress())
	}
	late := startNode(t, "late", seeds, onNet)
	got, err := late.Join(t.Context(), seeds)
	if err != nil || got != 2 {
		t.Fatalf("joining eight seeds reached %d (%v), want JoinFanout (2)", got, err)
	}
	waitFor(t, late, 30*time.Second, "all nine alive", func(ms []Member) bool { return len(nodeIDs(ms, Alive)) == 9 })
}

// TestPaceGap: up to 32 members every paced update broadcasts; past that
// the cluster keeps to about MetaRate broadcasts a second.
func TestPaceGap(t *testing.T) {
	for _, c := range []struct {
		n    int
		rate float64
		want time.Duration
	}{{3, 2, 0}, {32, 2, 0}, {33, 2, 500 * time.Millisecond}, {100, 2, 34 * time.Second}, {1000, 2, 484 * time.Second}, {1000, 4, 242 * time.Second}} {
		if got := paceGap(c.n, c.rate); got != c.want {
			t.Errorf("paceGap(%d, %v) = %v, want %v", c.n, c.rate, got, c.want)
		}
	}
}

// TestUpdateMetaPacedStaggered: members started together in a cluster
// past 32 do not all broadcast at their first paced update (each counts
// its start as a broadcast at a random point of the gap): they would
// re-advertise in step, then fall silent together for a whole gap (what
// strata-cluster-sim's gossip window saw at 300 members: no metadata
// broadcast at all).
func TestUpdateMetaPacedStaggered(t *testing.T) {
	t.Parallel()
	const n = 36
	net := NewNetwork()
	onNet := func(c *Config) { c.Network, c.MetaRate = net, 0.01 } // a gap of 400 s at 36 members
	nodes := []*testNode{startNode(t, "m00", nil, onNet)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, startNode(t, fmt.Sprintf("m%02d", i), []string{nodes[0].GossipAddress()}, onNet))
	}
	for _, nd := range nodes {
		waitFor(t, nd, 30*time.Second, "all alive", func(ms []Member) bool { return len(nodeIDs(ms, Alive)) == n })
	}
	broadcast := 0
	for _, nd := range nodes {
		if err := nd.UpdateMetaPaced(t.Context()); err != nil {
			t.Fatal(err)
		}
		nd.updateMu.Lock()
		if !nd.lastUpdate.IsZero() {
			broadcast++
		}
		nd.updateMu.Unlock()
	}
	// Each broadcasts with the chance (time since its start) / 400 s.
	if broadcast > n/2 {
		t.Errorf("%d of %d members broadcast at their first paced update, want a few", broadcast, n)
	}
}

// TestUpdateMetaPacedSmall: in a small cluster a paced update broadcasts
// every time, as UpdateMeta does.
func TestUpdateMetaPacedSmall(t *testing.T) {
	t.Parallel()
	a := startNode(t, "a", nil, nil)
	b := startNode(t, "b", []string{a.GossipAddress()}, nil)
	for used := int64(1); used <= 3; used++ {
		a.setMeta(func(m *Meta) { m.Tiers[0].Used = used })
		if err := a.UpdateMetaPaced(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, b, 5*time.Second, "seeing the update", func(ms []Member) bool {
			for _, m := range ms {
				if m.NodeID == "a" {
					return m.Meta.Tiers[0].Used == used
				}
			}
			return false
		})
	}
}
