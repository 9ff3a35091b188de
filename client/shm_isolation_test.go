//go:build linux

package client_test

import (
	"bytes"
	"testing"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
)

// TestShmStaleLocationAfterReplace: a same-host client's lease-less Get
// never serves the bytes of a page that was deleted and put again with
// other bytes, even while another client's lease keeps the deleted page's
// memory: every cached location of the old page fails its generation
// check (it used to pass, the pinned extent being neither freed nor
// re-generationed, and the old bytes came back as a hit).
func TestShmStaleLocationAfterReplace(t *testing.T) {
	n, _ := shmNode(t, nil)
	ctx := ctxT(t)
	a := dial(t, n.Addr(), "")
	nsA := open(t, a)
	if !a.ShmActive() {
		t.Fatal("the same-host client does not use shared memory")
	}
	b := dialWith(t, n.Addr(), client.Options{NoShm: true})
	nsB := open(t, b)
	keys := nsA.PageKeys(tokens(16, 41))
	old := pagesFor(nsA, keys)
	putWant(ctx, t, nsA, client.ChainPages(keys, old), client.Committed, "put")
	buf := [][]byte{make([]byte, nsA.PageBytes())}
	if found, err := nsA.Get(ctx, keys, buf, nil); err != nil || !found[0] || !bytes.Equal(buf[0], old[0]) {
		t.Fatalf("first get: found %v, err %v", found, err)
	}
	lr, err := nsB.Lookup(ctx, keys, true, 0)
	if err != nil || lr.Lease == nil {
		t.Fatalf("lookup with lease: %+v, %v", lr, err)
	}
	if d, err := nsB.Delete(ctx, keys); err != nil || d != 1 {
		t.Fatalf("delete: %d, %v", d, err)
	}
	replaced := [][]byte{bytes.Repeat([]byte{0xC3}, nsA.PageBytes())}
	putWant(ctx, t, nsB, client.ChainPages(keys, replaced), client.Committed, "put again")
	for i := range 3 {
		clear(buf[0])
		found, err := nsA.Get(ctx, keys, buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if found[0] && bytes.Equal(buf[0], old[0]) {
			t.Fatalf("get %d after delete and put: the deleted page's bytes were served", i)
		}
		if found[0] && !bytes.Equal(buf[0], replaced[0]) {
			t.Fatalf("get %d after delete and put: bytes that are neither page", i)
		}
	}
}

// TestShmTenantsOwnArena: the host arena holds every tenant's pages, so a
// tenant the node does not list among its shm tenants is refused at hello
// (it used to be handed the arena's memfd, and with it every other
// tenant's bytes) and its client works over the raw plane; a listed
// tenant maps it.
func TestShmTenantsOwnArena(t *testing.T) {
	n, sock := shmNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "acme", "token-b": "other"}
		c.ShmTenants = []string{"acme"}
	})
	ctx := ctxT(t)
	_, _, keys, data := twoPagesOver(ctx, t, n, "shm", (*client.Client).ShmActive)

	_, m := shmRaw(t, sock, "token-b")
	wantCode(t, "hello of a tenant not sharing the arena", m, frame.CodeDenied)
	if _, m := shmRaw(t, sock, "token-a"); m.Op() != frame.OpWelcome {
		t.Fatalf("hello of a listed tenant: %#v", m)
	}

	b := dial(t, n.Addr(), "token-b")
	other := llama()
	other.Tenant = "other"
	nsB, err := b.Open(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if b.ShmActive() || !b.RawActive() {
		t.Fatalf("tenant b: shm %v, raw %v; want the raw plane", b.ShmActive(), b.RawActive())
	}
	putWant(ctx, t, nsB, client.ChainPages(keys, data), client.Committed, "b's put")
	if _, err := b.Open(ctx, llama()); err == nil {
		t.Fatal("tenant b opened tenant a's namespace")
	}
}
