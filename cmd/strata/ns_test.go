package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/admintest"
)

// cluster is a node holding three namespaces: acme's llama with 3 pages
// and one lookup (3 hits of 4 keys, leased), its fork with page_tokens 32
// and 1 page, and beta's llama, empty.
type cluster struct {
	*testNode
	acme, fork, beta []byte           // namespace IDs
	pageBytes        uint64           // of acme
	pages            []admintest.Page // in acme
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	n := startNode(t, nil)
	c := &cluster{testNode: n}
	acme := n.Open(t, admintest.Descriptor("acme"))
	c.acme, c.pageBytes = acme.GetNamespaceId(), acme.GetPageBytes()
	if c.pageBytes != 16384 {
		t.Fatalf("page bytes = %d, want 16384", c.pageBytes)
	}
	c.pages = admintest.Chain("a", 3, c.pageBytes)
	n.Put(t, c.acme, c.pages)
	missing := make([]byte, 32)
	if got := n.Lookup(t, c.acme, true, c.pages[0].Key, c.pages[1].Key, c.pages[2].Key, missing); got.GetHitPrefix() != 3 {
		t.Fatalf("hit prefix = %d, want 3", got.GetHitPrefix())
	}

	fd := admintest.Descriptor("acme")
	fd.PageTokens = 32
	fork := n.Open(t, fd)
	c.fork = fork.GetNamespaceId()
	n.Put(t, c.fork, admintest.Chain("f", 1, fork.GetPageBytes()))

	c.beta = n.Open(t, admintest.Descriptor("beta")).GetNamespaceId()
	return c
}

func TestNSLs(t *testing.T) {
	c := newCluster(t)

	rows := table(c.run(t, "ns", "ls"))
	want := [][]string{
		{"ID", "TENANT", "MODEL", "REVISION", "ENGINE", "DTYPE", "TP", "PAGE_TOKENS", "PAGE_BYTES", "PAGES", "BYTES", "HIT%", "LEASES"},
	}
	acmeRows := [][]string{
		{hex.EncodeToString(c.acme)[:12], "acme", "llama-3-8b", "r1", "vllm", "bf16", "1", "16", "16KiB", "3", "48KiB", "75.0%", "1"},
		{hex.EncodeToString(c.fork)[:12], "acme", "llama-3-8b", "r1", "vllm", "bf16", "1", "32", "32KiB", "1", "32KiB", "-", "0"},
	}
	// Forks sort together; between them, by ID.
	slices.SortFunc(acmeRows, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	want = append(want, acmeRows...)
	want = append(want, []string{hex.EncodeToString(c.beta)[:12], "beta", "llama-3-8b", "r1", "vllm", "bf16", "1", "16", "16KiB", "0", "0B", "-", "0"})
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("ns ls:\n got %q\nwant %q", rows, want)
	}

	rows = table(c.run(t, "ns", "ls", "--tenant", "beta"))
	if len(rows) != 2 || rows[1][1] != "beta" {
		t.Errorf("ns ls --tenant beta: %q", rows)
	}
}

func TestNSLsJSON(t *testing.T) {
	c := newCluster(t)
	var doc struct {
		NodeID     string          `json:"node_id"`
		Namespaces []namespaceJSON `json:"namespaces"`
	}
	out := c.run(t, "ns", "ls", "-o", "json", "--tenant", "acme")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns ls -o json: %v\n%s", err, out)
	}
	if doc.NodeID == "" || len(doc.Namespaces) != 2 {
		t.Fatalf("ns ls -o json: node %q, %d namespaces:\n%s", doc.NodeID, len(doc.Namespaces), out)
	}
	i := slices.IndexFunc(doc.Namespaces, func(n namespaceJSON) bool { return n.ID == hex.EncodeToString(c.acme) })
	if i < 0 {
		t.Fatalf("acme's namespace missing:\n%s", out)
	}
	n := doc.Namespaces[i]
	if n.Descriptor.Tenant != "acme" || n.Descriptor.Model != "llama-3-8b" || n.Descriptor.PageTokens != 16 ||
		n.PageBytes != 16384 || n.Pages != 3 || n.Bytes != 3*16384 || n.LookupKeys != 4 || n.HitKeys != 3 ||
		n.HitRate == nil || *n.HitRate != 75 || n.LeasesActive != 1 {
		t.Errorf("acme's namespace: %+v", n)
	}
	// Field names are the proto's, whatever the Go structs say.
	for _, field := range []string{`"page_bytes"`, `"hit_keys"`, `"model_revision"`, `"num_kv_heads"`, `"leases_active"`} {
		if !strings.Contains(out, field) {
			t.Errorf("ns ls -o json lacks %s", field)
		}
	}
}

func TestNSShow(t *testing.T) {
	c := newCluster(t)
	id := hex.EncodeToString(c.acme)
	out := c.run(t, "ns", "show", strings.ToUpper(id[:8]))
	checkLines(t, "ns show", out, true,
		`id:\s+`+id,
		`tenant:\s+acme`,
		`model:\s+llama-3-8b`,
		`model_revision:\s+r1`,
		`adapter:\s+-`,
		`engine:\s+vllm`,
		`dtype:\s+bf16`,
		`page_tokens:\s+16`,
		`num_layers:\s+2`,
		`num_kv_heads:\s+2`,
		`head_dim:\s+64`,
		`tp_size:\s+1`,
		`checksum:\s+crc32c`,
		`page_format:\s+-`,
		`page_bytes:\s+16384 \(16KiB\)`,
		`pages:\s+3`,
		`bytes:\s+49152 \(48KiB\)`,
		`lookup_keys:\s+4`,
		`hit_keys:\s+3`,
		`hit_rate:\s+75.0%`,
		`leases_active:\s+1`,
		`tiers:`,
		`host:\s+3 pages, 49152 bytes \(48KiB\)`,
	)

	var doc struct {
		NodeID    string        `json:"node_id"`
		Namespace namespaceJSON `json:"namespace"`
	}
	out = c.run(t, "ns", "show", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns show -o json: %v\n%s", err, out)
	}
	if doc.Namespace.ID != id || doc.Namespace.Descriptor.Engine != "vllm" || doc.Namespace.Descriptor.Checksum != "crc32c" ||
		doc.Namespace.Pages != 3 || doc.NodeID == "" {
		t.Errorf("ns show -o json: %+v", doc)
	}
}

func TestUnknownNamespace(t *testing.T) {
	n := startNode(t, nil)
	env := map[string]string{"STRATA_ENDPOINT": n.Addr}
	for _, args := range [][]string{
		{"ns", "show", "deadbeef"},
		{"keys", "ls", "deadbeef"},
		{"keys", "stat", "deadbeef", strings.Repeat("ab", 32)},
	} {
		_, _, err := strata(t, env, args...)
		if err == nil || !strings.Contains(err.Error(), `no namespace matches "deadbeef" on the node at `+n.Addr) ||
			!strings.Contains(err.Error(), "strata ns ls") {
			t.Errorf("strata %s: err = %v", strings.Join(args, " "), err)
		}
	}
}

func TestAmbiguousPrefix(t *testing.T) {
	n := startNode(t, nil)
	// 17 namespaces: two of them share a first hex digit.
	seen := map[byte]bool{}
	var shared string
	for i := range 17 {
		d := admintest.Descriptor("acme")
		d.ModelRevision = fmt.Sprintf("r%d", i)
		id := hex.EncodeToString(n.Open(t, d).GetNamespaceId())
		if seen[id[0]] {
			shared = id[:1]
		}
		seen[id[0]] = true
	}
	_, _, err := strata(t, map[string]string{"STRATA_ENDPOINT": n.Addr}, "ns", "show", shared)
	if err == nil || !strings.Contains(err.Error(), "more hex digits") {
		t.Errorf("ambiguous prefix %q: err = %v", shared, err)
	}
}
