package node_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/placement"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// handoffPair starts two nodes handing pages back every 100 ms to owners
// alive for 300 ms (mod, when set, changes node i's config), waits until
// each sees both, and returns a context for the test, the nodes and their
// placement view.
func handoffPair(t *testing.T, mod func(i int, c *node.Config)) (context.Context, *testnode.Node, *testnode.Node, *placement.View) {
	t.Helper()
	cluster := testnode.StartCluster(t, 2, func(i int, c *node.Config) {
		c.Tiers, c.HostBytes, c.ShmSocket = []string{"host"}, 8<<20, "off"
		c.CoordRound, c.CoordinatorTTL = 200*time.Millisecond, 2*time.Second
		c.Handoff = peer.HandoffConfig{Every: 100 * time.Millisecond, Settle: 300 * time.Millisecond}
		if mod != nil {
			mod(i, c)
		}
	})
	t.Cleanup(cluster.Close)
	a, b := cluster.Nodes[0], cluster.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	for _, n := range cluster.Nodes {
		seesMembers(t, ctx, n, 2)
	}
	return ctx, a, b, viewOf(t, a, b)
}

// tierOf is the tier node n holds key k of namespace id in (TIER_UNSPECIFIED:
// not held).
func tierOf(t *testing.T, ctx context.Context, n *testnode.Node, id []byte, k namespace.Key) pb.Tier {
	t.Helper()
	info, err := pb.NewAdminClient(testnode.Dial(t, n.Addr())).StatKeys(ctx, &pb.StatKeysRequest{NamespaceId: id, Keys: [][]byte{k[:]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.GetKeys()[0].GetKey()) == 0 {
		return pb.Tier_TIER_UNSPECIFIED
	}
	return info.GetKeys()[0].GetTier()
}

// TestHandoffNeverLowersDurability: a page a node holds on its SSD tier
// is handed to an owner that takes it into host memory only: the giver
// keeps its copy (a kill -9 of the owner must not lose an acknowledged,
// durable page) and counts it kept; to an owner with only an SSD tier it
// goes, and the giver's copy is deleted.
func TestHandoffNeverLowersDurability(t *testing.T) {
	for _, ownerTiers := range [][]string{{"host"}, {"ssd"}} {
		t.Run(ownerTiers[0], func(t *testing.T) {
			ctx, a, b, view := handoffPair(t, func(i int, c *node.Config) {
				c.Tiers, c.SSDBytes = []string{"ssd"}, 8<<20 // the host tier's size: equal weights, as viewOf places keys
				if i == 1 {
					c.Tiers = ownerTiers
				}
			})
			k := ownedBy(view, b.ID(), 3)
			id, _ := testnode.PutOn(t, ctx, a.Addr(), desc, []namespace.Key{k}, testnode.PageOf)
			if got := tierOf(t, ctx, a, id, k); got != pb.Tier_TIER_SSD {
				t.Fatalf("a holds the page on %v, want SSD", got)
			}
			poll.Until(t, 15*time.Second, 50*time.Millisecond, "the page handed to b", func() bool {
				return tierOf(t, ctx, b, id, k) != pb.Tier_TIER_UNSPECIFIED
			})
			if ownerTiers[0] == "host" {
				poll.Until(t, 5*time.Second, 50*time.Millisecond, "a counting the page kept", func() bool {
					return a.HandoffStats().Kept == 1
				})
				// More rounds: a asks b again and keeps its copy. (Waiting for
				// nothing to happen: only the clock says the rounds have run.)
				time.Sleep(500 * time.Millisecond)
				if got := tierOf(t, ctx, a, id, k); got != pb.Tier_TIER_SSD {
					t.Fatalf("a dropped its durable copy (holds it on %v) while b holds the page in host memory", got)
				}
				if st := a.HandoffStats(); st.Moved != 0 || st.Kept != 1 || st.Pending != 1 {
					t.Fatalf("a's handoff: %+v, want the page kept and pending, none moved", st)
				}
				return
			}
			poll.Until(t, 5*time.Second, 50*time.Millisecond, "a deleting its copy", func() bool {
				return tierOf(t, ctx, a, id, k) == pb.Tier_TIER_UNSPECIFIED
			})
			if got := tierOf(t, ctx, b, id, k); got != pb.Tier_TIER_SSD {
				t.Fatalf("b holds the page on %v, want SSD", got)
			}
			if st := a.HandoffStats(); st.Moved != 1 || st.Kept != 0 {
				t.Fatalf("a's handoff: %+v, want 1 page moved", st)
			}
		})
	}
}

// TestHandoffPendingPastOneRound: more pages than a round moves (Pages 4),
// each kept pending once its owner holds it in host memory: the walk goes
// on past them, every page reaches the owner, and every one stays here.
func TestHandoffPendingPastOneRound(t *testing.T) {
	ctx, a, b, view := handoffPair(t, func(i int, c *node.Config) {
		c.Tiers, c.SSDBytes = []string{"ssd"}, 8<<20 // equal weights, as viewOf places keys
		if i == 1 {
			c.Tiers = []string{"host"}
		}
		c.Handoff.Pages = 4
	})
	var keys []namespace.Key
	for salt := range byte(10) {
		keys = append(keys, ownedBy(view, b.ID(), 10+salt))
	}
	id, _ := testnode.PutOn(t, ctx, a.Addr(), desc, keys, testnode.PageOf)
	poll.Until(t, 15*time.Second, 50*time.Millisecond, "every page handed to b", func() bool {
		for _, k := range keys {
			if tierOf(t, ctx, b, id, k) == pb.Tier_TIER_UNSPECIFIED {
				return false
			}
		}
		return true
	})
	poll.Until(t, 5*time.Second, 50*time.Millisecond, "a counting them kept", func() bool {
		return a.HandoffStats().Pending == int64(len(keys))
	})
	for _, k := range keys {
		if got := tierOf(t, ctx, a, id, k); got != pb.Tier_TIER_SSD {
			t.Fatalf("a dropped a durable copy (holds it on %v)", got)
		}
	}
}

// TestHandoff: pages put on a node that does not own them (as a client
// does while their owner is unreachable) go back to their owner once it is
// alive: the owner then holds them, the other node no longer does, and a
// client's lookup, which asks the owner, finds them. A page whose parent
// lies on the node that hands it back keeps its place in the sequence.
func TestHandoff(t *testing.T) {
	ctx, a, b, view := handoffPair(t, nil)
	parent, child := ownedBy(view, a.ID(), 1), ownedBy(view, b.ID(), 2)                                 // a sequence: a's page, then b's
	id, size := testnode.PutOn(t, ctx, a.Addr(), desc, []namespace.Key{parent, child}, testnode.PageOf) // both on a

	holds := func(n *testnode.Node, k namespace.Key) bool {
		t.Helper()
		return tierOf(t, ctx, n, id, k) != pb.Tier_TIER_UNSPECIFIED
	}
	poll.Until(t, 15*time.Second, 50*time.Millisecond, "b's page handed back to b", func() bool {
		return holds(b, child) && !holds(a, child)
	})
	if !holds(a, parent) {
		t.Fatal("a gave away the page it owns")
	}
	if st := a.HandoffStats(); st.Moved != 1 || st.Refused != 0 {
		t.Fatalf("a's handoff: %+v, want 1 page moved", st)
	}
	// A client finds the whole sequence: the child on its owner.
	_, ns := openNS(t, a.Addr(), client.Options{}, desc)
	lr, err := ns.Lookup(ctx, []namespace.Key{parent, child}, false, 0)
	if err != nil || lr.HitPrefix != 2 {
		t.Fatalf("lookup after the handoff: %+v, %v", lr, err)
	}
	bufs := [][]byte{make([]byte, size), make([]byte, size)}
	found, err := ns.Get(ctx, []namespace.Key{parent, child}, bufs, nil)
	if err != nil || !found[0] || !found[1] || string(bufs[1]) != string(testnode.PageOf(child, size)) {
		t.Fatalf("get after the handoff: %v, %v", found, err)
	}
}

// TestHandoffWalkAcrossRounds: with a round that examines 5 pages and
// moves at most 2, the walk goes on where it stopped, inside an index
// shard and across shards and rounds, until every page a holds for b is
// back on b and a keeps every page it owns.
func TestHandoffWalkAcrossRounds(t *testing.T) {
	ctx, a, b, view := handoffPair(t, func(_ int, c *node.Config) {
		c.Handoff.Keys, c.Handoff.Pages = 5, 2
	})
	var mine, theirs []namespace.Key
	for i := range 24 { // ownedBy's keys differ in their first byte, so they spread over index shards
		if i%3 == 0 {
			mine = append(mine, ownedBy(view, a.ID(), byte(10+i)))
		} else {
			theirs = append(theirs, ownedBy(view, b.ID(), byte(10+i)))
		}
	}
	id, _ := testnode.PutOn(t, ctx, a.Addr(), desc, append(slices.Clone(mine), theirs...), testnode.PageOf)
	holds := func(n *testnode.Node, k namespace.Key) bool {
		t.Helper()
		return tierOf(t, ctx, n, id, k) != pb.Tier_TIER_UNSPECIFIED
	}
	poll.Until(t, 20*time.Second, 50*time.Millisecond, "every page of b's handed back", func() bool {
		for _, k := range theirs {
			if !holds(b, k) || holds(a, k) {
				return false
			}
		}
		return true
	})
	for _, k := range mine {
		if !holds(a, k) {
			t.Fatalf("a gave away page %x, which it owns", k[:4])
		}
	}
	if st := a.HandoffStats(); st.Moved != int64(len(theirs)) {
		t.Fatalf("a's handoff: %+v, want %d pages moved", st, len(theirs))
	}
}
