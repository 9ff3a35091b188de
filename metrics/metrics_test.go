package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/metrics"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// scrape fetches /metrics and parses it.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, want)
	return 0
}

// chain is the keys of a chain of n pages of ns and their bytes, each
// page's first byte its index.
func chain(ns *client.Namespace, n int) ([]namespace.Key, [][]byte) {
	toks := make([]uint32, int(ns.Descriptor().PageTokens)*n)
	for i := range toks {
		toks[i] = uint32(i)
	}
	data := make([][]byte, n)
	for i := range data {
		data[i] = make([]byte, ns.PageBytes())
		data[i][0] = byte(i)
	}
	return ns.PageKeys(toks), data
}

// TestScrapeAfterWorkload runs a scripted workload and checks that the
// scraped counters equal what it did.
func TestScrapeAfterWorkload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := testnode.Start(t, node.Config{HostBytes: 32 << 20})
	// Over gRPC only, so that the RPC histograms count every call (the
	// shm and raw planes answer lookups, gets and puts without gRPC).
	c, err := client.Dial(ctx, n.Addr(), client.Options{NoShm: true, NoRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := namespace.Descriptor{Tenant: "metrics", Model: "llama-70b", ModelRevision: "r", Engine: "vllm", DType: "bf16",
		PageTokens: 16, NumLayers: 80, NumKVHeads: 8, HeadDim: 128, TPSize: 8,
		Compute: namespace.ComputeProfile{Params: 70e9, AttentionHeads: 64, AttentionHeadDim: 128}}
	ns, err := c.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	keys, data := chain(ns, 10)
	// 8 pages committed, then the same 8 again (exists: no reservation).
	if _, err := ns.Put(ctx, client.ChainPages(keys[:8], data[:8])); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Put(ctx, client.ChainPages(keys[:8], data[:8])); err != nil {
		t.Fatal(err)
	}
	// Two lookups: all 10 keys (hit prefix 8), then 4 keys (hit prefix 4).
	for _, k := range [][]namespace.Key{keys, keys[:4]} {
		if _, err := ns.Lookup(ctx, k, false, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Get 3 pages, delete 1.
	bufs := [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes())}
	if _, err := ns.Get(ctx, keys[:3], bufs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Delete(ctx, keys[7:8]); err != nil {
		t.Fatal(err)
	}

	fams := scrape(t, n.AdminAddr())
	id := ns.ID().Short()
	lab := map[string]string{"namespace": id}
	page := float64(ns.PageBytes())
	checks := []struct {
		name  string
		extra map[string]string
		want  float64
	}{
		{"strata_pages", map[string]string{"tier": "host"}, 7},
		{"strata_bytes", map[string]string{"tier": "host"}, 7 * page},
		{"strata_lookups_total", nil, 2},
		{"strata_lookup_keys_total", nil, 14},
		{"strata_hit_keys_total", nil, 12},
		{"strata_miss_keys_total", nil, 2},
		{"strata_puts_total", map[string]string{"outcome": "committed"}, 8},
		{"strata_puts_total", map[string]string{"outcome": "checksum_mismatch"}, 0},
		{"strata_evictions_total", map[string]string{"reason": "deleted"}, 1},
		{"strata_evictions_total", map[string]string{"reason": "capacity"}, 0},
		{"strata_evictions_total", map[string]string{"reason": "orphan"}, 0},
		{"strata_hit_prefix_tokens_total", nil, 12 * 16},
		{"strata_transfer_bytes_total", map[string]string{"direction": "in"}, 8 * page},
		{"strata_transfer_bytes_total", map[string]string{"direction": "out"}, 3 * page},
		{"strata_prefill_flops_saved_total", nil, d.PrefillFLOPs(8*16) + d.PrefillFLOPs(4*16)},
	}
	for _, c := range checks {
		want := map[string]string{}
		for k, v := range lab {
			want[k] = v
		}
		for k, v := range c.extra {
			want[k] = v
		}
		if got := value(t, fams, c.name, want); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.extra, got, c.want)
		}
	}
	// Eviction coordination: a single node has room, so no floor; nothing
	// is dropped.
	if got := value(t, fams, "strata_eviction_cutoff_worth", map[string]string{"tier": "host"}); got != 0 {
		t.Errorf("cutoff of a node with room = %g, want 0", got)
	}
	if got := value(t, fams, "strata_eviction_hints_dropped_total", nil); got != 0 {
		t.Errorf("hints dropped = %g, want 0", got)
	}
	// Its lookups came one at a time: none shed its bookkeeping, for
	// either reason.
	for _, reason := range []string{"contention", "budget"} {
		if got := value(t, fams, "strata_lookups_shed_total", map[string]string{"reason": reason}); got != 0 {
			t.Errorf("lookups shed for %s = %g, want 0", reason, got)
		}
	}
	// The tenant's usage: its 7 published pages, no reservation or lease.
	for name, want := range map[string]float64{"strata_tenant_bytes": 7 * page, "strata_tenant_reserved_bytes": 0,
		"strata_tenant_reservations": 0, "strata_tenant_leases": 0} {
		if got := value(t, fams, name, map[string]string{"tenant": "metrics"}); got != want {
			t.Errorf("%s{tenant=metrics} = %g, want %g", name, got, want)
		}
	}
	// One Lookup RPC histogram sample per lookup call.
	if got := value(t, fams, "strata_rpc_duration_seconds", map[string]string{"method": "/strata.v1.Strata/Lookup", "code": "OK"}); got != 2 {
		t.Errorf("lookup rpc samples = %g, want 2", got)
	}
}

// snapshotSource is a Source that always answers snap.
type snapshotSource struct{ snap metrics.Snapshot }

func (s snapshotSource) Snapshot() metrics.Snapshot { return s.snap }

// TestShedReasons: strata_lookups_shed_total splits the store's shed
// lookups by reason: those over the bookkeeping's budget, and the rest,
// shed for contention.
func TestShedReasons(t *testing.T) {
	reg := metrics.New(nil)
	reg.ReadStore(snapshotSource{metrics.Snapshot{LookupsShed: 7, LookupsShedOverBudget: 5}})
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	for reason, want := range map[string]float64{"contention": 2, "budget": 5} {
		if v := value(t, fams, "strata_lookups_shed_total", map[string]string{"reason": reason}); v != want {
			t.Errorf("lookups shed for %s = %g, want %g", reason, v, want)
		}
	}
}
