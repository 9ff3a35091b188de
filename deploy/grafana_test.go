// Package deploy_test checks the deployment files in deploy/ against the
// node they deploy: the Grafana dashboard must only query metrics, labels
// and label values that a running node exports.
package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"` // a string, or {"query": "..."}
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int     `json:"id"`
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"` // a collapsed row's
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// query is one PromQL expression of the dashboard and where it is.
type query struct{ where, expr string }

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"instance", "job"}

func loadDashboard(t *testing.T) (dashboard, []query) {
	t.Helper()
	raw, err := os.ReadFile("grafana/strata.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana/strata.json: %v", err)
	}
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, query{"panel " + p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q.Query); err != nil {
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
		}
		qs = append(qs, query{"variable " + v.Name, q.Query})
	}
	return d, qs
}

// exported is what a node's /metrics serves: sample name → label name →
// the values seen.
type exported map[string]map[string][]string

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? \S+`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape starts a node, sends it traffic that makes every metric appear
// (a put, a leased lookup that hits, a get), and reads its /metrics.
func scrape(t *testing.T) exported {
	t.Helper()
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20})
	c, err := client.Dial(t.Context(), n.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ns, err := c.Open(ctx, namespace.Descriptor{Tenant: "acme", Model: "llama-3-8b", ModelRevision: "r1", Engine: "vllm",
		DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64,
		Compute: namespace.ComputeProfile{Params: 8e9, AttentionHeads: 32, AttentionHeadDim: 128}})
	if err != nil {
		t.Fatal(err)
	}
	keys := ns.PageKeys(make([]uint32, 32))
	data := [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes())}
	if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
		t.Fatal(err)
	}
	hit, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil || hit.HitPrefix != 2 {
		t.Fatalf("lookup: %v, hit prefix %d", err, hit.HitPrefix)
	}
	if _, err := ns.Get(ctx, keys, data, hit.Lease); err != nil {
		t.Fatal(err)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.AdminAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	out := exported{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := out[m[1]]
		if labels == nil {
			labels = map[string][]string{}
			out[m[1]] = labels
		}
		for _, p := range labelPair.FindAllStringSubmatch(m[3], -1) {
			if !slices.Contains(labels[p[1]], p[2]) {
				labels[p[1]] = append(labels[p[1]], p[2])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	// selector is a metric name with its optional label matchers.
	selector = regexp.MustCompile(`\b(strata_[a-zA-Z0-9_]+)\s*(\{([^}]*)\})?`)
	// matcher is one label matcher inside braces.
	matcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	// grouping is a by or without clause.
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// labelValues is a variable's label_values(metric..., label).
	labelValues = regexp.MustCompile(`label_values\(\s*(strata_[a-zA-Z0-9_]+)[^,]*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
)

// TestDashboardMatchesMetrics checks every query of the dashboard against
// a real node's /metrics: each metric name is exported, each label it
// selects or groups by exists on it, and each value it compares a label
// with exactly occurs.
func TestDashboardMatchesMetrics(t *testing.T) {
	d, qs := loadDashboard(t)
	if d.Title == "" || d.UID == "" || len(qs) == 0 {
		t.Fatalf("dashboard: title %q, uid %q, %d queries", d.Title, d.UID, len(qs))
	}
	got := scrape(t)
	used := map[string]bool{}
	for _, q := range qs {
		sels := selector.FindAllStringSubmatch(q.expr, -1)
		if len(sels) == 0 {
			t.Errorf("%s: no strata metric in %q", q.where, q.expr)
		}
		var names []string // those exported
		for _, m := range sels {
			name := m[1]
			labels, ok := got[name]
			if !ok {
				t.Errorf("%s: %s is not a metric the node exports", q.where, name)
				continue
			}
			names = append(names, name)
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")] = true
			for _, mm := range matcher.FindAllStringSubmatch(m[3], -1) {
				label, op, value := mm[1], mm[2], mm[3]
				values, ok := labels[label]
				switch {
				case slices.Contains(targetLabels, label):
				case !ok:
					t.Errorf("%s: %s has no label %q", q.where, name, label)
				case (op == "=" || op == "!=") && !strings.Contains(value, "$") && !slices.Contains(values, value):
					t.Errorf("%s: %s{%s%s%q}: the node exports %s values %q", q.where, name, label, op, value, label, values)
				}
			}
		}
		for _, g := range grouping.FindAllStringSubmatch(q.expr, -1) {
			for _, label := range strings.Split(g[1], ",") {
				label = strings.TrimSpace(label)
				if label == "" || slices.Contains(targetLabels, label) {
					continue
				}
				if !slices.ContainsFunc(names, func(n string) bool { _, ok := got[n][label]; return ok }) {
					t.Errorf("%s: groups by %q, which none of %q has", q.where, label, names)
				}
			}
		}
		for _, lv := range labelValues.FindAllStringSubmatch(q.expr, -1) {
			if _, ok := got[lv[1]][lv[2]]; !ok && !slices.Contains(targetLabels, lv[2]) {
				t.Errorf("%s: label_values of %s by %q, which it does not have", q.where, lv[1], lv[2])
			}
		}
	}
	// The dashboard shows every strata family the node exports.
	for name := range got {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if strings.HasPrefix(base, "strata_") && !used[base] {
			t.Errorf("the dashboard never shows %s", base)
		}
	}
}

// TestDashboardPanels checks the dashboard's shape: unique panel IDs, one
// data source variable every panel uses, the panels an operator looks for.
func TestDashboardPanels(t *testing.T) {
	d, _ := loadDashboard(t)
	ids := map[int]bool{}
	var titles []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d is used twice", p.ID)
			}
			ids[p.ID] = true
			titles = append(titles, p.Title)
			if p.Type != "row" && p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q uses data source %q, want ${datasource}", p.Title, p.Datasource.UID)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, want := range []string{"Key hit rate", "Prefill FLOPs saved /s", "Bytes by tier", "Puts by outcome /s",
		"Evictions and demotions /s", "RPC latency p50 / p99 by method", "Room outcomes /s by reason",
		"Publish to loaded p50 / p99", "Transfer bytes loaded /s", "Transfer pinned bytes by node"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q among %q", want, titles)
		}
	}
}
