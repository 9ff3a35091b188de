package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/placement"
	"github.com/stratakv/strata/registry"
)

// startNodes starts n real nodes gossiping with each other through an
// etcd of the test's own (so that any node may close), with fast
// coordination rounds; the test's cleanup stops them.
func startNodes(t *testing.T, n int) []*testnode.Node {
	t.Helper()
	return startCluster(t, n, nil).Nodes
}

// startCluster starts n nodes as startNodes does, with mod applied to
// each node's config.
func startCluster(t *testing.T, n int, mod func(*node.Config)) *testnode.Cluster {
	t.Helper()
	return testnode.StartCluster(t, n, func(_ int, c *node.Config) {
		c.Tiers, c.HostBytes, c.ShmSocket = []string{"host"}, 8<<20, "off"
		c.CoordRound, c.CoordinatorTTL = 200*time.Millisecond, 2*time.Second
		if mod != nil {
			mod(c)
		}
	})
}

// viewOf is the placement view of nodes, each of weight 1.
func viewOf(t *testing.T, nodes ...*testnode.Node) *placement.View {
	t.Helper()
	var pn []placement.Node
	for _, n := range nodes {
		pn = append(pn, placement.Node{ID: n.ID(), Weight: 1})
	}
	v, err := placement.NewView(pn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ownedBy is a key that view places on node id (salt tells keys apart).
func ownedBy(view *placement.View, id string, salt byte) namespace.Key {
	for i := 0; ; i++ {
		k := namespace.Key{byte(i), byte(i >> 8), salt}
		if view.Node(view.Owner(k)).ID == id {
			return k
		}
	}
}

// seesMembers waits until a client of n sees want members.
func seesMembers(t *testing.T, ctx context.Context, n *testnode.Node, want int) {
	t.Helper()
	poll.Until(t, 20*time.Second, 20*time.Millisecond, fmt.Sprintf("%s sees %d members", n.ID(), want), func() bool {
		c, err := client.Dial(ctx, n.Addr(), client.Options{})
		if err != nil {
			return false
		}
		defer c.Close()
		return len(c.Members()) == want
	})
}

// agreed waits until every node in live applies coordinated cutoffs of one
// epoch above after, published by a live node, and returns the epoch and
// that node.
func agreed(t *testing.T, live []*testnode.Node, after uint64) (uint64, string) {
	t.Helper()
	var epoch uint64
	var by string
	poll.Until(t, 20*time.Second, 20*time.Millisecond, fmt.Sprintf("one coordinated epoch above %d on every node", after), func() bool {
		epoch, by = 0, ""
		for _, n := range live {
			st := n.CoordState()
			if !st.Coordinated || st.Epoch <= after || (epoch != 0 && (st.Epoch != epoch || st.Coordinator != by)) {
				return false
			}
			epoch, by = st.Epoch, st.Coordinator
		}
		for _, n := range live {
			if n.ID() == by {
				return true
			}
		}
		return false
	})
	return epoch, by
}

// TestNodesElectOneCoordinator: three nodes elect one coordinator whose
// cutoffs every node applies; when its node closes another takes over
// with a larger epoch.
func TestNodesElectOneCoordinator(t *testing.T) {
	nodes := startNodes(t, 3)
	epoch, leader := agreed(t, nodes, 0)
	leading := 0
	var rest []*testnode.Node
	for _, n := range nodes {
		if n.CoordState().Leading {
			leading++
		}
		if n.ID() != leader {
			rest = append(rest, n)
		}
	}
	if leading != 1 {
		t.Fatalf("%d nodes lead", leading)
	}
	for _, n := range nodes {
		if n.ID() == leader {
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	epoch2, leader2 := agreed(t, rest, epoch)
	if leader2 == leader {
		t.Fatalf("closed node %s still coordinates", leader)
	}
	t.Logf("coordinator %s epoch %d, then %s epoch %d", leader, epoch, leader2, epoch2)
}

// TestRemoteChildHints: a child page committed on a node that does not
// hold its parent makes that node send a hint to the parent's owner.
func TestRemoteChildHints(t *testing.T) {
	nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	view := viewOf(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Wait until b sees a: hints go to alive members only.
	seesMembers(t, ctx, b, 2)
	var parent namespace.Key
	for i := 0; ; i++ {
		parent = namespace.Key{byte(i), byte(i >> 8), 1}
		if view.Node(view.Owner(parent)).ID == a.ID() {
			break
		}
	}
	put := func(addr string, p client.Page) {
		t.Helper()
		c, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ns, err := c.Open(ctx, desc)
		if err != nil {
			t.Fatal(err)
		}
		p.Data = testnode.PageOf(p.Key, ns.PageBytes())
		res, err := ns.Put(ctx, []client.Page{p})
		if err != nil || !res[0].Status.Stored() {
			t.Fatalf("put on %s: %+v, %v", addr, res, err)
		}
	}
	put(a.Addr(), client.Page{Key: parent})
	var child namespace.Key // owned by b: the client puts it there
	for i := 0; ; i++ {
		child = namespace.Key{9, byte(i), byte(i >> 8)}
		if view.Node(view.Owner(child)).ID == b.ID() {
			break
		}
	}
	put(b.Addr(), client.Page{Key: child, Parent: parent, HasParent: true, Depth: 1})
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "b sends the hint", func() bool { return b.HintStats().Sent >= 1 })
	if st := b.HintStats(); st.Dropped != 0 {
		t.Fatalf("b dropped hints: %+v", st)
	}
}

// TestSummariesReportedNotGossiped: a node's gossip metadata carries its
// addresses and tiers but no value summaries (they made each member's
// metadata some 330 bytes, carried to every member and in every
// push-pull, issue 45); the coordinator asks for them instead, and its
// cutoffs count every node's tier.
func TestSummariesReportedNotGossiped(t *testing.T) {
	c := startCluster(t, 3, nil)
	agreed(t, c.Nodes, 0)
	ctx := t.Context()
	reg, err := registry.Open(ctx, registry.Config{Endpoints: c.Etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	poll.Until(t, 20*time.Second, 20*time.Millisecond, "cutoffs over the 3 nodes' host tiers", func() bool {
		cut, err := reg.CurrentCutoffs(ctx)
		return err == nil && len(cut.Tiers) == 1 && cut.Tiers[0].Nodes == 3
	})

	// An observer in the gossip cluster sees what a member sees.
	obs, err := membership.Start(ctx, membership.Config{NodeID: "observer", Seeds: []string{c.Nodes[0].GossipAddress()}})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	var seen []membership.Member
	poll.Until(t, 20*time.Second, 20*time.Millisecond, "the observer sees the 3 nodes' tiers", func() bool {
		seen = seen[:0]
		for _, m := range obs.Alive() {
			if len(m.Meta.Tiers) > 0 {
				seen = append(seen, m)
			}
		}
		return len(seen) == 3
	})
	for _, m := range seen {
		if len(m.Meta.Summary) > 0 {
			t.Errorf("%s gossips %d bytes of summaries", m.NodeID, len(m.Meta.Summary))
		}
	}
}
