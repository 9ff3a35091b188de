package node_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// indexerPost posts body to a node's admin HTTP path with token and
// decodes the answer; it returns the HTTP status.
func indexerPost(t testing.TB, n *testnode.Node, path, token string, body any) (int, map[string]map[string]map[string]int) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", "http://"+n.AdminAddr()+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]map[string]map[string]int
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// prompt is 50 pages of tokens of which ns holds the first 40.
func prompt(t testing.TB, ns *client.Namespace) ([]uint32, []namespace.Key) {
	t.Helper()
	keys, pages := chain(ns, 0, 40)
	if _, err := ns.Put(context.Background(), pages); err != nil {
		t.Fatal(err)
	}
	toks := make([]uint32, 16*50+7) // and a partial page
	for i := range toks {
		toks[i] = uint32(i)
	}
	return toks, append(keys, ns.PageKeys(toks)[40:]...)
}

// TestQueryPrefix: a real node answers the prefix query over gRPC (by keys
// and by tokens) and over HTTP in Mooncake's Indexer shape (/query by
// tokens and model, /query_by_hash by keys and namespace_id); another
// tenant is refused the namespace and finds none of its own.
func TestQueryPrefix(t *testing.T) {
	n := testnode.Start(t, node.Config{Tiers: []string{"host"}, TenantTokens: tenantTokens})
	d := desc
	d.Tenant = "acme"
	_, ns := openNS(t, n.Addr(), client.Options{Token: "acme-token"}, d)
	toks, keys := prompt(t, ns)
	id := ns.ID()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer acme-token")
	admin := pb.NewAdminClient(testnode.Dial(t, n.Addr()))
	raw := make([][]byte, len(keys))
	for i := range keys {
		raw[i] = keys[i][:]
	}
	for _, req := range []*pb.QueryPrefixRequest{{NamespaceId: id[:], Keys: raw}, {NamespaceId: id[:], TokenIds: toks}} {
		resp, err := admin.QueryPrefix(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetLongest() != 40 || resp.GetPages() != 50 || resp.GetPageTokens() != 16 || len(resp.GetTiers()) != 1 ||
			resp.GetTiers()[0].GetTier() != pb.Tier_TIER_HOST || resp.GetTiers()[0].GetPages() != 40 {
			t.Fatalf("QueryPrefix: %v", resp)
		}
	}

	want := map[string]map[string]map[string]int{"acme": {n.ID(): {"longest_matched": 640, "CPU": 640}}}
	hexKeys := make([]string, len(keys))
	for i := range keys {
		hexKeys[i] = hex.EncodeToString(keys[i][:])
	}
	for path, body := range map[string]map[string]any{
		"/query":         {"model": d.Model, "block_size": 16, "token_ids": toks},
		"/query_by_hash": {"namespace_id": id.String(), "seq_hashes": hexKeys},
	} {
		code, got := indexerPost(t, n, path, "acme-token", body)
		if code != http.StatusOK || !equalHits(got, want) {
			t.Fatalf("%s: %d %v, want %v", path, code, got, want)
		}
	}
	if code, _ := indexerPost(t, n, "/query_by_hash", "globex-token", map[string]any{"namespace_id": id.String(), "seq_hashes": hexKeys}); code != http.StatusForbidden {
		t.Fatalf("globex asking for acme's namespace: %d", code)
	}
	if code, _ := indexerPost(t, n, "/query", "globex-token", map[string]any{"model": d.Model, "block_size": 16, "token_ids": toks}); code != http.StatusNotFound {
		t.Fatalf("globex asking for its own namespace of acme's model: %d", code)
	}
	if code, _ := indexerPost(t, n, "/query", "", map[string]any{"model": d.Model, "block_size": 16}); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
}

func equalHits(a, b map[string]map[string]map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for t, in := range a {
		if len(in) != len(b[t]) {
			return false
		}
		for node, hits := range in {
			if len(hits) != len(b[t][node]) {
				return false
			}
			for k, v := range hits {
				if b[t][node][k] != v {
					return false
				}
			}
		}
	}
	return true
}

// BenchmarkQueryPrefix times the prefix query of a 1,000-page prompt the
// nodes hold whole beside a 1,000-key Lookup over gRPC, and reports each
// one's p50 and p99: on one real node (nodes=1: gRPC QueryPrefix by keys,
// and HTTP /query_by_hash), and on three in this process on one etcd
// (nodes=3: the client's Lookup, which asks each key's owner, and the
// cluster query, which one node answers by asking the other two about
// every key).
//
//	go test ./node -run '^$' -bench BenchmarkQueryPrefix -benchtime 2000x
func BenchmarkQueryPrefix(b *testing.B) {
	b.Run("nodes=1", func(b *testing.B) {
		n := testnode.Start(b, node.Config{Tiers: []string{"host"}, HostBytes: 1100 * 16 << 10})
		benchQueries(b, n, false)
	})
	b.Run("nodes=3", func(b *testing.B) {
		c := testnode.StartCluster(b, 3, func(_ int, cfg *node.Config) {
			cfg.Tiers, cfg.HostBytes = []string{"host"}, 1100*16<<10
		})
		benchQueries(b, c.Nodes[0], true)
	})
}

// benchQueries puts a 1,000-page prompt through n and times the queries.
func benchQueries(b *testing.B, n *testnode.Node, cluster bool) {
	c, err := client.Dial(context.Background(), n.Addr(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if cluster && !poll.Within(30*time.Second, 10*time.Millisecond, func() bool { return len(c.Members()) == 3 }) {
		b.Fatalf("members: %v", c.Members())
	}
	ns, err := c.Open(context.Background(), desc)
	if err != nil {
		b.Fatal(err)
	}
	keys, pages := chain(ns, 0, 1000)
	for i := 0; i < len(pages); i += 250 {
		if _, err := ns.Put(context.Background(), pages[i:i+250]); err != nil {
			b.Fatal(err)
		}
	}
	id := ns.ID()
	raw := make([][]byte, len(keys))
	hexKeys := make([]string, len(keys))
	for i := range keys {
		raw[i], hexKeys[i] = keys[i][:], hex.EncodeToString(keys[i][:])
	}
	admin := pb.NewAdminClient(testnode.Dial(b, n.Addr()))
	ctx := context.Background()
	cases := []struct {
		name string
		call func() error
	}{
		{"lookup", func() error {
			r, err := ns.Lookup(ctx, keys, false, 0)
			if err == nil && r.HitPrefix != 1000 {
				b.Fatalf("lookup: %d", r.HitPrefix)
			}
			return err
		}},
		{"query-grpc", func() error {
			r, err := admin.QueryPrefix(ctx, &pb.QueryPrefixRequest{NamespaceId: id[:], Keys: raw, Cluster: cluster})
			if err == nil && r.GetLongest() != 1000 {
				b.Fatalf("query: %v", r)
			}
			return err
		}},
	}
	if !cluster {
		cases = append(cases, struct {
			name string
			call func() error
		}{"query-http", func() error {
			if code, got := indexerPost(b, n, "/query_by_hash", "", map[string]any{"namespace_id": id.String(), "seq_hashes": hexKeys}); code != http.StatusOK || got["tiers"][n.ID()]["longest_matched"] != 16000 {
				b.Fatalf("query_by_hash: %d %v", code, got)
			}
			return nil
		}})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
		})
	}
}
