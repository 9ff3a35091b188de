package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestTenantLsShowsSlots: the arena slots a node grants a same-host (shm)
// connection ahead of its puts show apart from reservations, in count and
// bytes: in NodeInfo (the node's, its host tier's and the tenant's) and in
// strata tenant ls, table and JSON. Once the puts are done the tenant has
// no reservation open, only the slots its live connection holds, which go
// back when the connection closes.
func TestTenantLsShowsSlots(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, AdminToken: "root"})
	env := map[string]string{"STRATA_ENDPOINT": n.Addr(), "STRATA_ETCD": strings.Join(n.EtcdEndpoints(), ","),
		"STRATA_TOKEN": "root"}
	cli := func(args ...string) string {
		t.Helper()
		return mustStrata(t, env, args...)
	}
	cli("tenant", "add", "acme")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The admin may map the arena: its puts go through shared memory, and
	// its first asks for the slots the next ones will use.
	c, err := client.Dial(ctx, n.Addr(), client.Options{Token: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := putChain(ctx, t, c, namespace.Descriptor{Tenant: "acme", Model: "m", ModelRevision: "r", Engine: "test",
		DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}, 3)
	page := uint64(ns.PageBytes())

	info := nodeInfo(ctx, t, n.Addr())
	slots := info.GetSlots()
	var host *pb.TierStats
	for _, ts := range info.GetTiers() {
		if ts.GetTier() == pb.Tier_TIER_HOST {
			host = ts
		}
	}
	var acme *pb.TenantUsage
	for _, u := range info.GetTenants() {
		if u.GetTenant() == "acme" {
			acme = u
		}
	}
	switch {
	case slots == 0 || info.GetSlotBytes() != slots*page || info.GetReservations() != 0:
		t.Fatalf("NodeInfo: %d slots of %d bytes, %d reservations; want slots of %d-byte pages, no reservation",
			slots, info.GetSlotBytes(), info.GetReservations(), page)
	case host == nil || host.GetSlotBytes() < slots*page || host.GetSlotBytes() > host.GetUsedBytes():
		t.Fatalf("host tier %v: want its slot bytes at least %d, within its used bytes", host, slots*page)
	case acme == nil || acme.GetSlots() != slots || acme.GetSlotBytes() != slots*page ||
		acme.GetReservations() != 0 || acme.GetReservedBytes() != 0 || acme.GetBytes() != 3*page:
		t.Fatalf("acme's usage %v: want %d slots, no reservation, 3 pages", acme, slots)
	}

	var doc struct {
		Tenants []tenantRow `json:"tenants"`
	}
	out := cli("tenant", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("tenant ls -o json: %v\n%s", err, out)
	}
	if len(doc.Tenants) != 1 || doc.Tenants[0].Usage == nil {
		t.Fatalf("tenant ls -o json:\n%s", out)
	}
	if u := doc.Tenants[0].Usage; u.GetSlots() != slots || u.GetSlotBytes() != slots*page || u.GetReservations() != 0 ||
		u.GetReservedBytes() != 0 || !strings.Contains(out, `"slots"`) || !strings.Contains(out, `"slot_bytes"`) {
		t.Errorf("tenant ls -o json: want %d slots apart from no reservation:\n%s", slots, out)
	}

	rows := table(cli("tenant", "ls"))
	col := func(name string) string {
		t.Helper()
		i := slices.Index(rows[0], name)
		if i < 0 || len(rows) != 2 || len(rows[1]) != len(rows[0]) {
			t.Fatalf("tenant ls: no column %s, or not one row of acme: %q", name, rows)
		}
		return rows[1][i]
	}
	for name, want := range map[string]string{"TENANT": "acme", "SLOTS": strconv.FormatUint(slots, 10),
		"SLOT_BYTES": humanBytes(slots * page), "OPEN": "0", "RESERVED": "0B", "USED": humanBytes(3 * page)} {
		if got := col(name); got != want {
			t.Errorf("tenant ls %s = %q, want %q", name, got, want)
		}
	}

	// The slots are the connection's: they go back when it closes.
	c.Close()
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the slots going back with the client's connection", func() bool {
		return nodeInfo(ctx, t, n.Addr()).GetSlots() == 0
	})
}

// mustStrata runs the CLI with env and returns its output, failing the
// test on an error.
func mustStrata(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, _, err := strata(t, env, args...)
	if err != nil {
		t.Fatalf("strata %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// putChain opens d through c and puts a chain of n zeroed pages into it,
// failing the test unless every page is committed.
func putChain(ctx context.Context, t *testing.T, c *client.Client, d namespace.Descriptor, n int) *client.Namespace {
	t.Helper()
	ns, err := c.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]uint32, int(d.PageTokens)*n)
	for i := range toks {
		toks[i] = uint32(i)
	}
	data := make([][]byte, n)
	for i := range data {
		data[i] = make([]byte, ns.PageBytes())
	}
	res, err := ns.Put(ctx, client.ChainPages(ns.PageKeys(toks), data))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Committed {
			t.Fatalf("put of page %d of %d: %+v", i, n, r)
		}
	}
	return ns
}

// nodeInfo asks the node at addr for its NodeInfo as the admin.
func nodeInfo(ctx context.Context, t *testing.T, addr string) *pb.NodeInfoResponse {
	t.Helper()
	c, err := admin.Dial(ctx, []string{addr}, admin.Options{Token: "root", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rs := c.Nodes(ctx)
	if len(rs) != 1 || rs[0].Info == nil {
		t.Fatalf("NodeInfo of one node: %+v", rs)
	}
	return rs[0].Info
}
