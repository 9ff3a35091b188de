package client_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
)

// TestClusterPutDropsPastRefused: of three real nodes, two are full of
// leased pages, so they refuse every put (NO_SPACE). A sequence of three
// pages whose first and last pages the free node owns and whose middle
// page's placement candidates are the two full nodes: the middle page is
// stored nowhere, and the put deletes the last one again (an orphan from
// birth: its parent never was anywhere, so no parent-gone notice names
// it) and answers it Rejected.
func TestClusterPutDropsPastRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2)) // keys of the owners wanted: any will do
	nodes, c, ns := openSmallCluster(t, 3, 1<<20, llama())
	ctx := ctxT(t)
	full, free := []string{nodes[0].ID(), nodes[1].ID()}, nodes[2]
	perNode := 1 << 20 / ns.PageBytes()
	for _, id := range full {
		// A sequence owned by the node, longer than it holds, its stored
		// prefix leased: the node can evict nothing.
		keys := keysOwnedBy(c, id, perNode+perNode/4, r)
		if _, err := ns.Put(ctx, client.ChainPages(keys, keyData(ns, keys))); err != nil {
			t.Fatal(err)
		}
		lr, err := ns.Lookup(ctx, keys, true, time.Minute)
		if err != nil || lr.HitPrefix < perNode/2 {
			t.Fatalf("node %s: leased a prefix of %d pages (%v), want at least %d", id, lr.HitPrefix, err, perNode/2)
		}
	}
	first, last := keysOwnedBy(c, free.ID(), 1, r)[0], keysOwnedBy(c, free.ID(), 1, r)[0]
	var middle namespace.Key
	for {
		middle = keysOwnedBy(c, full[r.IntN(2)], 1, r)[0]
		if cand := c.Candidates(middle, 2); len(cand) == 2 && slices.Contains(full, cand[1]) {
			break
		}
	}
	keys := []namespace.Key{first, middle, last}
	before := nodePages(t, free.Addr())
	res, err := ns.Put(ctx, client.ChainPages(keys, keyData(ns, keys)))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != client.Committed || res[1].Status != client.Rejected {
		t.Fatalf("put: %+v; want the first page committed and the middle one rejected by both full nodes", res)
	}
	if res[2].Status != client.Rejected {
		t.Errorf("last page, past a page stored nowhere: %+v, want Rejected", res[2])
	}
	if got := nodePages(t, free.Addr()) - before; got != 1 {
		t.Errorf("the free node holds %d more pages after the put, want 1 (the first page only)", got)
	}
	lr, err := ns.Lookup(ctx, keys[2:], false, 0)
	if err != nil || lr.HitPrefix != 0 {
		t.Errorf("lookup of the last page alone: hit prefix %d (%v), want 0", lr.HitPrefix, err)
	}
}

// keyData is each key's page bytes (pageData).
func keyData(ns *client.Namespace, keys []namespace.Key) [][]byte {
	data := make([][]byte, len(keys))
	for i, k := range keys {
		data[i] = pageData(k, ns.PageBytes())
	}
	return data
}
