package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/leaktest"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// TestParentGoneDropsRemoteChild: a parent on node a whose child is on
// node b (each where placement puts it); when a deletes the parent, its
// parent-gone notice reaches b, which drops the child at once, without a
// lookup. Run twice: the second run leaves no goroutine behind.
func TestParentGoneDropsRemoteChild(t *testing.T) {
	leaktest.Twice(t, func() { parentGone(t) })
}

func parentGone(t *testing.T) {
	cluster := startCluster(t, 2, func(c *node.Config) { c.OrphanGrace = -1 })
	defer cluster.Close()
	nodes := cluster.Nodes
	a, b := nodes[0], nodes[1]
	view := viewOf(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Hints and notices go to alive members only: wait until each node
	// sees the other.
	for _, n := range nodes {
		seesMembers(t, ctx, n, 2)
	}
	parent, child := ownedBy(view, a.ID(), 1), ownedBy(view, b.ID(), 2)

	var closers []*client.Client // closed before the nodes stop
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	open := func(n *testnode.Node) *client.Namespace {
		t.Helper()
		c, err := client.Dial(ctx, n.Addr(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, c)
		ns, err := c.Open(ctx, desc)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	onA, onB := open(a), open(b)
	put := func(ns *client.Namespace, p client.Page) {
		t.Helper()
		p.Data = testnode.PageOf(p.Key, ns.PageBytes())
		res, err := ns.Put(ctx, []client.Page{p})
		if err != nil || !res[0].Status.Stored() {
			t.Fatalf("put: %+v, %v", res, err)
		}
	}
	held := func(ns *client.Namespace, k namespace.Key) bool {
		t.Helper()
		res, err := ns.Lookup(ctx, []namespace.Key{k}, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.HitPrefix == 1
	}
	put(onA, client.Page{Key: parent})
	put(onB, client.Page{Key: child, Parent: parent, HasParent: true, Depth: 1})
	// b's child hint reached a (the RPC applies it before answering), so
	// a knows its page has a remote child.
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "b sends the child hint", func() bool { return b.HintStats().Sent >= 1 })

	sent := a.HintStats().Sent
	if n, err := onA.Delete(ctx, []namespace.Key{parent}); err != nil || n != 1 {
		t.Fatalf("deleting the parent: %d, %v", n, err)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "b drops the orphan", func() bool { return !held(onB, child) })
	// a counts the notice once b has answered, which is after b dropped
	// the child: wait for it too.
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "a counts the notice it sent", func() bool { return a.HintStats().Sent > sent })
}
