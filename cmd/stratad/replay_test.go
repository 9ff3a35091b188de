package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/scrape"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
)

// The trace replay of issue 5: a real 3-node cluster (three stratad
// processes and an etcd process) with small host tiers replays the first
// requests of the public Mooncake-format trace the way an engine would:
// look up the prompt's pages, then put the pages it had to recompute. The
// prefill FLOPs the nodes report saved (strata_prefill_flops_saved_total,
// summed over the nodes' /metrics) and the tokens of their hit prefixes
// (strata_hit_prefix_tokens_total) are compared with what the simulator
// (cmd/strata-sim, policy ours-node) computes for the same slice, the same
// three capacities and the same model.
//
// The two differ where the node cannot follow the simulator: real
// placement uses the nodes' random IDs (the simulator's are its own), a
// node counts its part of the hit prefix up to its own first miss (it
// cannot see the other nodes' misses), pages are whole 512-token pages
// where the simulator counts a prompt's partial last block, child and value
// hints reach a parent's node a round trip later (the simulator's are
// instant), an evicted page's orphaned descendants on other nodes learn it
// only when a lookup finds them past the miss (the simulator marks them at
// once), and the coordinator's cutoff refuses cold pages once the cluster
// is 90% full (ours-node has no floor; the floor is eviction.DefaultAdmitShare of
// the cutoff). The stated tolerance, replayTolerance, covers them; the
// test logs both figures.

const (
	// replayRequests is the slice: the trace's first requests.
	replayRequests = 2000
	// replaySize is the cluster's capacity, % of the slice's distinct blocks.
	replaySize = 25.0
	// replayTolerance bounds |node − sim| / sim for the saved FLOPs and hit
	// tokens. Measured on this slice (2026-11-29): the nodes save
	// 17.3–18.2% of the prefill FLOPs where the simulator's ours-node saves
	// 18.0–18.1% (its per-node LRU: 12.9%), from 4% below to 1% above it.
	// Before hints were sent at once (they waited for 10 ms + 20 ms timers)
	// the nodes saved 12.8%, and before puts carried their sequence's depth
	// (PageSpec.ChainDepth) the cutoff refused shallow pages and kept their
	// deep descendants: 13.7%. Without the cross-node child and value hints
	// the nodes saved 9.4%. This bound catches each of those.
	replayTolerance = 0.10
)

// replayDescriptor prices pages as the simulator's default 70B-class model
// (2·N·s + 2·L·h·d_h·s², 512-token pages) while keeping pages at 4 KiB:
// one layer of one 4-wide KV head in fp8, with the attention term's 80
// layers folded into the heads (80 × 64 = 5120 heads of 128).
var replayDescriptor = namespace.Descriptor{Tenant: "replay", Model: "m70b", ModelRevision: "r", Engine: "test",
	DType: "fp8_e4m3", PageTokens: 512, NumLayers: 1, NumKVHeads: 1, HeadDim: 4,
	Compute: namespace.ComputeProfile{Params: 70e9, AttentionHeads: 80 * 64, AttentionHeadDim: 128}}

type traceRecord struct {
	InputLength int     `json:"input_length"`
	HashIDs     []int64 `json:"hash_ids"`
}

// replaySlice writes the trace's first n lines to a file of the test's
// (the simulator reads it) and returns the requests.
func replaySlice(t *testing.T, n int) (string, []traceRecord) {
	t.Helper()
	src := filepath.Join("..", "..", "..", "shared", "data", "mooncake_synthetic_trace.jsonl")
	f, err := os.Open(src)
	if err != nil {
		t.Skipf("no trace at %s (the public Mooncake trace beside the repository): %v", src, err)
	}
	defer f.Close()
	out := filepath.Join(t.TempDir(), "slice.jsonl")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var recs []traceRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for len(recs) < n && sc.Scan() {
		var r traceRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("trace line %d: %v", len(recs)+1, err)
		}
		recs = append(recs, r)
		fmt.Fprintf(w, "%s\n", sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, recs
}

// replayTokens are the token ids of a prompt's blocks: block id b holds
// 512 tokens derived from b, so that equal hash-id prefixes give equal
// page keys, as in the trace.
func replayTokens(ids []int64) []uint32 {
	toks := make([]uint32, 0, 512*len(ids))
	for _, id := range ids {
		for j := range 512 {
			toks = append(toks, uint32(id)*512+uint32(j))
		}
	}
	return toks
}

func TestTraceReplayMatchesSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes and replays a trace")
	}
	slice, recs := replaySlice(t, replayRequests)
	distinct := map[int64]bool{}
	for _, r := range recs {
		for _, id := range r.HashIDs {
			distinct[id] = true
		}
	}
	pageBytes := int64(replayDescriptor.PageSize())
	// Each node's host tier, in whole MiB (the arena's slab unit here).
	perNode := int64(replaySize/100*float64(len(distinct))) * pageBytes / 3 >> 20 << 20
	size := 100 * float64(3*perNode) / float64(int64(len(distinct))*pageBytes) // what the nodes really hold

	stratad, sim := build(t, "./cmd/stratad"), build(t, "./cmd/strata-sim")
	etcdURL := freeEtcdURL(t)
	startEtcd(t, t.TempDir(), etcdURL)
	addrs, admins := make([]string, 3), make([]string, 3)
	for i := range addrs {
		addrs[i], admins[i] = startReplayNode(t, stratad, t.TempDir(), "--etcd", etcdURL, "--tiers", "host",
			"--host-bytes", strconv.FormatInt(perNode, 10))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	_, ns := dialOpen(t, ctx, addrs[0], client.Options{NodeTimeout: 10 * time.Second}, 3, replayDescriptor)

	start := time.Now()
	var hitPages, pages, putPages int
	var clientFLOPs float64 // from the merged hit prefixes the client saw
	outcomes := map[string]int{}
	data := make([][]byte, 0, 256)
	for i, r := range recs {
		keys := ns.PageKeys(replayTokens(r.HashIDs))
		lr, err := ns.Lookup(ctx, keys, false, 0)
		if err != nil {
			t.Fatalf("request %d: lookup: %v", i, err)
		}
		hitPages += lr.HitPrefix
		pages += len(keys)
		clientFLOPs += replayDescriptor.PrefillFLOPs(512 * lr.HitPrefix)
		data = data[:0]
		for _, k := range keys {
			data = append(data, replayPage(k, int(pageBytes)))
		}
		put := client.ChainPages(keys, data)[lr.HitPrefix:]
		if len(put) == 0 {
			continue
		}
		res, err := ns.Put(ctx, put)
		if err != nil {
			t.Fatalf("request %d: put of %d pages: %v", i, len(put), err)
		}
		for _, r := range res {
			outcomes[strings.TrimPrefix(r.Status.String(), "COMMIT_STATUS_")]++
		}
		putPages += len(put)
	}
	t.Logf("replayed %d requests (%d pages looked up, %d hit, %d put: %v) in %v; %d distinct blocks, %.2f%% cache (%d MiB per node)",
		len(recs), pages, hitPages, putPages, outcomes, time.Since(start).Round(time.Millisecond), len(distinct), size, perNode>>20)

	// The client reports pages past a miss in the background, and the
	// nodes take back what they counted for them: scrape until the sums
	// hold still.
	var flops, tokens, orphans, evicted float64
	poll.Within(10*time.Second, 100*time.Millisecond, func() bool { // unsettled after 10 s: the checks below use the last sums
		var f, tk, o, e float64
		for _, a := range admins {
			m := scrapeNode(t, a)
			f, tk, o, e = f+m.flops, tk+m.tokens, o+m.orphans, e+m.evicted
		}
		settled := f == flops && tk == tokens
		flops, tokens, orphans, evicted = f, tk, o, e
		return settled
	})
	// Pages are placed one by one, so most parents have children on other
	// nodes: evicting them must send parent-gone notices that drop those
	// children on their nodes (the simulator drops them at once too).
	t.Logf("evictions: %.0f, of which %.0f orphans dropped on a parent-gone notice", evicted, orphans)
	if orphans == 0 {
		t.Errorf("no node dropped an orphan in %.0f evictions: parent-gone notices did not arrive", evicted)
	}
	var totalTokens, totalFLOPs float64
	for _, r := range recs {
		totalTokens += float64(r.InputLength)
		totalFLOPs += replayDescriptor.PrefillFLOPs(r.InputLength)
	}
	nodeSaved, nodeHit := 100*flops/totalFLOPs, 100*tokens/totalTokens
	// Each node counts its pages up to its own first miss, which covers
	// every page of the merged prefix, and takes back those past another
	// node's miss when the client reports them: the nodes never report
	// less than the client saw, and more only by such pages that were
	// evicted before the report came (and so could not be priced).
	t.Logf("saved FLOPs: nodes report %.6g, the client's merged prefixes %.6g (%+.3f%%)",
		flops, clientFLOPs, 100*(flops/clientFLOPs-1))
	if flops < clientFLOPs*(1-1e-9) {
		t.Errorf("the nodes report %g saved FLOPs, less than the %g of the prefixes the client was answered", flops, clientFLOPs)
	}
	// Without the retraction the nodes reported 0 to 1.4% more, varying
	// from run to run (TestClusterLookupMarksOrphans checks the retraction
	// itself); with it, only pages evicted before the client's report stay
	// counted.
	if flops > clientFLOPs*1.005 {
		t.Errorf("the nodes report %+.2f%% more saved FLOPs than the prefixes the client was answered: hits past another node's miss were not taken back",
			100*(flops/clientFLOPs-1))
	}

	out, err := exec.CommandContext(ctx, sim, "--trace", slice, "--nodes", "3", "--policies", "ours-node",
		"--sizes", strconv.FormatFloat(size, 'f', 4, 64), "--json").Output()
	if err != nil {
		t.Fatalf("strata-sim: %v\n%s", err, out)
	}
	simSaved, simHit := simRow(t, string(out), "ours-node")
	t.Logf("prefill FLOPs saved: nodes %.2f%%, simulator %.2f%%; token hit rate: nodes %.2f%%, simulator %.2f%%",
		nodeSaved, simSaved, nodeHit, simHit)
	if d := math.Abs(nodeSaved-simSaved) / simSaved; d > replayTolerance {
		t.Errorf("saved FLOPs differ by %.0f%% of the simulator's figure (tolerance %.0f%%)", 100*d, 100*replayTolerance)
	}
	if d := math.Abs(nodeHit-simHit) / simHit; d > replayTolerance {
		t.Errorf("hit tokens differ by %.0f%% of the simulator's figure (tolerance %.0f%%)", 100*d, 100*replayTolerance)
	}
}

// replayPage is a page's bytes, derived from its key.
func replayPage(k namespace.Key, size int) []byte {
	b := make([]byte, size)
	for i := 0; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], binary.LittleEndian.Uint64(k[(i/8)%4*8:])+uint64(i))
	}
	return b
}

// startReplayNode runs a node and returns its gRPC and admin addresses.
func startReplayNode(t *testing.T, bin, dataDir string, extra ...string) (string, string) {
	t.Helper()
	p := testnode.Run(t, bin, append([]string{"--data-dir", dataDir, "--listen", "127.0.0.1:0"}, extra...)...)
	return p.Addr, p.Admin
}

// nodeCounters is what the replay reads from one node's /metrics.
type nodeCounters struct {
	flops, tokens    float64 // saved prefill FLOPs, hit-prefix tokens: net of what was retracted
	evicted, orphans float64 // pages evicted (any reason), of which orphans dropped
}

// scrapeNode sums a node's counters over its namespaces.
func scrapeNode(t *testing.T, admin string) nodeCounters {
	t.Helper()
	m := scrape.Metrics(t, admin)
	return nodeCounters{
		flops:   scrape.Sum(m, "strata_prefill_flops_saved_total") - scrape.Sum(m, "strata_prefill_flops_retracted_total"),
		tokens:  scrape.Sum(m, "strata_hit_prefix_tokens_total") - scrape.Sum(m, "strata_hit_prefix_tokens_retracted_total"),
		evicted: scrape.Sum(m, "strata_evictions_total"),
		orphans: scrape.Sum(m, "strata_evictions_total", `reason="orphan"`),
	}
}

// simRow is a policy's prefill FLOPs saved and token hit rate, in
// percent, from the simulator's --json output.
func simRow(t *testing.T, out, policy string) (saved, hit float64) {
	t.Helper()
	var rep struct {
		Rows []struct {
			Policy    string  `json:"policy"`
			SavedFrac float64 `json:"flops_saved_frac"`
			HitRate   float64 `json:"token_hit_rate"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("simulator output: %v\n%s", err, out)
	}
	for _, r := range rep.Rows {
		if r.Policy == policy {
			return 100 * r.SavedFrac, 100 * r.HitRate
		}
	}
	t.Fatalf("no %s row in the simulator's output:\n%s", policy, out)
	return 0, 0
}
