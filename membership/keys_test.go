package membership

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestKeyringIgnoresStrangers: gossip from a member without the cluster's
// key (none, or another) is not heard: it cannot join, and the members
// never list it. A key rotation (add the new key, make it first, drop the
// old) keeps the members together, and one that then knows only the new
// key joins them.
func TestKeyringIgnoresStrangers(t *testing.T) {
	k1, k2, other := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{9}, 32)
	withKeys := func(keys ...[]byte) func(*Config) {
		return func(c *Config) { c.Keys = keys; c.JoinTimeout = 2 * time.Second }
	}
	a := startNode(t, "a", nil, withKeys(k1))
	b := startNode(t, "b", []string{a.GossipAddress()}, withKeys(k1))
	alive := func(ids ...string) func([]Member) bool {
		return func(ms []Member) bool { return slices.Equal(nodeIDs(ms, Alive), ids) }
	}
	waitFor(t, a, 10*time.Second, "a and b alive", alive("a", "b"))

	for name, tweak := range map[string]func(*Config){"clear": withKeys(), "other-key": withKeys(other)} {
		cfg := Config{NodeID: "x-" + name, Seeds: []string{a.GossipAddress()}, Logger: testLogger(t)}
		tweak(&cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := Start(ctx, cfg)
		cancel()
		if err == nil {
			m.Close()
			t.Fatalf("%s: a member without the key joined", name)
		}
		if !errors.Is(err, ErrNoSeed) {
			t.Fatalf("%s: %v, want ErrNoSeed", name, err)
		}
	}
	for _, m := range a.Members() {
		if m.NodeID != "a" && m.NodeID != "b" {
			t.Fatalf("a lists %s, which has no key", m.NodeID)
		}
	}

	for _, n := range []*testNode{a, b} {
		if err := n.SetKeys([][]byte{k1, k2}); err != nil { // add k2
			t.Fatal(err)
		}
	}
	for _, n := range []*testNode{a, b} {
		if err := n.SetKeys([][]byte{k2}); err != nil { // use k2, drop k1
			t.Fatal(err)
		}
	}
	c := startNode(t, "c", []string{a.GossipAddress()}, withKeys(k2))
	waitFor(t, c, 10*time.Second, "a, b and c alive", alive("a", "b", "c"))
	waitFor(t, b, 10*time.Second, "a, b and c alive", alive("a", "b", "c"))
	if err := (&Membership{}).SetKeys([][]byte{k1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetKeys on a member without keys: %v, want ErrInvalidConfig", err)
	}
}
