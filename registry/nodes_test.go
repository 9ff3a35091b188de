package registry

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func nodeIDs(t *testing.T, r *Registry) []string {
	t.Helper()
	nodes, err := r.Nodes(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

func TestRegisterListAndClose(t *testing.T) {
	t.Parallel()
	a := openShared(t)
	b := openShared(t)
	ctx := ctxFor(t, 10*time.Second)

	na := Node{ID: "node-a", GRPCAddress: "10.0.0.1:7070", AdminAddress: "127.0.0.1:7071", StartedUnixMs: 1700000000000,
		Version: "v0.1.0", Tiers: []TierInfo{{Kind: "host", Capacity: 1 << 30}, {Kind: "ssd", Capacity: 1 << 40, Used: 5}}}
	if err := a.RegisterNode(ctx, na); err != nil {
		t.Fatalf("RegisterNode a: %v", err)
	}
	if err := b.RegisterNode(ctx, Node{ID: "node-b", GRPCAddress: "10.0.0.2:7070"}); err != nil {
		t.Fatalf("RegisterNode b: %v", err)
	}
	nodes, err := b.Nodes(ctx)
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	if len(nodes) != 2 || nodes[0].ID != "node-a" || nodes[1].ID != "node-b" {
		t.Fatalf("Nodes = %+v, want node-a and node-b", nodes)
	}
	if got := nodes[0]; got.GRPCAddress != na.GRPCAddress || got.AdminAddress != na.AdminAddress ||
		got.StartedUnixMs != na.StartedUnixMs || got.Version != na.Version || !slices.Equal(got.Tiers, na.Tiers) {
		t.Fatalf("node-a = %+v, want %+v", got, na)
	}

	// Re-registering updates the record in place, on the same lease.
	na.Tiers[0].Used = 42
	if err := a.RegisterNode(ctx, na); err != nil {
		t.Fatalf("RegisterNode a again: %v", err)
	}
	nodes, err = b.Nodes(ctx)
	if err != nil || len(nodes) != 2 || nodes[0].Tiers[0].Used != 42 {
		t.Fatalf("after update Nodes = %+v, %v; want node-a host used 42", nodes, err)
	}

	// Close revokes the lease: the node is gone at once, not after the TTL.
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := nodeIDs(t, b); !slices.Equal(got, []string{"node-b"}) {
		t.Fatalf("after Close Nodes = %v, want [node-b]", got)
	}
	if err := a.RegisterNode(ctx, na); !errors.Is(err, ErrClosed) {
		t.Fatalf("RegisterNode after Close = %v, want ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRegisterNodeRejectsBadID(t *testing.T) {
	t.Parallel()
	r := openShared(t)
	for _, id := range []string{"", "a/b", "a b", "tab\t"} {
		if err := r.RegisterNode(ctxFor(t, time.Second), Node{ID: id}); !errors.Is(err, ErrInvalid) {
			t.Errorf("RegisterNode(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

// A registration whose owner stops keeping it alive (a crash, or a partition
// from etcd) expires after the lease TTL; when the owner reaches etcd again
// it re-registers by itself.
func TestRegistrationExpiresAndComesBack(t *testing.T) {
	t.Parallel()
	p := newProxy(t, sharedEtcd.Endpoints()[0])
	// Longer than the 2s of the other tests: under load a 2s lease can
	// expire between two keepalives (sent every TTL/3).
	const ttl = 3 * time.Second
	a := openShared(t, func(c *Config) {
		c.Endpoints = []string{p.endpoint()}
		c.LeaseTTL = ttl
	})
	observer := openShared(t)

	if err := a.RegisterNode(ctxFor(t, 5*time.Second), Node{ID: "node-a", GRPCAddress: "10.0.0.1:7070"}); err != nil {
		t.Fatalf("RegisterNode: %v", err)
	}
	if got := nodeIDs(t, observer); !slices.Equal(got, []string{"node-a"}) {
		t.Fatalf("Nodes = %v, want [node-a]", got)
	}

	p.cut()
	cut := time.Now()
	eventually(t, ttl+5*time.Second, "registration expiry", func() bool { return len(nodeIDs(t, observer)) == 0 })
	// The last keepalive was at most TTL/3 before the cut.
	if gone := time.Since(cut); gone < ttl/2 {
		t.Fatalf("registration vanished %v after the cut, before its TTL %v could run out", gone, ttl)
	}

	p.heal()
	eventually(t, 15*time.Second, "re-registration", func() bool {
		return slices.Equal(nodeIDs(t, observer), []string{"node-a"})
	})
	// And it is kept alive again, past a full TTL. (Waiting for nothing to
	// happen: only the clock says a real lease has outlived its TTL.)
	time.Sleep(ttl + time.Second)
	if got := nodeIDs(t, observer); !slices.Equal(got, []string{"node-a"}) {
		t.Fatalf("after re-registration and a TTL Nodes = %v, want [node-a]", got)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := nodeIDs(t, observer); len(got) != 0 {
		t.Fatalf("after Close Nodes = %v, want none", got)
	}
}
