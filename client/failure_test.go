package client_test

import (
	"testing"
	"time"

	"github.com/stratakv/strata/client"
)

// TestEveryOwnerDownIsAMiss: when every node a call's keys live on fails
// (here: the one node of the cluster is gone), lookups, gets and puts
// answer misses (nothing found, nothing stored) within NodeTimeout, never
// an error, and the client counts the calls (AllFailed).
func TestEveryOwnerDownIsAMiss(t *testing.T) {
	n := addNodeWith(t, nil, nil)
	const nodeTimeout = 300 * time.Millisecond
	const slack = 700 * time.Millisecond
	c := dialWith(t, n.Addr(), client.Options{NodeTimeout: nodeTimeout, NoShm: true}) // the raw and gRPC planes
	ns := open(t, c)
	keys := ns.PageKeys(tokens(16*8, 1))
	putAll(t, ns, keys)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for round := range 2 { // the first meets the failure, the second the quarantine
		var err error
		var lr client.LookupResult
		within(t, nodeTimeout+slack, "lookup", func() { lr, err = ns.Lookup(ctx, keys, true, 0) })
		if err != nil || lr.HitPrefix != 0 || lr.Lease != nil {
			t.Fatalf("round %d: lookup with its node down: hit prefix %d, lease %v, err %v; want a miss", round, lr.HitPrefix, lr.Lease, err)
		}
		bufs := pageBufs(ns, len(keys))
		var found []bool
		within(t, nodeTimeout+slack, "get", func() { found, err = ns.Get(ctx, keys, bufs, nil) })
		if err != nil {
			t.Fatalf("round %d: get with its node down: %v; want misses", round, err)
		}
		for i, f := range found {
			if f {
				t.Fatalf("round %d: page %d found with its node down", round, i)
			}
		}
		var res []client.PutResult
		within(t, nodeTimeout+slack, "put", func() { res, err = ns.Put(ctx, client.ChainPages(keys, pagesFor(ns, keys))) })
		if err != nil {
			t.Fatalf("round %d: put with its node down: %v; want pages not stored", round, err)
		}
		for i, r := range res {
			if r.Status.Stored() {
				t.Fatalf("round %d: page %d stored with its node down: %v", round, i, r.Status)
			}
		}
	}
	if got := c.AllFailed(); got < 3 {
		t.Fatalf("AllFailed %d after lookups, gets and puts with every node down, want at least 3", got)
	}
	t.Logf("calls with every node down, answered as misses: %d", c.AllFailed())
}
