package client_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/leaktest"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/stacks"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestClusterSpreadsPages: a client given one node's address learns the
// whole cluster, spreads a long prompt's pages over all three nodes, and
// finds, leases and reads them back; another client, given another node
// and no cache, finds them too.
func TestClusterSpreadsPages(t *testing.T) {
	nodes := startCluster(t, 3)
	c := dialWith(t, nodes[0].Addr(), client.Options{})
	waitMembers(t, c, "3 alive", alive(3))
	ns := open(t, c)
	ctx := ctxT(t)
	keys := ns.PageKeys(tokens(16*300+7, 5))
	putAll(t, ns, keys)
	total := 0
	for i, n := range nodes {
		p := nodePages(t, n.Addr())
		if p < 50 || p > 150 {
			t.Errorf("node %d holds %d of 300 pages", i, p)
		}
		total += p
	}
	if total != 300 {
		t.Errorf("nodes hold %d pages, want 300", total)
	}

	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lr.HitPrefix != 300 || lr.Lease == nil || lr.Lease.Pages != 300 {
		t.Fatalf("lookup: hit prefix %d, lease %+v", lr.HitPrefix, lr.Lease)
	}
	bufs := buffers(len(keys), ns.PageBytes())
	found, err := ns.Get(ctx, keys, bufs, lr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkBytes(t, ns, keys, bufs, found); n != 300 {
		t.Fatalf("read %d of 300 pages", n)
	}
	if err := lr.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A prompt that shares the first 100 pages, then diverges.
	other := tokens(16*300, 5)
	for i := 16 * 100; i < len(other); i++ {
		other[i] = 7
	}
	if lr, err := ns.Lookup(ctx, ns.PageKeys(other), true, 0); err != nil || lr.HitPrefix != 100 || lr.Lease.Pages != 100 {
		t.Fatalf("diverging prompt: hit prefix %d, %v", lr.HitPrefix, err)
	} else if err := lr.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	if d, err := ns.Delete(ctx, keys[150:151]); err != nil || d != 1 {
		t.Fatalf("delete: %d, %v", d, err)
	}
	// Node leases that cover nothing of the hit prefix are released: a
	// lookup whose first key is missing keeps none. Close waits for the
	// background releases.
	c3 := dialWith(t, nodes[1].Addr(), client.Options{})
	waitMembers(t, c3, "3 alive", alive(3))
	missFirst := append([]namespace.Key{keys[150]}, keys[151:]...)
	if lr, err := open(t, c3).Lookup(ctx, missFirst, true, time.Minute); err != nil || lr.HitPrefix != 0 || lr.Lease != nil {
		t.Fatalf("lookup with the first key missing: hit prefix %d, lease %v, %v", lr.HitPrefix, lr.Lease, err)
	}
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		info, err := pb.NewAdminClient(rawConn(t, n.Addr())).NodeInfo(ctx, &pb.NodeInfoRequest{})
		if err != nil || info.GetLeasesActive() != 0 {
			t.Fatalf("node %d: %d leases active, %v", i, info.GetLeasesActive(), err)
		}
	}

	c2 := dialWith(t, nodes[2].Addr(), client.Options{CacheEntries: -1})
	waitMembers(t, c2, "3 alive", alive(3))
	lr2, err := open(t, c2).Lookup(ctx, keys, false, 0)
	if err != nil || lr2.HitPrefix != 150 {
		t.Fatalf("second client: hit prefix %d, %v", lr2.HitPrefix, err)
	}
	for i, p := range lr2.Present {
		if p != (i != 150) {
			t.Fatalf("second client: page %d present=%v", i, p)
		}
	}
}

// TestClusterNodeStops: readers keep looking up and loading while a node
// stops, the one the client learned the view from; every call returns
// within NodeTimeout, found pages always hold their own bytes, the client
// follows the view through another node, and once the view drops the node
// its pages are misses. Writing them again puts them on the remaining
// nodes.
func TestClusterNodeStops(t *testing.T) {
	nodes := startCluster(t, 3)
	const nodeTimeout = 2 * time.Second
	victim := nodes[2]
	// Given only the victim's address, the client must move its membership
	// watch to another node when the victim goes.
	c := dialWith(t, victim.Addr(), client.Options{NodeTimeout: nodeTimeout})
	waitMembers(t, c, "3 alive", alive(3))
	ns := open(t, c)
	keys := ns.PageKeys(tokens(16*96, 11))
	putAll(t, ns, keys)
	c.WaitCache()
	owner := owners(c, keys)

	var (
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		calls atomic.Int64
	)
	for range 2 {
		wg.Go(func() {
			bufs := buffers(len(keys), ns.PageBytes())
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var lr client.LookupResult
				var err error
				within(t, nodeTimeout+time.Second, "lookup", func() { lr, err = ns.Lookup(ctx, keys, true, 0) })
				if err != nil {
					t.Errorf("lookup: %v", err)
				}
				var found []bool
				within(t, nodeTimeout+time.Second, "get", func() {
					found, err = ns.Get(ctx, keys[:lr.HitPrefix], bufs[:lr.HitPrefix], lr.Lease)
				})
				if err != nil {
					t.Errorf("get: %v", err)
				}
				checkBytes(t, ns, keys[:lr.HitPrefix], bufs[:lr.HitPrefix], found)
				if lr.Lease != nil {
					_ = lr.Lease.Release(ctx)
				}
				cancel()
				calls.Add(1)
			}
		})
	}
	poll.Until(t, 30*time.Second, 10*time.Millisecond, "8 calls before the kill", func() bool { return calls.Load() >= 8 })
	if err := victim.Close(); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, c, "2 alive", alive(2))
	at := calls.Load()
	poll.Until(t, 30*time.Second, 10*time.Millisecond, "8 calls after the kill", func() bool { return calls.Load() >= at+8 })
	close(stop)
	wg.Wait()

	ctx := ctxT(t)
	lr, err := ns.Lookup(ctx, keys, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i, p := range lr.Present {
		if p != (owner[i] != victim.ID()) {
			t.Fatalf("page %d (owner %s) present=%v after %s stopped", i, owner[i], p, victim.ID())
		}
		if !p {
			lost++
		}
	}
	if lost == 0 || lost == len(keys) {
		t.Fatalf("%d of %d pages lost with one node of three", lost, len(keys))
	}
	putAll(t, ns, keys)
	if lr, err := ns.Lookup(ctx, keys, false, 0); err != nil || lr.HitPrefix != len(keys) {
		t.Fatalf("after writing again: hit prefix %d, %v", lr.HitPrefix, err)
	}
}

// TestClusterHungNode: a member that accepts connections and never answers
// costs each call at most NodeTimeout, or the caller's shorter deadline;
// its keys are misses, then it is routed around; Close cuts a call short.
func TestClusterHungNode(t *testing.T) {
	a, b := startNode(t, nil), startNode(t, nil)
	hung := hungListener(t)
	fake, fakeAddr, _ := serveFake(t, "fake")
	fake.set(member("a", a.Addr(), pb.MemberState_MEMBER_STATE_ALIVE),
		member("b", b.Addr(), pb.MemberState_MEMBER_STATE_ALIVE),
		member("hung", hung, pb.MemberState_MEMBER_STATE_ALIVE))
	const nodeTimeout = 300 * time.Millisecond
	const slack = 700 * time.Millisecond

	t.Run("dial", func(t *testing.T) {
		var err error
		within(t, nodeTimeout+slack, "dial past a hung seed", func() {
			var c *client.Client
			c, err = client.Dial(ctxT(t), hung, client.Options{NodeTimeout: nodeTimeout, Seeds: []string{fakeAddr}})
			if err == nil {
				c.Close()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		within(t, 100*time.Millisecond+slack, "dial of a hung node alone", func() {
			_, err = client.Dial(ctx, hung, client.Options{})
		})
		if !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("dialing a hung node: %v", err)
		}
	})

	t.Run("every call meets it", func(t *testing.T) {
		// No quarantine to speak of, no location cache: every call asks the
		// hung node about its keys.
		c := dialWith(t, fakeAddr, client.Options{NodeTimeout: nodeTimeout, Quarantine: time.Nanosecond,
			CacheEntries: -1})
		var ns *client.Namespace
		within(t, nodeTimeout+slack, "open", func() { ns = open(t, c) })
		keys := ns.PageKeys(tokens(16*60, 3))
		var res []client.PutResult
		var err error
		within(t, 2*nodeTimeout+slack, "put", func() {
			res, err = ns.Put(ctxT(t), client.ChainPages(keys, pagesFor(ns, keys)))
		})
		mustStore(t, "put", res, err) // the hung node's pages spilled to their next candidate
		var lr client.LookupResult
		within(t, nodeTimeout+slack, "lookup", func() { lr, err = ns.Lookup(ctxT(t), keys, true, 0) })
		if err != nil {
			t.Fatal(err)
		}
		owned := 0
		for i, k := range keys {
			if c.Owner(k) == "hung" {
				owned++
			}
			if lr.Present[i] != (c.Owner(k) != "hung") {
				t.Fatalf("page %d (owner %s) present=%v", i, c.Owner(k), lr.Present[i])
			}
		}
		if owned == 0 {
			t.Fatal("the hung node owns no key")
		}
		bufs := buffers(len(keys), ns.PageBytes())
		var found []bool
		within(t, nodeTimeout+slack, "get", func() { found, err = ns.Get(ctxT(t), keys, bufs, lr.Lease) })
		if err != nil {
			t.Fatal(err)
		}
		if n := checkBytes(t, ns, keys, bufs, found); n < lr.HitPrefix {
			t.Fatalf("read %d pages of a %d-page hit prefix", n, lr.HitPrefix)
		}

		// The caller's deadline, shorter than NodeTimeout, wins.
		slow := dialWith(t, fakeAddr, client.Options{NodeTimeout: time.Minute, Quarantine: time.Nanosecond, CacheEntries: -1})
		octx, ocancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer ocancel()
		var sns *client.Namespace
		within(t, 200*time.Millisecond+slack, "open under a short deadline", func() { sns, err = slow.Open(octx, llama()) })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		within(t, 100*time.Millisecond+slack, "lookup under a short deadline", func() { _, err = sns.Lookup(ctx, keys, false, 0) })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lookup past its deadline: %v", err)
		}

		// Close cuts a call in flight short.
		done := make(chan error, 1)
		go func() {
			_, err := sns.Lookup(context.Background(), keys, false, 0)
			done <- err
		}()
		poll.Until(t, 5*time.Second, time.Millisecond, "the lookup waiting on the hung node", func() bool {
			return len(done) > 0 || stacks.Blocked("client.(*Namespace).Lookup", "client_test.TestClusterHungNode")
		})
		within(t, slack, "close with a call in flight", func() { slow.Close() })
		if err := <-done; !errors.Is(err, client.ErrClosed) {
			t.Fatalf("lookup cut by Close: %v", err)
		}
		if _, err := sns.Lookup(ctxT(t), keys, false, 0); !errors.Is(err, client.ErrClosed) {
			t.Fatalf("lookup after Close: %v", err)
		}
	})

	t.Run("quarantine", func(t *testing.T) {
		c := dialWith(t, fakeAddr, client.Options{NodeTimeout: nodeTimeout, Quarantine: time.Minute})
		ns := open(t, c) // the handshake with the hung node fails: quarantined
		keys := ns.PageKeys(tokens(16*60, 4))
		within(t, slack, "put around the hung node", func() { putAll(t, ns, keys) })
		var lr client.LookupResult
		var err error
		within(t, slack, "lookup around the hung node", func() { lr, err = ns.Lookup(ctxT(t), keys, true, 0) })
		if err != nil || lr.HitPrefix != len(keys) {
			t.Fatalf("lookup: hit prefix %d, %v", lr.HitPrefix, err)
		}
		bufs := buffers(len(keys), ns.PageBytes())
		found, err := ns.Get(ctxT(t), keys, bufs, lr.Lease)
		if err != nil {
			t.Fatal(err)
		}
		if n := checkBytes(t, ns, keys, bufs, found); n != len(keys) {
			t.Fatalf("read %d of %d", n, len(keys))
		}
	})
}

// TestClusterFourthNode: a fourth node of equal weight takes about a
// quarter of the keys. A client without the location cache and without the
// fallback misses exactly the pages whose owner changed; with the fallback
// (the new owner is young) it finds them all on their old owners, the
// next candidates; the client that wrote them still finds them all where
// they are, through its cache.
func TestClusterFourthNode(t *testing.T) {
	nodes := startCluster(t, 3)
	// Generous NodeTimeouts: the race detector slows the large puts down.
	writer := dialWith(t, nodes[0].Addr(), client.Options{NodeTimeout: 10 * time.Second})
	plain := dialWith(t, nodes[1].Addr(), client.Options{NodeTimeout: 10 * time.Second, CacheEntries: -1,
		FallbackWindow: -1})
	young := dialWith(t, nodes[1].Addr(), client.Options{NodeTimeout: 10 * time.Second, CacheEntries: -1})
	waitMembers(t, writer, "3 alive", alive(3))
	waitMembers(t, plain, "3 alive", alive(3))
	waitMembers(t, young, "3 alive", alive(3))
	wns, pns, yns := open(t, writer), open(t, plain), open(t, young)
	keys := wns.PageKeys(tokens(16*400, 21))
	putAll(t, wns, keys)
	writer.WaitCache()
	before := owners(writer, keys)

	fourth := addNode(t, []*clusterNode{nodes[0]})
	waitMembers(t, writer, "4 alive", alive(4))
	waitMembers(t, plain, "4 alive", alive(4))
	waitMembers(t, young, "4 alive", alive(4))
	moved := 0
	for i, k := range keys {
		switch after := writer.Owner(k); {
		case after == before[i]:
		case after == fourth.ID():
			moved++
		default:
			t.Fatalf("key %d moved from %s to %s, not to the new node", i, before[i], after)
		}
	}
	if frac := float64(moved) / float64(len(keys)); frac < 0.15 || frac > 0.35 {
		t.Fatalf("%d of %d keys (%.2f) changed owner", moved, len(keys), frac)
	}

	ctx := ctxT(t)
	plr, err := pns.Lookup(ctx, keys, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range plr.Present {
		if p != (writer.Owner(keys[i]) == before[i]) {
			t.Fatalf("uncached client: page %d present=%v", i, p)
		}
	}
	if ylr, err := yns.Lookup(ctx, keys, false, 0); err != nil || ylr.HitPrefix != len(keys) {
		t.Fatalf("uncached client with the fallback: hit prefix %d of %d, %v", ylr.HitPrefix, len(keys), err)
	}
	wlr, err := wns.Lookup(ctx, keys, true, 0)
	if err != nil || wlr.HitPrefix != len(keys) {
		t.Fatalf("writer: hit prefix %d of %d, %v", wlr.HitPrefix, len(keys), err)
	}
	bufs := buffers(len(keys), wns.PageBytes())
	found, err := wns.Get(ctx, keys, bufs, wlr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkBytes(t, wns, keys, bufs, found); n != len(keys) {
		t.Fatalf("writer read %d of %d", n, len(keys))
	}
	if err := wlr.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The uncached client writes the moved pages again: to the new node.
	putAll(t, pns, keys)
	if p := nodePages(t, fourth.Addr()); p != moved {
		t.Fatalf("the new node holds %d pages, %d moved to it", p, moved)
	}
}

// TestClusterStaleCache: cache entries that went stale (pages deleted
// behind the client's back, a node gone) cost misses, never errors or
// wrong bytes, and heal.
func TestClusterStaleCache(t *testing.T) {
	nodes := startCluster(t, 3)
	c := dialWith(t, nodes[0].Addr(), client.Options{NodeTimeout: time.Second})
	waitMembers(t, c, "3 alive", alive(3))
	ns := open(t, c)
	ctx := ctxT(t)
	keys := ns.PageKeys(tokens(16*120, 8))
	putAll(t, ns, keys)
	c.WaitCache()

	// Delete pages of nodes[1] through a plain client: the cache still
	// says they are there.
	direct, err := dial(t, nodes[1].Addr(), "").Open(ctx, llama())
	if err != nil {
		t.Fatal(err)
	}
	var gone []int
	for i, k := range keys {
		if c.Owner(k) == nodes[1].ID() {
			gone = append(gone, i)
		}
	}
	for _, i := range gone {
		if d, err := direct.Delete(ctx, keys[i:i+1]); err != nil || d != 1 {
			t.Fatalf("direct delete: %d, %v", d, err)
		}
	}
	// A Put the stale cache skips: the pages stay missing (a miss, no error).
	res, err := ns.Put(ctx, client.ChainPages(keys, pagesFor(ns, keys)))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range gone {
		if res[i].Status != client.Exists {
			t.Fatalf("page %d: %v, want Exists from the cache", i, res[i].Status)
		}
	}
	bufs := buffers(len(keys), ns.PageBytes())
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkBytes(t, ns, keys, bufs, found); n != len(keys)-len(gone) {
		t.Fatalf("read %d pages, want %d", n, len(keys)-len(gone))
	}
	lr, err := ns.Lookup(ctx, keys, false, 0)
	if err != nil || lr.HitPrefix != gone[0] {
		t.Fatalf("lookup: hit prefix %d (first deleted %d), %v", lr.HitPrefix, gone[0], err)
	}
	c.WaitCache()
	// The lookup dropped the stale entries: writing again stores them.
	res, err = ns.Put(ctx, client.ChainPages(keys, pagesFor(ns, keys)))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range gone {
		if res[i].Status != client.Committed {
			t.Fatalf("page %d written again: %v %s", i, res[i].Status, res[i].Reason)
		}
	}

	// A node goes: entries naming it are ignored.
	victim := nodes[2]
	if lr, err := ns.Lookup(ctx, keys, false, 0); err != nil || lr.HitPrefix != len(keys) {
		t.Fatalf("before the stop: hit prefix %d, %v", lr.HitPrefix, err)
	}
	c.WaitCache()
	if err := victim.Close(); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, c, "2 alive", alive(2))
	lr, err = ns.Lookup(ctx, keys, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	found, err = ns.Get(ctx, keys, bufs, lr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkBytes(t, ns, keys, bufs, found); n < lr.HitPrefix {
		t.Fatalf("read %d pages of a %d-page hit prefix", n, lr.HitPrefix)
	}
	for i := range keys {
		if found[i] == lr.Present[i] {
			continue
		}
		t.Fatalf("page %d: present %v, found %v", i, lr.Present[i], found[i])
	}
}

// TestClusterWatchFailover: when the node the client watches goes away,
// the client re-subscribes to another and keeps following the view; Close
// leaves no goroutine behind.
func TestClusterWatchFailover(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		fa, addrA, stopA := serveFake(t, "a")
		fb, addrB, stopB := serveFake(t, "b")
		defer stopA()
		defer stopB()
		view := []*pb.Member{member("a", addrA, pb.MemberState_MEMBER_STATE_ALIVE),
			member("b", addrB, pb.MemberState_MEMBER_STATE_ALIVE)}
		fa.set(view...)
		fb.set(view...)
		c, err := client.Dial(ctxT(t), addrA, client.Options{NodeTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		waitMembers(t, c, "a and b", alive(2))
		stopA()
		fb.set(append(view, member("c", "127.0.0.1:1", pb.MemberState_MEMBER_STATE_ALIVE))...)
		waitMembers(t, c, "c from b", alive(3))
		fb.set(member("b", addrB, pb.MemberState_MEMBER_STATE_ALIVE),
			member("c", "127.0.0.1:1", pb.MemberState_MEMBER_STATE_DEAD))
		waitMembers(t, c, "a gone, c dead", func(ms []client.Member) bool {
			return len(ms) == 2 && ms[1].ID == "c" && ms[1].State == client.MemberDead
		})
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	leaktest.Check(t, before)
}

// TestClusterTenants: the cluster client carries the token to every node;
// a wrong token fails the dial, another tenant's namespace fails Open.
func TestClusterTenants(t *testing.T) {
	n := startNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "tenant-a", "token-b": "tenant-b"}
	})
	ctx := ctxT(t)
	if _, err := client.Dial(ctx, n.Addr(), client.Options{Token: "wrong"}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("dial with a wrong token: %v, want ErrUnauthenticated", err)
	}
	d := llama()
	d.Tenant = "tenant-a"
	b := dialWith(t, n.Addr(), client.Options{Token: "token-b"})
	if _, err := b.Open(ctx, d); !errors.Is(err, client.ErrTenantDenied) {
		t.Fatalf("tenant b opening tenant a's namespace: %v, want ErrTenantDenied", err)
	}
	a := dialWith(t, n.Addr(), client.Options{Token: "token-a"})
	ns, err := a.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	keys := ns.PageKeys(tokens(16*4, 1))
	putAll(t, ns, keys)
	if lr, err := ns.Lookup(ctx, keys, false, 0); err != nil || lr.HitPrefix != 4 {
		t.Fatalf("lookup: %d, %v", lr.HitPrefix, err)
	}
}
