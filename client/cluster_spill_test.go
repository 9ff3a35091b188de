package client_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// startSmallCluster runs n real nodes whose only tier is a host tier of
// hostBytes, as startCluster does. Their one tenant may reserve the whole
// tier (ReserveShare 1): the tests fill nodes with puts of a tier or more.
func startSmallCluster(t testing.TB, n int, hostBytes int64) []*clusterNode {
	t.Helper()
	var nodes []*clusterNode
	for range n {
		nodes = append(nodes, addNodeWith(t, nodes, func(c *node.Config) {
			c.HostBytes, c.Tiers, c.ShmSocket, c.CoordRound = hostBytes, []string{"host"}, "off", 200*time.Millisecond
			c.ReserveShare = 1
		}))
	}
	waitNodeView(t, nodes[0], n)
	return nodes
}

// openSmallCluster starts n nodes as startSmallCluster does, dials them
// and opens namespace d.
func openSmallCluster(t testing.TB, n int, hostBytes int64, d namespace.Descriptor) ([]*clusterNode, *client.Client, *client.Namespace) {
	t.Helper()
	nodes := startSmallCluster(t, n, hostBytes)
	c := dialWith(t, nodes[0].Addr(), client.Options{})
	waitMembers(t, c, fmt.Sprintf("%d alive", n), alive(n))
	ns, err := c.Open(ctxT(t), d)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, c, ns
}

// keysOwnedBy returns n random root keys whose owner is node id.
func keysOwnedBy(c *client.Client, id string, n int, r *rand.Rand) []namespace.Key {
	var out []namespace.Key
	for len(out) < n {
		var k namespace.Key
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		if c.Owner(k) == id {
			out = append(out, k)
		}
	}
	return out
}

// rootPages are pages without parents (each its own sequence), so that
// leaf-first ordering plays no part.
func rootPages(ns *client.Namespace, keys []namespace.Key) []client.Page {
	pages := make([]client.Page, len(keys))
	for i, k := range keys {
		pages[i] = client.Page{Key: k, Data: pageData(k, ns.PageBytes())}
	}
	return pages
}

// lookupAll looks each key up alone (each is its own sequence) times
// times, and returns the keys found.
func lookupAll(t testing.TB, ns *client.Namespace, keys []namespace.Key, times int) []namespace.Key {
	t.Helper()
	var found []namespace.Key
	for range times {
		found = found[:0]
		for _, k := range keys {
			lr, err := ns.Lookup(ctxT(t), []namespace.Key{k}, false, 0)
			if err != nil {
				t.Fatal(err)
			}
			if lr.HitPrefix == 1 {
				found = append(found, k)
			}
		}
	}
	return found
}

// waitCutoff waits until the node at addr applies a coordinated cutoff
// above zero on its first tier, published at least three rounds after the
// one it applies now: by then the coordinator has merged summaries taken
// after this call (a round refreshes and gossips them, the next merges).
func waitCutoff(t testing.TB, addr string) *pb.CutoffState {
	t.Helper()
	cl := pb.NewClusterClient(rawConn(t, addr))
	state := func() *pb.CutoffState {
		resp, err := cl.Members(ctxT(t), &pb.MembersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetCutoffs()
	}
	start := state()
	var cs *pb.CutoffState
	if !poll.Within(20*time.Second, 50*time.Millisecond, func() bool {
		cs = state()
		fresh := cs.GetEpoch() > start.GetEpoch() || cs.GetRound() >= start.GetRound()+3
		return cs.GetCoordinated() && fresh && len(cs.GetTiers()) > 0 && cs.GetTiers()[0].GetWorth() > 0
	}) {
		t.Fatalf("no fresh coordinated cutoff within 20s: %v", cs)
	}
	return cs
}

// TestClusterSpillNotAdmitted: the owner's only tier is full of pages that
// lookups keep hitting, and the cluster is past its headroom, so the
// coordinator publishes a cutoff; the owner refuses new, never-hit pages
// of a much smaller model as not admitted (worth less than
// eviction.DefaultAdmitShare of the cutoff), and the client puts them
// on their second placement candidate, which has room. The hot pages stay,
// and lookups find the spilled ones.
func TestClusterSpillNotAdmitted(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed>>1))
	d := llama()
	d.Compute = namespace.ComputeProfile{Params: 8e9, AttentionHeads: 32, AttentionHeadDim: 128}
	nodes, c, ns := openSmallCluster(t, 2, 1<<20, d)
	ctx := ctxT(t)
	owner, other := nodes[0], nodes[1]
	perNode := 1 << 20 / ns.PageBytes()

	// The owner full of hot pages, the other node 7/8 full of warm ones:
	// the cluster holds more than 90% of its capacity.
	hot := keysOwnedBy(c, owner.ID(), perNode, r)
	warm := keysOwnedBy(c, other.ID(), perNode*7/8, r)
	for _, keys := range [][]namespace.Key{hot, warm} {
		if _, err := ns.Put(ctx, rootPages(ns, keys)); err != nil {
			t.Fatal(err)
		}
	}
	kept := lookupAll(t, ns, hot, 8)
	lookupAll(t, ns, warm, 2)
	if len(kept) < len(hot)*3/4 {
		t.Fatalf("only %d of %d hot pages stored", len(kept), len(hot))
	}
	cs := waitCutoff(t, owner.Addr())
	t.Logf("owner applies cutoff %v (epoch %d)", cs.GetTiers()[0].GetWorth(), cs.GetEpoch())
	ownerBefore, otherBefore := nodePages(t, owner.Addr()), nodePages(t, other.Addr())

	// Cold pages: never hit, and of a model 80 times smaller (the same page
	// size, an 80th of the FLOPs to recompute), so worth far less than
	// eviction.DefaultAdmitShare of the cutoff.
	small := d
	small.Model, small.Compute.Params = "tiny", 1e8
	sns, err := c.Open(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	cold := keysOwnedBy(c, owner.ID(), perNode/16, r)
	res, err := sns.Put(ctx, rootPages(sns, cold))
	mustStore(t, "put of the cold pages", res, err)
	ownerAfter, otherAfter := nodePages(t, owner.Addr()), nodePages(t, other.Addr())
	t.Logf("owner %d -> %d pages, spill candidate %d -> %d, %d cold pages put", ownerBefore, ownerAfter, otherBefore, otherAfter, len(cold))
	if otherAfter-otherBefore != len(cold) || ownerAfter != ownerBefore {
		t.Fatalf("spill candidate took %d of %d cold pages, owner went from %d to %d",
			otherAfter-otherBefore, len(cold), ownerBefore, ownerAfter)
	}
	if got := lookupAll(t, ns, kept, 1); len(got) != len(kept) {
		t.Fatalf("%d of %d hot pages left after the cold puts", len(got), len(kept))
	}
	if got := lookupAll(t, sns, cold, 1); len(got) != len(cold) {
		t.Fatalf("lookups found %d of %d spilled pages", len(got), len(cold))
	}
}
