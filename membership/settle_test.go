package membership

import (
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
)

// TestSettleSync: a member that joined exchanges state once more with a
// live member a few gossip rounds after its join (its seed's view lacked
// the members that joined just before it, whose alive messages may never
// reach it: strata-cluster-sim's starts at 100 members held one view
// short for 20-30 s, until a push-pull); the first member, which joined
// nobody, does not.
func TestSettleSync(t *testing.T) {
	t.Parallel()
	net := NewNetwork()
	onNet := func(c *Config) { c.Network, c.PushPullInterval = net, time.Hour } // no periodic exchange
	a := startNode(t, "a", nil, onNet)
	b := startNode(t, "b", []string{a.GossipAddress()}, onNet)
	joined := net.Stats().Streams // b's join
	// b's settling sync comes 10 to 20 gossip intervals (100 ms) after its start.
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "b's settling sync", func() bool { return net.Stats().Streams > joined })
	time.Sleep(2 * settleGossips * 100 * time.Millisecond) // a's would have come by now
	if got := net.Stats().Streams - joined; got != 1 {
		t.Errorf("%d state exchanges after b's join, want 1 (b's settling sync; a joined nobody)", got)
	}
	for _, n := range []*testNode{a, b} {
		if ms := n.Members(); len(nodeIDs(ms, Alive)) != 2 {
			t.Errorf("%s sees %s, want a and b alive", n.id, describe(ms))
		}
	}
}

// TestCompression: the profiles' compression reaches memberlist, and
// members that compress and members that do not share a cluster.
func TestCompression(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{NodeID: "x"}, true},
		{Config{NodeID: "x", Profile: ProfileLAN}, false},
		{Config{NodeID: "x", Profile: ProfileLAN, Compression: CompressionOn}, true},
		{Config{NodeID: "x", Profile: ProfileWAN}, true},
		{Config{NodeID: "x", Compression: CompressionOff}, false},
	} {
		cfg, err := c.cfg.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		m := &Membership{cfg: cfg}
		if got := m.memberlistConfig(nil, 0, nil).EnableCompression; got != c.want {
			t.Errorf("profile %q, compression %q: memberlist compresses %v, want %v", c.cfg.Profile, c.cfg.Compression, got, c.want)
		}
	}
	if _, err := (Config{NodeID: "x", Compression: "lzw"}).withDefaults(); err == nil {
		t.Error("compression \"lzw\" accepted")
	}
	net := NewNetwork()
	on := startNode(t, "on", nil, func(c *Config) { c.Network, c.Compression = net, CompressionOn })
	off := startNode(t, "off", []string{on.GossipAddress()}, func(c *Config) { c.Network, c.Compression = net, CompressionOff })
	for _, n := range []*testNode{on, off} {
		waitFor(t, n, 15*time.Second, "both alive", func(ms []Member) bool { return len(nodeIDs(ms, Alive)) == 2 })
	}
}
