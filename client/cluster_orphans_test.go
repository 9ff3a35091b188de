package client_test

import (
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/scrape"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestClusterLookupMarksOrphans: a cluster lookup that finds pages past a
// missing page of the sequence tells the nodes that hold them, which mark
// them orphans (StatKeys shows it; their node could not see the miss when
// it is on the other node); the pages before the miss stay unmarked, and a
// put of the sequence again clears the marks.
func TestClusterLookupMarksOrphans(t *testing.T) {
	nodes, c, ns := openSmallCluster(t, 2, 8<<20, llama())
	ctx := ctxT(t)
	keys := ns.PageKeys(tokens(16*12, 7))
	putAll(t, ns, keys)
	const gap = 4
	if n, err := ns.Delete(ctx, keys[gap:gap+1]); err != nil || n != 1 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	counted := func() float64 { // hit-prefix tokens the nodes count, net of retractions
		var sum float64
		for _, n := range nodes {
			sum += netHitTokens(t, n.AdminAddr())
		}
		return sum
	}
	before := counted()
	lr, err := ns.Lookup(ctx, keys, false, 0)
	if err != nil || lr.HitPrefix != gap {
		t.Fatalf("hit prefix %d, %v; want %d", lr.HitPrefix, err, gap)
	}
	// The node without the missing page counted all its pages, those past
	// the miss too; the client's report takes them back.
	if !poll.Within(10*time.Second, 20*time.Millisecond, func() bool { return counted()-before == gap*16 }) {
		t.Fatalf("the nodes count %g hit tokens for the lookup, want %d (its hit prefix)", counted()-before, gap*16)
	}
	addr := map[string]string{}
	for _, n := range nodes {
		addr[n.ID()] = n.Addr()
	}
	id := ns.ID()
	orphans := func() []bool {
		out := make([]bool, len(keys))
		for i, k := range keys {
			resp, err := pb.NewAdminClient(rawConn(t, addr[c.Owner(k)])).StatKeys(ctx,
				&pb.StatKeysRequest{NamespaceId: id[:], Keys: [][]byte{k[:]}})
			if err != nil {
				t.Fatal(err)
			}
			out[i] = resp.GetKeys()[0].GetOrphan()
		}
		return out
	}
	want := func(i int) bool { return i > gap }
	var got []bool
	if !poll.Within(10*time.Second, 20*time.Millisecond, func() bool {
		got = orphans()
		ok := true
		for i := range keys {
			ok = ok && got[i] == want(i)
		}
		return ok
	}) {
		t.Fatalf("orphan marks %v, want the pages after %d", got, gap)
	}
	putAll(t, ns, keys[gap:]) // the engine recomputed the rest of the sequence
	for i, o := range orphans() {
		if o {
			t.Fatalf("page %d still marked an orphan after the sequence was put again", i)
		}
	}
}

// netHitTokens is a node's hit-prefix tokens minus those it took back,
// from its /metrics.
func netHitTokens(t *testing.T, admin string) float64 {
	t.Helper()
	m := scrape.Metrics(t, admin)
	return scrape.Sum(m, "strata_hit_prefix_tokens_total") - scrape.Sum(m, "strata_hit_prefix_tokens_retracted_total")
}
