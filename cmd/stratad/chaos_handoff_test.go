//go:build chaos

package main

import (
	"context"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/placement"
)

// TestChaosHandoffOwnerKilled: a handoff never lowers durability. Two
// stratad processes: G with only an SSD tier (every page synced), O with a
// host tier above its SSD (a put lands in host memory). Each run kills O
// with -9, writes chains of pages (all acknowledged on G's SSD: O is
// away), restarts O, waits until G has handed every page back (O holds
// them, in host memory), kills O with -9 again right then, and counts the
// acknowledged pages no node holds: G must have kept its durable copies
// (peer Handoff), so the count must be 0. Then O restarts and a
// fresh client without a location cache gets every acknowledged page
// within its call deadline, though O, their owner, has none of them yet
// (client.Options.FallbackWindow: the next candidate, G, is asked in the
// same call). STRATA_CHAOS_HANDOFF_RUNS sets the runs (default 10).
func TestChaosHandoffOwnerKilled(t *testing.T) {
	runs := 10
	if v, err := strconv.Atoi(os.Getenv("STRATA_CHAOS_HANDOFF_RUNS")); err == nil && v > 0 {
		runs = v
	}
	bin := buildStratad(t)
	etcdDir, etcdURL := t.TempDir(), freeEtcdURL(t)
	startEtcd(t, etcdDir, etcdURL)
	g := &chaosNode{bin: bin, dir: t.TempDir(), etcd: etcdURL, listen: freeAddr(t)}
	o := &chaosNode{bin: bin, dir: t.TempDir(), etcd: etcdURL, listen: freeAddr(t),
		extra: []string{"--tiers", "host,ssd", "--host-bytes", "256MiB"}}
	g.start(t)
	o.start(t)
	defer g.kill()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c, ns := dialOpen(t, ctx, g.addr, client.Options{Seeds: []string{o.addr}, NodeTimeout: time.Second}, 2, chaosDesc)
	defer c.Close()
	var acked []namespace.Key
	for run := range runs {
		began := time.Now()
		o.kill()
		waitAlive(t, c, 1, 30*time.Second)
		acked = append(acked, writeChains(t, ns, uint32(run), 16)...) // on G: the only member
		o.start(t)
		waitAlive(t, c, 2, 30*time.Second)
		var ownedByO []namespace.Key // G hands these back; G's own stay on G
		view, oid := viewOfMembers(t, c), memberAt(t, c, o.addr)
		for _, k := range acked {
			if view.Node(view.Owner(k)).ID == oid {
				ownedByO = append(ownedByO, k)
			}
		}
		handed, waited := waitHeld(t, o, ns.ID(), ownedByO, 60*time.Second)
		o.kill() // right after the handoff: O held the pages in host memory only
		lost := len(acked) - heldAnywhere(t, []*chaosNode{g}, ns.ID(), acked)
		o.start(t)
		fresh, fns := dialOpen(t, ctx, g.addr, client.Options{Seeds: []string{o.addr}, NodeTimeout: time.Second,
			CacheEntries: -1}, 2, chaosDesc)
		served, late := getAll(fns, acked)
		fresh.Close()
		t.Logf("chaos handoff run %d: %d pages acknowledged on G's SSD; O held %d of its %d after %v of handoff, then "+
			"was killed: %d acknowledged pages on no node; after O's restart a fresh client served %d of %d "+
			"(%d calls past their deadline); run took %v",
			run+1, len(acked), handed, len(ownedByO), waited.Round(time.Millisecond), lost, served, len(acked), late,
			time.Since(began).Round(time.Millisecond))
		if handed != len(ownedByO) {
			t.Fatalf("run %d: O holds %d of the %d pages it owns %v after its restart: no handoff to test",
				run+1, handed, len(ownedByO), waited.Round(time.Millisecond))
		}
		if lost != 0 || served != len(acked) || late != 0 {
			t.Fatalf("run %d: %d acknowledged pages lost, %d of %d served, %d calls past their deadline",
				run+1, lost, served, len(acked), late)
		}
	}
	o.kill()
}

// writeChains puts n 4-page chains through ns and returns the pages
// acknowledged committed.
func writeChains(t *testing.T, ns *client.Namespace, seed uint32, n int) []namespace.Key {
	t.Helper()
	var acked []namespace.Key
	for seq := range uint32(n) {
		toks := make([]uint32, 16*4)
		for i := range toks {
			toks[i] = seed<<16 | seq<<8 | uint32(i)
		}
		keys, data := chainOf(ns, toks)
		ctx, cancel := context.WithTimeout(context.Background(), chaosCallTimeout)
		res, err := ns.Put(ctx, client.ChainPages(keys, data))
		cancel()
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		for i, r := range res {
			if r.Status == client.Committed {
				acked = append(acked, keys[i])
			}
		}
	}
	return acked
}

// waitHeld waits, up to limit, until node n holds every key (its
// StatKeys), and returns how many it holds and how long it waited.
func waitHeld(t *testing.T, n *chaosNode, id namespace.ID, keys []namespace.Key, limit time.Duration) (int, time.Duration) {
	t.Helper()
	began := time.Now()
	held := 0
	poll.Within(limit, 100*time.Millisecond, func() bool {
		held = heldAnywhere(t, []*chaosNode{n}, id, keys)
		return held == len(keys)
	})
	return held, time.Since(began)
}

// getAll gets keys through ns, 64 a call, each call within
// chaosCallTimeout, and returns how many pages came back with their own
// bytes and how many calls ran past their deadline.
func getAll(ns *client.Namespace, keys []namespace.Key) (served, late int) {
	for start := 0; start < len(keys); start += 64 {
		batch := keys[start:min(len(keys), start+64)]
		bufs := pageBufs(ns, len(batch))
		ctx, cancel := context.WithTimeout(context.Background(), chaosCallTimeout)
		began := time.Now()
		found, err := ns.Get(ctx, batch, bufs, nil)
		cancel()
		if time.Since(began) > chaosCallTimeout+chaosSlack {
			late++
		}
		if err != nil {
			continue
		}
		for i, k := range batch {
			if found[i] && exact(k, bufs[i]) {
				served++
			}
		}
	}
	return served, late
}

// viewOfMembers is the placement of c's alive members, as the client
// places keys (a weight that is not positive counts 1).
func viewOfMembers(t *testing.T, c *client.Client) *placement.View {
	t.Helper()
	var nodes []placement.Node
	for _, m := range c.Members() {
		if m.State == client.MemberAlive {
			w := m.Weight
			if !(w > 0) || math.IsInf(w, 1) {
				w = 1
			}
			nodes = append(nodes, placement.Node{ID: m.ID, Weight: w})
		}
	}
	v, err := placement.NewView(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// memberAt is the ID of the member of c's view at gRPC address addr.
func memberAt(t *testing.T, c *client.Client, addr string) string {
	t.Helper()
	for _, m := range c.Members() {
		if m.Address == addr {
			return m.ID
		}
	}
	t.Fatalf("no member at %s: %+v", addr, c.Members())
	return ""
}
