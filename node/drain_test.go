package node_test

import (
	"context"
	"testing"

	"github.com/stratakv/strata/client"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestGracefulStopKeepsHostPages: a node closed gracefully demotes what
// its host tier holds to its SSD tier, so after the restart every page is
// served from SSD (before, the host tier's pages were simply lost).
func TestGracefulStopKeepsHostPages(t *testing.T) {
	dir := t.TempDir()
	n, ns := start(t, dir, 16<<20, 64<<20)
	keys, pages := chain(ns, 0, 256) // 256 pages of 16 KiB: 4 MiB, all on the host tier
	res, err := ns.Put(context.Background(), pages)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Committed {
			t.Fatalf("page %d: %v", i, r.Status)
		}
	}
	if tp := tierPages(t, n.Addr()); tp[pb.Tier_TIER_HOST] != uint64(len(keys)) {
		t.Fatalf("before the stop: %v, want every page on the host tier", tp)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, ns = start(t, dir, 16<<20, 64<<20)
	tp := tierPages(t, n.Addr())
	t.Logf("after the restart: host %d pages, ssd %d", tp[pb.Tier_TIER_HOST], tp[pb.Tier_TIER_SSD])
	if got := readBack(t, ns, keys); got != len(keys) {
		t.Fatalf("after a graceful stop and restart %d of %d host pages served, want all (from ssd)", got, len(keys))
	}
}
