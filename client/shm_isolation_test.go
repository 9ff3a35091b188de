//go:build linux

package client_test

import (
	"bytes"
	"testing"

	"github.com/stratakv/strata/client"
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
