package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var desc = namespace.Descriptor{Tenant: "tiers", Model: "m", ModelRevision: "r", Engine: "test", DType: "bf16",
	PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64} // 16 KiB pages

func start(t *testing.T, dir string, host, ssd int64) (*testnode.Node, *client.Namespace) {
	t.Helper()
	n := testnode.Start(t, node.Config{DataDir: dir, Tiers: []string{"host", "ssd"}, HostBytes: host, SSDBytes: ssd})
	_, ns := openNS(t, n.Addr(), client.Options{}, desc)
	return n, ns
}

// openNS dials addr with opts and opens d there; the test's cleanup closes
// the client.
func openNS(t *testing.T, addr string, opts client.Options, d namespace.Descriptor) (*client.Client, *client.Namespace) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ns, err := c.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	return c, ns
}

// chain returns the keys of pages [from, from+n) of one token sequence in
// ns, with their bytes (testnode.PageOf), as a chain to put.
func chain(ns *client.Namespace, from, n int) ([]namespace.Key, []client.Page) {
	toks := make([]uint32, 16*(from+n))
	for i := range toks {
		toks[i] = uint32(i)
	}
	keys := ns.PageKeys(toks)[from:]
	pages := client.ChainPages(keys, make([][]byte, len(keys)))
	for i := range pages {
		pages[i].Data, pages[i].Depth = testnode.PageOf(keys[i], ns.PageBytes()), uint32(from+i)
	}
	return keys, pages
}

func tierPages(t *testing.T, addr string) map[pb.Tier]uint64 {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	info, err := pb.NewAdminClient(conn).NodeInfo(context.Background(), &pb.NodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[pb.Tier]uint64{}
	for _, ts := range info.GetTiers() {
		out[ts.GetTier()] = ts.GetPages()
	}
	return out
}

func readBack(t *testing.T, ns *client.Namespace, keys []namespace.Key) int {
	t.Helper()
	found := 0
	for i := 0; i < len(keys); i += 256 {
		batch := keys[i:min(len(keys), i+256)]
		bufs := make([][]byte, len(batch))
		for j := range bufs {
			bufs[j] = make([]byte, ns.PageBytes())
		}
		ok, err := ns.Get(context.Background(), batch, bufs, nil)
		if err != nil {
			t.Fatal(err)
		}
		found += testnode.CountExact(t, batch, ok, bufs)
	}
	return found
}

// TestHostOverflowsToSSD: writing three times the host tier puts the
// overflow on SSD and every page reads back exact; restarts with other tier
// sizes start cleanly and keep the SSD pages that fit.
func TestHostOverflowsToSSD(t *testing.T) {
	dir := t.TempDir()
	n, ns := start(t, dir, 4<<20, 256<<20)
	toks := make([]uint32, 16*768) // 768 pages = 12 MiB
	for i := range toks {
		toks[i] = uint32(i)
	}
	keys := ns.PageKeys(toks)
	for i := 0; i < len(keys); i += 64 {
		batch := keys[i : i+64]
		data := testnode.PagesOf(batch, ns.PageBytes())
		pages := client.ChainPages(batch, data)
		for j := range pages {
			pages[j].Depth = uint32(i + j)
		}
		res, err := ns.Put(context.Background(), pages)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range res {
			if r.Status != client.Committed {
				t.Fatalf("page %d: %v %s", i+j, r.Status, r.Reason)
			}
		}
	}
	if got := readBack(t, ns, keys); got != len(keys) {
		t.Fatalf("%d of %d pages read back", got, len(keys))
	}
	tp := tierPages(t, n.Addr())
	t.Logf("after the writes: host %d pages, ssd %d pages", tp[pb.Tier_TIER_HOST], tp[pb.Tier_TIER_SSD])
	if tp[pb.Tier_TIER_SSD] == 0 || tp[pb.Tier_TIER_HOST]+tp[pb.Tier_TIER_SSD] != uint64(len(keys)) {
		t.Fatalf("tiers hold %v, want the overflow on ssd and every page kept", tp)
	}
	onSSD := tp[pb.Tier_TIER_SSD]
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// Bigger host, smaller SSD (still holding the slot file in use): the
	// SSD pages come back, the host ones were volatile.
	n, ns = start(t, dir, 8<<20, 128<<20)
	// The mover may demote a few more pages between the count and Close.
	if got := readBack(t, ns, keys); uint64(got) < onSSD || got > len(keys) {
		t.Fatalf("after restart with other sizes: %d pages, want at least the %d that were on ssd", got, onSSD)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
