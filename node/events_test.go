package node_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// nodeKeys lists a namespace's keys on the node (Admin.ListKeys), as the
// tenant sees them.
func nodeKeys(t *testing.T, addr, token string, id namespace.ID) []string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	admin := pb.NewAdminClient(testnode.Dial(t, addr))
	var out []string
	var after []byte
	for {
		resp, err := admin.ListKeys(ctx, &pb.ListKeysRequest{NamespaceId: id[:], AfterKey: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range resp.GetKeys() {
			out = append(out, string(k.GetKey()))
		}
		if len(resp.GetKeys()) == 0 || len(resp.GetNextAfterKey()) == 0 {
			break
		}
		after = resp.GetNextAfterKey()
	}
	slices.Sort(out)
	return out
}

// waitMatch waits until the consumer's index equals the node's keys.
func waitMatch(t *testing.T, c *consumer, addr, token string, id namespace.ID, what string) {
	t.Helper()
	var want, got []string
	if !poll.Within(10*time.Second, 5*time.Millisecond, func() bool {
		want, got = nodeKeys(t, addr, token, id), c.keys()
		return slices.Equal(want, got)
	}) {
		t.Fatalf("%s: the consumer holds %d blocks, the node lists %d", what, len(got), len(want))
	}
}

// acmeOn subscribes a consumer to tenant acme's stream on n and opens an
// acme namespace there.
func acmeOn(t *testing.T, n *testnode.Node) (*consumer, *client.Client, *client.Namespace) {
	t.Helper()
	pub, replay := n.EventsAddrs("acme")
	acme := newConsumer(t, pub, replay, "acme", "acme-token")
	d := desc
	d.Tenant = "acme"
	c, ns := openNS(t, n.Addr(), client.Options{Token: "acme-token"}, d)
	return acme, c, ns
}

var tenantTokens = map[string]string{"acme-token": "acme", "globex-token": "globex"}

// TestEventsMatchNodeContents: a consumer of a tenant's stream, fed by a
// real node's sockets, holds exactly the keys the node lists after puts,
// after the evictions a small host tier forces, and after the namespace
// is dropped; a consumer of another tenant's stream receives none of its
// events, and another tenant's credentials are refused on its sockets.
func TestEventsMatchNodeContents(t *testing.T) {
	n := testnode.Start(t, node.Config{Tiers: []string{"host"}, HostBytes: 48 * 16 << 10, TenantTokens: tenantTokens,
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{
			"acme":   {Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"},
			"globex": {Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"},
		}}})
	acmePub, acmeReplay := n.EventsAddrs("acme")
	globexPub, globexReplay := n.EventsAddrs("globex")
	for _, creds := range [][2]string{{"globex", "globex-token"}, {"acme", "globex-token"}, {"acme", ""}} {
		if s, err := events.Subscribe(context.Background(), acmePub, creds[0], creds[1], ""); err == nil {
			s.Close()
			t.Errorf("acme's stream accepted credentials %q", creds)
		}
	}
	acme := newConsumer(t, acmePub, acmeReplay, "acme", "acme-token")
	globex := newConsumer(t, globexPub, globexReplay, "globex", "globex-token")

	d := desc
	d.Tenant = "acme"
	_, ns := openNS(t, n.Addr(), client.Options{Token: "acme-token"}, d)
	for i := range 6 { // 6 chains of 16 pages: twice the host tier
		_, pages := chain(ns, 16*i, 16)
		for j := range pages {
			pages[j].Data[0] ^= byte(i) // keys differ per chain already; bytes too
		}
		if _, err := ns.Put(context.Background(), pages); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			waitMatch(t, acme, n.Addr(), "acme-token", ns.ID(), "after two chains")
		}
	}
	waitMatch(t, acme, n.Addr(), "acme-token", ns.ID(), "after the evictions")
	st, _ := n.EventsStats("acme")
	if st.Overruns != 0 || len(acme.keys()) >= 96 {
		t.Fatalf("after 96 pages into a 48-page tier: %d held, stats %+v", len(acme.keys()), st)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer acme-token")
	nsID := ns.ID()
	if _, err := pb.NewAdminClient(testnode.Dial(t, n.Addr())).DropNamespace(ctx, &pb.DropNamespaceRequest{NamespaceId: nsID[:]}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the drop's AllBlocksCleared", func() bool { return len(acme.keys()) == 0 })
	if seen := globex.seen(); len(seen) != 0 {
		t.Fatalf("globex's stream carried %v", seen)
	}
	for topic := range acme.seen() {
		if want := "kv@" + n.ID() + ".1@" + ns.ID().String(); topic != want {
			t.Fatalf("topic %q, want %q", topic, want)
		}
	}
}

// TestEventsAfterRestart: a node started again on its data directory
// clears what its previous incarnation published (under that
// incarnation's topic) and announces what it recovered from SSD, so that
// a consumer that kept its index across the restart matches the node.
func TestEventsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	listen := map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"}}
	cfg := node.Config{DataDir: dir, Tiers: []string{"host", "ssd"}, HostBytes: 16 * 16 << 10, SSDBytes: 64 << 20,
		TenantTokens: tenantTokens, Events: node.EventsConfig{Tenants: listen}}
	n := testnode.Start(t, cfg)
	before, c, ns := acmeOn(t, n)
	_, pages := chain(ns, 0, 40)
	if _, err := ns.Put(context.Background(), pages); err != nil {
		t.Fatal(err)
	}
	nsID := ns.ID()
	waitMatch(t, before, n.Addr(), "acme-token", nsID, "before the restart")
	held := before.keys()
	c.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = testnode.Start(t, cfg)
	pub, replay := n.EventsAddrs("acme")
	// A block of the old incarnation the node no longer has: only its
	// AllBlocksCleared takes it out of the consumer's index.
	after := newConsumer(t, pub, replay, "acme", "acme-token", append(held, "a block gone with the old incarnation")...)
	old, cur := "kv@"+n.ID()+".1@"+nsID.String(), "kv@"+n.ID()+".2@"+nsID.String()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the recovered pages announced", func() bool { return after.seen()[cur] >= 40 })
	waitMatch(t, after, n.Addr(), "acme-token", nsID, "after the restart")
	if len(held) != 40 || len(after.keys()) != 40 {
		t.Fatalf("%d pages held before the restart, %d after, want the 40 put", len(held), len(after.keys()))
	}
	seen := after.seen()
	if seen[old] != 1 || seen[cur] == 0 || len(seen) != 2 {
		t.Fatalf("topics after the restart %v, want one AllBlocksCleared under %s and the recovered pages under %s", seen, old, cur)
	}
}

// TestEventsCarryPutTokens: the tokens and LoRA name a Go client's put
// carries for a page (client.Page.Event) reach the page's BlockStored
// (over the raw plane, frame protocol 6: client's
// TestPutEventsOverFramePlanes checks the plane), whose ownership names
// the tier by its name ("strata/host").
func TestEventsCarryPutTokens(t *testing.T) {
	n := testnode.Start(t, node.Config{Tiers: []string{"host"}, TenantTokens: tenantTokens,
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"}}}})
	acme, _, ns := acmeOn(t, n)
	keys, pages := chain(ns, 0, 3)
	for i := range pages {
		pages[i].Event = &client.EventInfo{Tokens: []uint32{uint32(100 + i), uint32(200 + i)}, LoraName: "lora-" + string(rune('a'+i))}
	}
	if _, err := ns.Put(context.Background(), pages); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the pages announced", func() bool {
		acme.mu.Lock()
		defer acme.mu.Unlock()
		return len(acme.stored) == len(keys)
	})
	acme.mu.Lock()
	defer acme.mu.Unlock()
	for i, k := range keys {
		e := acme.stored[string(k[:])]
		if want := []int64{int64(100 + i), int64(200 + i)}; !slices.Equal(e.Tokens, want) || e.LoraName != pages[i].Event.LoraName {
			t.Errorf("page %d: BlockStored tokens %v lora %q, want %v %q", i, e.Tokens, e.LoraName, want, pages[i].Event.LoraName)
		}
		if e.Ownership != "strata/host" || e.Medium != events.MediumStorage {
			t.Errorf("page %d: BlockStored ownership %q medium %q, want %q %q", i, e.Ownership, e.Medium, "strata/host", events.MediumStorage)
		}
	}
}

// TestEventsAfterNodeLoss: three nodes publish acme's stream and a
// consumer follows all three; when a node leaves the cluster, the
// coordinator clears that node's topic on its own stream, and the
// consumer's index matches what the survivors list.
func TestEventsAfterNodeLoss(t *testing.T) {
	cl := startCluster(t, 3, func(c *node.Config) {
		c.TenantTokens = tenantTokens
		c.Events = node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"}}}
	})
	nodes := cl.Nodes
	_, leader := agreed(t, nodes, 0)
	var lost *testnode.Node
	var survivors []*testnode.Node
	for _, n := range nodes {
		if lost == nil && n.ID() != leader {
			lost = n
		} else {
			survivors = append(survivors, n)
		}
	}
	acme, _, ns := acmeOn(t, nodes[0])
	for _, n := range nodes[1:] {
		pub, replay := n.EventsAddrs("acme")
		acme.follow(t, pub, replay)
	}
	for i := range 4 {
		_, pages := chain(ns, 16*i, 16)
		if _, err := ns.Put(context.Background(), pages); err != nil {
			t.Fatal(err)
		}
	}
	nsID := ns.ID()
	clusterKeys := func(nodes []*testnode.Node) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, nodeKeys(t, n.Addr(), "acme-token", nsID)...)
		}
		slices.Sort(out)
		return out
	}
	var want, got []string
	if !poll.Within(10*time.Second, 5*time.Millisecond, func() bool {
		want, got = clusterKeys(nodes), acme.keys()
		return slices.Equal(want, got)
	}) {
		t.Fatalf("before the loss: the consumer holds %d blocks, the nodes list %d", len(got), len(want))
	}
	if held := len(nodeKeys(t, lost.Addr(), "acme-token", nsID)); held == 0 {
		t.Fatalf("the node to lose holds none of the %d pages", len(want))
	}
	if err := lost.Close(); err != nil {
		t.Fatal(err)
	}
	if !poll.Within(20*time.Second, 10*time.Millisecond, func() bool {
		want, got = clusterKeys(survivors), acme.keys()
		return slices.Equal(want, got)
	}) {
		t.Fatalf("after the loss: the consumer holds %d blocks, the survivors list %d", len(got), len(want))
	}
	lostTopic := "kv@" + lost.ID() + ".1@" + nsID.String()
	if seen := acme.seen()[lostTopic]; seen == 0 {
		t.Fatalf("no events under %s", lostTopic)
	}
}

// TestEventsLinger: EventsConfig.Linger reaches the publisher. With a
// linger of 800 ms, a put's BlockStored that follows another's at once
// waits out the linger (the default, 10 ms, would send it within a few
// milliseconds); a linger past MaxEventsLinger is refused at start.
func TestEventsLinger(t *testing.T) {
	const linger = 800 * time.Millisecond
	n := testnode.Start(t, node.Config{Tiers: []string{"host"}, HostBytes: 64 << 20,
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0"}}, Linger: linger}})
	pub, _ := n.EventsAddrs("acme")
	sub, err := events.Subscribe(context.Background(), pub, "acme", "-", "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := make(chan time.Time, 16)
	go func() {
		for {
			k, err := sub.RecvCount()
			if err != nil {
				close(got)
				return
			}
			for range k {
				got <- time.Now()
			}
		}
	}()
	d := desc
	d.Tenant = "acme"
	_, ns := openNS(t, n.Addr(), client.Options{}, d)
	_, pages := chain(ns, 0, 20)
	// The subscription takes effect at some point after Subscribe: put
	// pages one by one until an event arrives (the publisher idle again
	// each time), then one more at once.
	var first time.Time
	i := 0
	for ; first.IsZero() && i < len(pages)-1; i++ {
		if _, err := ns.Put(context.Background(), pages[i:i+1]); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-got:
		case <-time.After(2 * linger):
		}
	}
	if first.IsZero() {
		t.Fatal("no event")
	}
	if _, err := ns.Put(context.Background(), pages[i:i+1]); err != nil {
		t.Fatal(err)
	}
	second, ok := <-got
	if !ok {
		t.Fatal("the subscription ended")
	}
	if wait := second.Sub(first); wait < linger/2 {
		t.Fatalf("the second put's event came %v after the first's, want about the linger, %v", wait, linger)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if nd, err := node.Start(ctx, node.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), EmbeddedEtcdURL: "http://127.0.0.1:0",
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0"}}, Linger: 2 * node.MaxEventsLinger}}); err == nil {
		nd.Close()
		t.Fatal("a linger past MaxEventsLinger was accepted")
	}
}
