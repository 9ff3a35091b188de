package membership

import (
	"slices"
	"testing"
	"time"
)

// TestNetworkJoinCrash runs three members over one in-process Network:
// they join and a crash is seen Dead, as over sockets, and
// the network counts the gossip.
func TestNetworkJoinCrash(t *testing.T) {
	t.Parallel()
	net := NewNetwork()
	onNet := func(c *Config) { c.Network = net }
	a := startNode(t, "a", nil, onNet)
	b := startNode(t, "b", []string{a.GossipAddress()}, onNet)
	c := startNode(t, "c", []string{a.GossipAddress()}, onNet)
	d := startNode(t, "d", []string{a.GossipAddress()}, onNet)
	// 25 s: a join's alive broadcast lost on a starved machine is made up
	// by the next push-pull (every 10 s).
	for _, n := range []*testNode{a, b, c, d} {
		waitFor(t, n, 25*time.Second, "all alive", func(ms []Member) bool {
			return slices.Equal(nodeIDs(ms, Alive), []string{"a", "b", "c", "d"})
		})
	}
	if a.GossipAddress() == b.GossipAddress() {
		t.Fatalf("a and b share the address %s", a.GossipAddress())
	}
	start := time.Now()
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{a, b} {
		seeC(t, n, Dead, 10*time.Second, start, "the crash")
		if mem, ok := n.Member("c"); !ok || mem.State != Dead || mem.GossipAddress != c.GossipAddress() {
			t.Errorf("%s: Member(c) = %+v, %v; want c dead", n.id, mem, ok)
		}
		if _, ok := n.Member("nobody"); ok {
			t.Errorf("%s: Member(nobody) found", n.id)
		}
	}
	s := net.Stats()
	if s.Packets == 0 || s.PacketBytes == 0 || s.Streams == 0 || s.StreamBytes == 0 {
		t.Errorf("stats %+v: want packets and streams counted", s)
	}
}
