package admin_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/internal/testing/admintest"
	"github.com/stratakv/strata/internal/testing/leaktest"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// start starts admintest.ThreeNodes.
func start(t *testing.T) *admintest.ThreeNodes {
	t.Helper()
	return admintest.StartThreeNodes(t, node.Config{HostBytes: 64 << 20})
}

// dial dials the cluster through addrs; it closes when the test ends.
func dial(t *testing.T, addrs ...string) *admin.Cluster {
	t.Helper()
	c, err := admin.Dial(t.Context(), addrs, admin.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("dialing %v: %v", addrs, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ids is the node IDs of ns.
func ids(ns []*admintest.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID())
	}
	return out
}

// TestCluster asks c, which holds nothing, about the whole cluster: every
// answer is the sum or the merge of a's and b's.
func TestCluster(t *testing.T) {
	f := start(t)
	c := dial(t, testnode.ClosedAddr(t), f.C.Addr)
	if c.NodeID() != f.C.ID() || !c.Multi() || len(c.Members()) != 3 {
		t.Fatalf("dialled %s, %d members; want %s of 3", c.NodeID(), len(c.Members()), f.C.ID())
	}
	ctx := t.Context()

	nodes := c.Nodes(ctx)
	var pages []uint64
	for _, r := range nodes {
		if r.Err != nil || r.Info == nil {
			t.Fatalf("node %s: %v", r.GetNodeId(), r.Err)
		}
		pages = append(pages, r.Info.GetPages())
	}
	if got := []string{nodes[0].GetNodeId(), nodes[1].GetNodeId(), nodes[2].GetNodeId()}; !slices.Equal(got, ids(f.Nodes)) ||
		!slices.Equal(pages, []uint64{3, 3, 0}) {
		t.Errorf("nodes %q with %v pages; want %q with 3, 3, 0", got, pages, ids(f.Nodes))
	}
	s := c.Status(ctx)
	if s.Members != (admin.MemberCounts{Total: 3, Alive: 3, Answered: 3}) || s.Asked.GetNodeId() != f.C.ID() ||
		len(s.Tiers) != 1 || s.Tiers[0].GetTier() != pb.Tier_TIER_HOST || s.Tiers[0].GetCapacityBytes() != 3*64<<20 ||
		s.Tiers[0].GetUsedBytes() != 6*f.PageBytes || s.TierNodes[pb.Tier_TIER_HOST] != 3 {
		t.Errorf("status: %+v, tiers %v", s.Members, s.Tiers)
	}

	nss, failed, err := c.Namespaces(ctx, "")
	if err != nil || len(failed) != 0 || len(nss) != 1 {
		t.Fatalf("namespaces: %v, failed %v, %d", err, failed, len(nss))
	}
	if n := nss[0]; !bytes.Equal(n.Info.GetId(), f.NS) || n.Info.GetPages() != 6 || n.Info.GetBytes() != 6*f.PageBytes ||
		n.Info.GetLeasesActive() != 1 || !slices.Equal(n.Holders(), ids(f.Nodes[:2])) {
		t.Errorf("namespace summed: %v, holders %q", n.Info, n.Holders())
	}
	if nss, _, err := c.Namespaces(ctx, "beta"); err != nil || len(nss) != 0 {
		t.Errorf("beta's namespaces: %v, %d", err, len(nss))
	}

	ns, failed, err := c.Namespace(ctx, hex.EncodeToString(f.NS)[:6])
	if err != nil || len(failed) != 0 || !bytes.Equal(ns.ID, f.NS) || len(ns.Members()) != 2 || ns.Total.Info.GetPages() != 6 {
		t.Fatalf("namespace: %v, failed %v, %+v", err, failed, ns)
	}

	// Keys: a's first page is held by both, so it comes twice, together.
	rows, next, failed, err := c.Keys(ctx, ns, nil, 0)
	if err != nil || len(failed) != 0 || len(rows) != 6 || next != nil {
		t.Fatalf("keys: %v, failed %v, %d rows, next %x", err, failed, len(rows), next)
	}
	if !slices.IsSortedFunc(rows, func(x, y admin.KeyRow) int { return bytes.Compare(x.Info.GetKey(), y.Info.GetKey()) }) {
		t.Errorf("keys out of order")
	}
	copies := 0
	for _, r := range rows {
		if bytes.Equal(r.Info.GetKey(), f.ChainA[0].Key) {
			copies++
		}
	}
	if copies != 2 {
		t.Errorf("a's first page listed %d times, want 2", copies)
	}
	rows, next, _, err = c.Keys(ctx, ns, nil, 1)
	if err != nil || len(rows) == 0 || !bytes.Equal(next, rows[len(rows)-1].Info.GetKey()) {
		t.Errorf("keys --limit 1: %v, %d rows, next %x", err, len(rows), next)
	}

	missing := make([]byte, 32)
	stats, _, err := c.StatKeys(ctx, ns, [][]byte{f.ChainA[0].Key, f.ChainB[1].Key, missing})
	if err != nil || len(stats) != 3 || len(stats[0].Copies) != 2 || len(stats[1].Copies) != 1 ||
		stats[1].Copies[0].Node != f.B.ID() || len(stats[2].Copies) != 0 {
		t.Errorf("stat keys: %v, %+v", err, stats)
	}

	leases, total, _, err := c.Leases(ctx, "", 0)
	if err != nil || total != 1 || len(leases) != 1 || leases[0].Node != f.A.ID() || leases[0].Info.GetPages() != 3 {
		t.Errorf("leases: %v, total %d, %v", err, total, leases)
	}

	ttl, err := c.SetTTL(ctx, ns, time.Hour)
	if err != nil || len(ttl) != 2 || ttl[0].Val.GetNamespace().GetTtlMs() != uint64(time.Hour.Milliseconds()) {
		t.Errorf("set ttl: %v, %v", err, ttl)
	}
	del, err := c.DeleteKeys(ctx, ns, [][]byte{f.ChainA[0].Key})
	if err != nil || len(del) != 2 || del[0].Val.GetDeleted() != 1 || del[1].Val.GetDeleted() != 1 {
		t.Errorf("delete keys: %v, %v", err, del)
	}

	d, err := c.Drop(ctx, ns, true)
	if err != nil || !d.Unregistered || d.CannotUnregister != nil || len(d.Nodes) != 3 {
		t.Fatalf("drop: %v, %+v", err, d)
	}
	var dropped []uint64
	for _, r := range d.Nodes {
		dropped = append(dropped, r.Val.GetPagesDropped())
	}
	if !slices.Equal(dropped, []uint64{2, 2, 0}) {
		t.Errorf("pages dropped per node %v, want 2, 2, 0", dropped)
	}
	if _, _, err := c.Namespace(ctx, hex.EncodeToString(f.NS)); !errors.As(err, new(*admin.NotFoundError)) {
		t.Errorf("namespace after drop: %v, want not found", err)
	}
}

// TestDialEndpoints: an endpoint that does not answer makes Dial try the
// next; none answering is an EndpointsError naming each; a refusal ends
// the search.
func TestDialEndpoints(t *testing.T) {
	closed, closed2 := testnode.ClosedAddr(t), testnode.ClosedAddr(t)
	_, err := admin.Dial(t.Context(), []string{closed, closed2}, admin.Options{})
	ee, ok := errors.AsType[*admin.EndpointsError](err)
	if !ok || len(ee.Tried) != 2 || ee.Tried[0].Addr != closed || !admin.Unreachable(ee.Tried[1]) {
		t.Fatalf("no endpoint answers: %v", err)
	}
	_, err = admin.Dial(t.Context(), []string{closed}, admin.Options{})
	if ne, ok := errors.AsType[*admin.NodeError](err); !ok || ne.Addr != closed || !admin.Unreachable(err) {
		t.Errorf("one endpoint that does not answer: %v", err)
	}

	locked := admintest.StartOne(t, map[string]string{"acme-token": "acme"})
	open := admintest.StartOne(t, nil)
	_, err = admin.Dial(t.Context(), []string{closed, locked.Addr, open.Addr}, admin.Options{})
	if ne, ok := errors.AsType[*admin.NodeError](err); !ok || ne.Addr != locked.Addr || admin.Unreachable(err) {
		t.Errorf("a node refusing the token: %v, want its error", err)
	}
	c := dial(t, open.Addr)
	if c.Multi() || c.NodeID() != open.ID() {
		t.Errorf("a node alone: %s, multi %v", c.NodeID(), c.Multi())
	}
	tok, err := admin.Dial(t.Context(), []string{locked.Addr}, admin.Options{Token: "acme-token"})
	if err != nil {
		t.Fatalf("dialing with the token: %v", err)
	}
	defer tok.Close()
	if _, _, err := tok.Namespaces(t.Context(), ""); err != nil {
		t.Errorf("namespaces with the token: %v", err)
	}
}

// TestUnreachableMember adds a member that gossips but whose gRPC address
// answers nothing: a listing leaves it out and says so; a change fails
// with what the others did.
func TestUnreachableMember(t *testing.T) {
	f := start(t)
	_, deadAddr := testnode.StartGhost(t, f.A.GossipAddress())
	f.A.AwaitMembers(t, map[string]string{f.A.ID(): "alive", f.B.ID(): "alive", f.C.ID(): "alive", "node-ghost": "alive"})

	c := dial(t, f.A.Addr)
	nss, failed, err := c.Namespaces(t.Context(), "")
	if err != nil || len(nss) != 1 || len(failed) != 1 || failed[0].NodeID != "node-ghost" || failed[0].Addr != deadAddr ||
		!admin.Unreachable(failed[0]) {
		t.Errorf("namespaces: %v, %d, failed %v", err, len(nss), failed)
	}
	if r := c.Nodes(t.Context())[3]; r.GetNodeId() != "node-ghost" || r.Info != nil || r.Err == nil {
		t.Errorf("the ghost's report: %+v", r)
	}
	ns, _, err := c.Namespace(t.Context(), hex.EncodeToString(f.NS))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Drop(t.Context(), ns, false)
	fe, ok := errors.AsType[*admin.FanoutError](err)
	if !ok || fe.Asked != 4 || len(fe.Failed) != 1 || fe.Failed[0].NodeID != "node-ghost" || len(d.Nodes) != 4 ||
		d.Nodes[0].Val.GetPagesDropped() != 3 {
		t.Errorf("drop with the ghost: %v, %+v", err, d)
	}
}

// TestAmbiguousPrefix: a prefix two namespaces on two nodes share names
// neither; one no node knows is not found.
func TestAmbiguousPrefix(t *testing.T) {
	f := start(t)
	// A tenant whose llama's ID starts with the digit acme's does; IDs
	// are hashes of the descriptor, so the search is the same every run.
	digit := hex.EncodeToString(f.NS)[:1]
	var other *pb.Descriptor
	for i := 0; other == nil; i++ {
		d := admintest.Descriptor("t" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		if id := pbconv.Descriptor(d).ID(); id.String()[:1] == digit {
			other = d
		}
	}
	f.C.Open(t, other)
	c := dial(t, f.A.Addr)
	_, _, err := c.Namespace(t.Context(), digit)
	ae, ok := errors.AsType[*admin.AmbiguousError](err)
	if !ok || ae.Prefix != digit {
		t.Fatalf("prefix %s: %v, want ambiguous", digit, err)
	}
	var none string
	for _, d := range "0123456789abcdef" {
		if !slices.ContainsFunc([]namespace.ID{namespace.ID(f.NS), pbconv.Descriptor(other).ID()},
			func(id namespace.ID) bool { return id.String()[:1] == string(d) }) {
			none = string(d)
			break
		}
	}
	_, _, err = c.Namespace(t.Context(), none)
	if nf, ok := errors.AsType[*admin.NotFoundError](err); !ok || nf.Asked != 3 || len(nf.Answered) != 3 {
		t.Errorf("prefix %s: %v, want not found on 3 nodes", none, err)
	}
}

// TestKeysByPrefix: each prefix finds the first keys in key order that
// start with it over every member that knows the namespace, a key two
// nodes hold once; a prefix no key has finds none. Besides the fixture's
// chains, C holds root pages whose keys share prefixes (the lowest and
// highest keys of all among them), and A a copy of one of them.
func TestKeysByPrefix(t *testing.T) {
	f := start(t)
	f.C.Open(t, admintest.Descriptor("acme"))
	var crafted []admintest.Page
	for _, h := range []string{strings.Repeat("00", 32), "ab12" + strings.Repeat("00", 30), "ab12" + strings.Repeat("ff", 30),
		"ab1f" + strings.Repeat("00", 30), strings.Repeat("ff", 32)} {
		key, _ := hex.DecodeString(h)
		crafted = append(crafted, admintest.Page{Key: key, Data: bytes.Repeat([]byte{7}, int(f.PageBytes))})
	}
	f.C.Put(t, f.NS, crafted)
	f.A.Put(t, f.NS, crafted[1:2])
	all := slices.Concat(f.ChainA, f.ChainB, crafted)
	c := dial(t, f.A.Addr)
	ns, _, err := c.Namespace(t.Context(), hex.EncodeToString(f.NS))
	if err != nil || len(ns.Members()) != 3 {
		t.Fatalf("namespace: %v, %+v", err, ns)
	}

	// want is the first max distinct keys of all in key order with prefix.
	want := func(prefix string, max int) [][]byte {
		var keys [][]byte
		for _, p := range all {
			if strings.HasPrefix(hex.EncodeToString(p.Key), prefix) && !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, p.Key) }) {
				keys = append(keys, p.Key)
			}
		}
		slices.SortFunc(keys, bytes.Compare)
		return keys[:min(len(keys), max)]
	}
	cases := []struct {
		prefix string
		max    int
		n      int // how many keys it finds, to show the cases are not all empty
	}{
		{"ab12", 5, 2}, {"ab12", 1, 1}, {"ab1", 5, 3}, {"ab1", 2, 2}, {"ab10", 5, 0},
		{"0000", 5, 1}, {strings.Repeat("0", 64), 1, 1}, {"ffff", 5, 1}, {hex.EncodeToString(crafted[2].Key), 2, 1},
		{hex.EncodeToString(crafted[1].Key)[:16], 2, 1}, // on A and C
		{hex.EncodeToString(f.ChainA[0].Key)[:16], 2, 1}, {hex.EncodeToString(f.ChainB[1].Key)[:16], 2, 1},
	}
	for _, tc := range cases {
		got, failed, err := c.KeysByPrefix(t.Context(), ns, []string{tc.prefix}, tc.max)
		if err != nil || len(failed) != 0 || len(got) != 1 {
			t.Fatalf("prefix %s: %v, failed %v, %d answers", tc.prefix, err, failed, len(got))
		}
		if w := want(tc.prefix, tc.max); !slices.EqualFunc(got[0], w, bytes.Equal) || len(w) != tc.n {
			t.Errorf("prefix %s, max %d: %x, want %x (%d keys)", tc.prefix, tc.max, got[0], w, tc.n)
		}
	}
	// Several prefixes in one call answer in order.
	got, _, err := c.KeysByPrefix(t.Context(), ns, []string{"ab1", "ab10", "ffff"}, 3)
	if err != nil || len(got) != 3 || len(got[0]) != 3 || len(got[1]) != 0 || !bytes.Equal(got[2][0], crafted[4].Key) {
		t.Errorf("three prefixes: %v, %x", err, got)
	}
	for _, bad := range []string{"", "AB", "xyz", strings.Repeat("0", 65)} {
		if _, _, err := c.KeysByPrefix(t.Context(), ns, []string{bad}, 1); err == nil {
			t.Errorf("prefix %q: no error", bad)
		}
	}
}

// TestNoLeak: a cluster's connections and calls leave no goroutine behind
// once it is closed.
func TestNoLeak(t *testing.T) {
	n := admintest.StartOne(t, nil)
	n.Open(t, admintest.Descriptor("acme"))
	leaktest.Twice(t, func() {
		c, err := admin.Dial(t.Context(), []string{n.Addr}, admin.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Namespaces(t.Context(), ""); err != nil {
			t.Error(err)
		}
		c.Nodes(t.Context())
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
}
