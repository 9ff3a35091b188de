package client_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// twoWithoutHandoff starts two nodes (host tier, no shm) that hand no page
// back: pages put on a non-owner stay there.
func twoWithoutHandoff(tb testing.TB) []*clusterNode {
	tb.Helper()
	var nodes []*clusterNode
	for range 2 {
		nodes = append(nodes, addNodeWith(tb, nodes, func(c *node.Config) {
			c.Tiers, c.ShmSocket, c.Handoff.Every = []string{"host"}, "off", -1
		}))
	}
	waitNodeView(tb, nodes[0], 2)
	return nodes
}

// fallbackCluster is two nodes that hand nothing back (the pages a test
// puts on a non-owner stay there), a chain of keys every one of which
// the second node owns, put on the first, and a dialer of fresh clients
// without a location cache.
func fallbackCluster(t *testing.T, chain int) (nodes []*clusterNode, keys []namespace.Key,
	fresh func(window time.Duration) *client.Namespace) {
	t.Helper()
	nodes = twoWithoutHandoff(t)
	dial := func(window time.Duration) (*client.Client, *client.Namespace) {
		c := dialWith(t, nodes[0].Addr(), client.Options{CacheEntries: -1, FallbackWindow: window})
		waitMembers(t, c, "2 alive", alive(2))
		ns, err := c.Open(ctxT(t), llama())
		if err != nil {
			t.Fatal(err)
		}
		return c, ns
	}
	c, _ := dial(-1)
	keys = keysOwnedBy(c, nodes[1].ID(), chain, rand.New(rand.NewPCG(5, 6)))
	testnode.PutOn(t, ctxT(t), nodes[0].Addr(), llama(), keys, pageData)
	return nodes, keys, func(window time.Duration) *client.Namespace {
		_, ns := dial(window)
		return ns
	}
}

// TestFallbackFindsPagesOnTheNextCandidate: pages put on a key's next
// candidate while its owner was away are found by a fresh client without a
// location cache, lookup and get, with a lease and without, while the
// owner is young in its view; with the fallback off, or once the window
// has passed, they are misses (until handed back). The nodes count each
// lookup's keys once (the probe is taken back out on the next candidate)
// and the hits where they were served.
func TestFallbackFindsPagesOnTheNextCandidate(t *testing.T) {
	nodes, keys, fresh := fallbackCluster(t, 6)
	counts := func() (lookupKeys, hitKeys uint64) {
		for _, nd := range nodes {
			resp, err := pb.NewAdminClient(rawConn(t, nd.Addr())).ListNamespaces(ctxT(t), &pb.ListNamespacesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ns := range resp.GetNamespaces() {
				lookupKeys += ns.GetLookupKeys()
				hitKeys += ns.GetHitKeys()
			}
		}
		return lookupKeys, hitKeys
	}
	for _, tc := range []struct {
		window time.Duration
		wait   time.Duration
		found  bool
	}{{30 * time.Second, 0, true}, {-1, 0, false}, {300 * time.Millisecond, 500 * time.Millisecond, false}} {
		t.Run(fmt.Sprint(tc.window, tc.wait), func(t *testing.T) {
			ns := fresh(tc.window)
			time.Sleep(tc.wait) // past the fallback window: only the clock closes it
			want := 0
			if tc.found {
				want = len(keys)
			}
			keys0, hits0 := counts()
			for _, lease := range []bool{true, false} {
				lr, err := ns.Lookup(ctxT(t), keys, lease, 0)
				if err != nil || lr.HitPrefix != want {
					t.Fatalf("lookup (lease %v): hit %d, %v; want %d", lease, lr.HitPrefix, err, want)
				}
				bufs := buffers(len(keys), ns.PageBytes())
				found, err := ns.Get(ctxT(t), keys, bufs, lr.Lease)
				if err != nil {
					t.Fatal(err)
				}
				if n := checkBytes(t, ns, keys, bufs, found); n != want {
					t.Fatalf("get (lease %v): %d pages found, want %d", lease, n, want)
				}
				if lr.Lease != nil {
					lr.Lease.Release(ctxT(t))
				}
			}
			if k, h := counts(); k-keys0 != uint64(2*len(keys)) || h-hits0 != uint64(2*want) {
				t.Fatalf("the nodes counted %d looked-up keys and %d hits; want %d and %d", k-keys0, h-hits0,
					2*len(keys), 2*want)
			}
		})
	}
}

// BenchmarkLookupMissYoungOwner is the cost of the fallback: a lookup of
// 8 keys none of which any node holds, with the fallback off, on while
// their owner is old in the view (window 1ns: no more rounds) and on while
// it is young (one more round, to the next candidates).
func BenchmarkLookupMissYoungOwner(b *testing.B) {
	nodes := twoWithoutHandoff(b)
	for _, tc := range []struct {
		name   string
		window time.Duration
	}{{"fallback-off", -1}, {"owner-old", time.Nanosecond}, {"owner-young", time.Hour}} {
		window := tc.window
		b.Run(tc.name, func(b *testing.B) {
			c := dialWith(b, nodes[0].Addr(), client.Options{CacheEntries: -1, FallbackWindow: window, NoShm: true})
			waitMembers(b, c, "2 alive", alive(2))
			ns, err := c.Open(ctxT(b), llama())
			if err != nil {
				b.Fatal(err)
			}
			keys := keysOwnedBy(c, nodes[1].ID(), 8, rand.New(rand.NewPCG(7, 8)))
			for b.Loop() {
				if lr, err := ns.Lookup(ctxT(b), keys, false, 0); err != nil || lr.HitPrefix != 0 {
					b.Fatal(lr.HitPrefix, err)
				}
			}
		})
	}
}
