package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// TestTenantCommands: strata tenant add prints a token a node then serves
// (within seconds, from etcd), ls shows the tenant and its quota without
// the token, rotate makes the old token refused, rm the new one.
func TestTenantCommands(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, ShmSocket: "off", AdminToken: "root"})
	env := map[string]string{"STRATA_ENDPOINT": n.Addr(), "STRATA_ETCD": strings.Join(n.EtcdEndpoints(), ",")}
	cli := func(args ...string) string {
		t.Helper()
		out, _, err := strata(t, env, args...)
		if err != nil {
			t.Fatalf("strata %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	var added struct{ Tenant, Token string }
	if err := json.Unmarshal([]byte(cli("tenant", "add", "acme", "--bytes", "1048576", "-o", "json")), &added); err != nil || len(added.Token) != 64 {
		t.Fatalf("tenant add: %+v, %v", added, err)
	}
	if _, _, err := strata(t, env, "tenant", "add", "acme"); err == nil {
		t.Fatal("adding a tenant twice succeeded")
	}
	ls := cli("tenant", "ls")
	if !strings.Contains(ls, "acme") || !strings.Contains(ls, "1MiB") || strings.Contains(ls, added.Token) {
		t.Fatalf("tenant ls:\n%s", ls)
	}
	d := namespace.Descriptor{Tenant: "acme", Model: "m", ModelRevision: "r", Engine: "test", DType: "bf16",
		PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}
	served := func(token string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, n.Addr(), client.Options{Token: token})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Open(ctx, d)
		return err
	}
	within := func(what string, ok func() bool) {
		t.Helper()
		for start := time.Now(); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: not within 5s", what)
			}
		}
	}
	within("the added tenant served", func() bool { return served(added.Token) == nil })
	var rotated struct{ Tenant, Token string }
	if err := json.Unmarshal([]byte(cli("tenant", "rotate", "acme", "-o", "json")), &rotated); err != nil || rotated.Token == added.Token {
		t.Fatalf("tenant rotate: %+v, %v", rotated, err)
	}
	within("the old token refused", func() bool { return errors.Is(served(added.Token), client.ErrUnauthenticated) })
	within("the new token served", func() bool { return served(rotated.Token) == nil })
	cli("tenant", "rm", "acme")
	within("the removed tenant refused", func() bool { return errors.Is(served(rotated.Token), client.ErrUnauthenticated) })
	if _, _, err := strata(t, env, "tenant", "rm", "acme"); err == nil {
		t.Fatal("removing a removed tenant succeeded")
	}
}
