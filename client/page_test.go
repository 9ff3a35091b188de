//go:build linux

package client_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestCostHintEveryPlane: a page's cost hint reaches the node's store over
// gRPC, the raw tcp plane and shared memory (its key's stat says so, and
// the plane's count says which plane carried the put), and a hint that is
// negative, NaN or infinite is refused as invalid on each plane, with a
// reason that names it and nothing stored. The hints are float32-exact:
// the store keeps a float32.
func TestCostHintEveryPlane(t *testing.T) {
	n, _ := shmNode(t, nil)
	ctx := ctxT(t)
	admin := pb.NewAdminClient(rawConn(t, n.Addr()))
	for i, plane := range []struct {
		name string
		opts client.Options
		// used counts the requests the plane served, or -1 for gRPC
		used func(c *client.Client) int64
	}{
		{"grpc", client.Options{NoShm: true, NoRaw: true}, func(*client.Client) int64 { return -1 }},
		{"raw", client.Options{NoShm: true}, func(c *client.Client) int64 { one, two := c.RawPuts(); return one + two }},
		{"shm", client.Options{}, func(c *client.Client) int64 { req, _ := c.ShmRequests(); return req }},
	} {
		t.Run(plane.name, func(t *testing.T) {
			c := dialWith(t, n.Addr(), plane.opts)
			ns := open(t, c)
			keys := ns.PageKeys(tokens(16*3, uint32(100+i)))
			pages := client.ChainPages(keys, pagesFor(ns, keys))
			for j := range pages[:2] {
				pages[j].CostHint = float64(j+1) * 1.5e9
			}
			before := plane.used(c)
			putWant(ctx, t, ns, pages, client.Committed, "hinted put")
			if after := plane.used(c); after != -1 && after <= before {
				t.Fatalf("the put did not go over %s (%d requests before, %d after)", plane.name, before, after)
			}
			wantCostHints(t, admin, ns, keys, []float64{1.5e9, 3e9, 0})

			for j, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
				k := ns.PageKeys(tokens(16, uint32(200+10*i+j)))
				before := plane.used(c)
				_, err := ns.Put(ctx, []client.Page{{Key: k[0], Data: pagesFor(ns, k)[0], CostHint: bad}})
				if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), "cost hint") {
					t.Errorf("a cost hint of %g: %v; want ErrInvalid naming the cost hint", bad, err)
				}
				if after := plane.used(c); after != -1 && after <= before {
					t.Errorf("a cost hint of %g was not refused over %s (%d requests before, %d after)", bad, plane.name, before, after)
				}
				if info := statKeys(t, admin, ns, k); len(info.GetKey()) != 0 {
					t.Errorf("a cost hint of %g: the page was stored", bad)
				}
			}
		})
	}
}

// TestCostHintNodeBeforeIt: a raw connection of the version before cost
// hints (as to a node of that version) still puts pages without a hint as
// frames the node reads by that version's layout, and leaves a batch with
// a hint to gRPC, which carries it.
func TestCostHintNodeBeforeIt(t *testing.T) {
	n := rawNode(t, nil)
	ctx := ctxT(t)
	admin := pb.NewAdminClient(rawConn(t, n.Addr()))
	c := dialWith(t, n.Addr(), client.Options{NoShm: true})
	ns := open(t, c)
	c.PinRawVersion(frame.CostHintVersion - 1)
	count := func() int64 { one, two := c.RawPuts(); return one + two }

	keys := ns.PageKeys(tokens(16*4, 300))
	pages := client.ChainPages(keys, pagesFor(ns, keys))
	before := count()
	putWant(ctx, t, ns, pages[:2], client.Committed, "put without hints")
	if count() != before+1 {
		t.Fatalf("the put without hints did not go over the raw plane (%d batches, want %d)", count(), before+1)
	}
	wantCostHints(t, admin, ns, keys[:2], []float64{0, 0})

	pages[2].CostHint, pages[3].CostHint = 6e9, 1.5e9
	putWant(ctx, t, ns, pages[2:], client.Committed, "hinted put")
	if count() != before+1 {
		t.Fatalf("a hinted put went over a raw connection of version %d, which cannot carry the hint", frame.CostHintVersion-1)
	}
	wantCostHints(t, admin, ns, keys[2:], []float64{6e9, 1.5e9})
}

// statKeys is the node's admin stat of keys of ns.
func statKeys(t *testing.T, admin pb.AdminClient, ns *client.Namespace, keys []namespace.Key) *pb.KeyInfo {
	t.Helper()
	id := ns.ID()
	req := &pb.StatKeysRequest{NamespaceId: id[:]}
	for _, k := range keys {
		req.Keys = append(req.Keys, k[:])
	}
	resp, err := admin.StatKeys(ctxT(t), req)
	if err != nil || len(resp.GetKeys()) != len(keys) {
		t.Fatalf("stat keys: %v, %d answers for %d keys", err, len(resp.GetKeys()), len(keys))
	}
	return resp.GetKeys()[0]
}

// wantCostHints checks the cost hint the node keeps for each of keys.
func wantCostHints(t *testing.T, admin pb.AdminClient, ns *client.Namespace, keys []namespace.Key, want []float64) {
	t.Helper()
	for i, k := range keys {
		if info := statKeys(t, admin, ns, []namespace.Key{k}); len(info.GetKey()) == 0 || info.GetCostHint() != want[i] {
			t.Errorf("page %d: stored %v with cost hint %g, want %g", i, len(info.GetKey()) != 0, info.GetCostHint(), want[i])
		}
	}
}
