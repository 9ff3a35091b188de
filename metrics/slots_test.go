package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// TestSlotsApart: the arena slots a node grants a same-host client's shm
// connection ahead of its puts are scraped as slots (the node's, the
// tenant's, and their bytes in the host tier's use), not as reservations,
// of which none is open once the puts are done.
func TestSlotsApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := testnode.Start(t, node.Config{HostBytes: 32 << 20})
	c, err := client.Dial(ctx, n.Addr(), client.Options{NoRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns, err := c.Open(ctx, namespace.Descriptor{Tenant: "slots", Model: "m", ModelRevision: "r", Engine: "test",
		DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64})
	if err != nil {
		t.Fatal(err)
	}
	keys, data := chain(ns, 4)
	// The first put asks for the slots the next one puts into, and its
	// answer grants their replacements: the connection holds slots after.
	for _, part := range [][2]int{{0, 2}, {2, 4}} {
		if _, err := ns.Put(ctx, client.ChainPages(keys[part[0]:part[1]], data[part[0]:part[1]])); err != nil {
			t.Fatal(err)
		}
	}

	fams := scrape(t, n.AdminAddr())
	page := float64(ns.PageBytes())
	tenant := map[string]string{"tenant": "slots"}
	slots := value(t, fams, "strata_slots", nil)
	if slots == 0 {
		t.Fatal("strata_slots = 0 with an shm client's slots granted")
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"strata_reservations", nil, 0},
		{"strata_tenant_slots", tenant, slots},
		{"strata_tenant_slot_bytes", tenant, slots * page},
		{"strata_tenant_reservations", tenant, 0},
		{"strata_tenant_reserved_bytes", tenant, 0},
		{"strata_tenant_bytes", tenant, 4 * page},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	host := map[string]string{"tier": "host"}
	if b, used := value(t, fams, "strata_tier_slot_bytes", host), value(t, fams, "strata_tier_used_bytes", host); b < slots*page || b > used {
		t.Errorf("strata_tier_slot_bytes{tier=host} = %g, want at least %g and within the %g used", b, slots*page, used)
	}
}
