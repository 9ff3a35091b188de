package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
)

// TestTenantsFromEtcd: tenants recorded in etcd (hashed tokens, quotas)
// are in force on the node within a poll: a tenant at its byte quota has
// its further pages REJECTED (QUOTA) and cannot push another tenant's
// pages out, and a token revoked in etcd is refused, on gRPC and on the
// raw plane, within 5 s.
func TestTenantsFromEtcd(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	n := testnode.Start(t, node.Config{HostBytes: 2 << 20, ShmSocket: "off", NoCutoffFloor: true,
		AdminToken: "root", AuditLog: auditLog}) // 128 pages of 16 KiB
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg, err := registry.Open(ctx, registry.Config{Endpoints: n.EtcdEndpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	const page = 16 << 10
	for _, tn := range []registry.Tenant{
		{Name: "acme", TokenSHA256: server.HashToken("tok-a"), Quota: registry.Quota{Bytes: 32 * page}},
		{Name: "beta", TokenSHA256: server.HashToken("tok-b")},
	} {
		if err := reg.PutTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	open := func(token, tenant string, noRaw bool) (*client.Client, *client.Namespace, error) {
		c, err := client.Dial(ctx, n.Addr(), client.Options{Token: token, NoRaw: noRaw})
		if err != nil {
			return nil, nil, err
		}
		d := desc
		d.Tenant = tenant
		ns, err := c.Open(ctx, d)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		t.Cleanup(func() { c.Close() })
		return c, ns, nil
	}
	var a *client.Namespace
	for deadline := time.Now().Add(5 * time.Second); ; {
		var err error
		if _, a, err = open("tok-a", "acme", false); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a tenant put in etcd is not served after 5s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, b, err := open("tok-b", "beta", true)
	if err != nil {
		t.Fatal(err)
	}

	pagesOf := func(ns *client.Namespace, seed uint32, count int) []client.Page {
		tokens := make([]uint32, count*int(desc.PageTokens))
		for i := range tokens {
			tokens[i] = seed + uint32(i)
		}
		keys := ns.PageKeys(tokens)
		data := make([][]byte, len(keys))
		for i, k := range keys {
			data[i] = pageOf(k, ns.PageBytes())
		}
		return client.ChainPages(keys, data)
	}
	bPages := pagesOf(b, 1<<20, 64)
	if res, err := b.Put(ctx, bPages); err != nil || committed(res) != 64 {
		t.Fatalf("beta's put: %d of 64 committed, %v", committed(res), err)
	}
	// acme puts 96 pages: 32 fit its quota, the rest are refused, and
	// none of beta's pages is pushed out (the tier has room for 128).
	res, _ := a.Put(ctx, pagesOf(a, 0, 96))
	if got := committed(res); got != 32 {
		t.Fatalf("acme at a 32-page quota committed %d of 96", got)
	}
	if res[32].Status != client.Rejected {
		t.Fatalf("the page past acme's quota: %v %q", res[32].Status, res[32].Reason)
	}
	t.Logf("past the quota: %v %q", res[32].Status, res[32].Reason)
	hit, err := b.Lookup(ctx, keysOf(bPages), false, 0)
	if err != nil || hit.HitPrefix != 64 {
		t.Fatalf("beta's pages after acme's puts: %d of 64, %v", hit.HitPrefix, err)
	}

	if err := reg.DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for {
		_, err := a.Lookup(ctx, keysOf(pagesOf(a, 0, 1)), false, 0)
		if errors.Is(err, client.ErrUnauthenticated) {
			break
		}
		if time.Since(revoked) > 5*time.Second {
			t.Fatalf("a revoked token still works after 5s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("revoked token refused %v after the delete", time.Since(revoked).Round(time.Millisecond))
	if _, _, err := open("tok-a", "acme", true); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("a new client with the revoked token: %v", err)
	}
	if _, err := b.Lookup(ctx, keysOf(bPages), false, 0); err != nil {
		t.Fatalf("beta after acme's revocation: %v", err)
	}

	// The audit log has the delete (who, what) and the revocation.
	if d, err := b.Delete(ctx, keysOf(bPages[63:])); err != nil || d != 1 {
		t.Fatalf("beta's delete: %d, %v", d, err)
	}
	log, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"who":"tenant:beta"`, `"op":"delete keys"`, `"deleted":1`, `"op":"tenant removed","tenant":"acme"`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, log)
		}
	}
}

func committed(res []client.PutResult) int {
	n := 0
	for _, r := range res {
		if r.Status == client.Committed {
			n++
		}
	}
	return n
}

func keysOf(pages []client.Page) []namespace.Key {
	keys := make([]namespace.Key, len(pages))
	for i, p := range pages {
		keys[i] = p.Key
	}
	return keys
}
