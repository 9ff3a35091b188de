package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// TestKeysQueryAndSnapshot: keys query answers how much of a prompt the
// cluster holds (by keys and by --tokens), keys snapshot dumps the
// namespace's keys with the stream's next_seq and topic.
func TestKeysQueryAndSnapshot(t *testing.T) {
	listen := node.EventsListen{Pub: "127.0.0.1:0"}
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, TenantTokens: map[string]string{"acme-token": "acme"},
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": listen}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := openAcme(t, ctx, n.Addr(), "q")
	toks := make([]uint32, 5*16)
	for i := range toks {
		toks[i] = uint32(i)
	}
	keys := ns.PageKeys(toks)
	if _, err := ns.Put(ctx, client.ChainPages(keys[:3], testnode.PagesOf(keys[:3], ns.PageBytes()))); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"STRATA_ENDPOINT": n.Addr(), "STRATA_TOKEN": "acme-token"}
	id := ns.ID()
	args := []string{"keys", "query", id.String()}
	for _, k := range keys {
		args = append(args, k.String())
	}
	tokStrs := make([]string, len(toks))
	for i, tk := range toks {
		tokStrs[i] = fmt.Sprint(tk)
	}
	tokArg := strings.Join(tokStrs, ",")
	for _, a := range [][]string{args, {"keys", "query", id.String(), "--tokens", tokArg}} {
		var q struct {
			Pages   uint32            `json:"pages"`
			Longest uint32            `json:"longest"`
			Tiers   map[string]uint32 `json:"tiers"`
			Nodes   []struct {
				NodeID string `json:"node_id"`
				Held   uint32 `json:"held"`
			} `json:"nodes"`
		}
		out := mustStrata(t, env, append(a, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), &q); err != nil || q.Pages != 5 || q.Longest != 3 || q.Tiers["host"] != 3 ||
			len(q.Nodes) != 1 || q.Nodes[0].NodeID != n.ID() || q.Nodes[0].Held != 3 {
			t.Fatalf("%v: %v\n%s", a, err, out)
		}
	}
	checkLines(t, "keys query", mustStrata(t, env, args...), false,
		`prompt: 5 pages \(16 tokens each\)`, `cluster holds: 3 from the first, gpu 0, host 3, ssd 0`,
		`NODE\s+FROM FIRST\s+HELD\s+ERROR`, n.ID()+`\s+3\s+3\s*`)

	var snap struct {
		NodeID  string `json:"node_id"`
		NextSeq uint64 `json:"next_seq"`
		Topic   string `json:"topic"`
		Total   uint64 `json:"total"`
		Keys    []struct {
			Key, Parent, Tier string
		} `json:"keys"`
	}
	out := mustStrata(t, env, "keys", "snapshot", id.String(), "-o", "json")
	if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.NodeID != n.ID() || snap.Total != 3 || len(snap.Keys) != 3 ||
		snap.Topic != fmt.Sprintf("kv@%s.1@%s", n.ID(), id) {
		t.Fatalf("keys snapshot: %v\n%s", err, out)
	}
	held := map[string]string{}
	for _, k := range snap.Keys {
		held[k.Key] = k.Parent
	}
	if p, ok := held[keys[1].String()]; !ok || p != keys[0].String() {
		t.Fatalf("keys snapshot: key 1's parent %q, want key 0's\n%s", p, out)
	}
}

// openAcme opens a namespace of tenant acme (16-token pages) of model on
// the node at addr, as acme; the client closes with the test.
func openAcme(t *testing.T, ctx context.Context, addr, model string) *client.Namespace {
	t.Helper()
	c, err := client.Dial(ctx, addr, client.Options{Token: "acme-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ns, err := c.Open(ctx, namespace.Descriptor{Tenant: "acme", Model: model, ModelRevision: "r", Engine: "test", DType: "bf16",
		PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}
