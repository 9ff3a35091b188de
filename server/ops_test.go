package server_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
)

// The operator RPCs (DropNamespace, SetNamespaceTTL, ListLeases) over real
// gRPC on loopback: against a whole node with tenant tokens, and against a
// server whose registry is a fake, to see what unregistering asks of it.

// opsDescriptor is tenant's small model: 16 KiB pages.
func opsDescriptor(tenant string) *pb.Descriptor {
	return &pb.Descriptor{Tenant: tenant, Model: "m", ModelRevision: "r1", Engine: "vllm", Dtype: "bf16",
		PageTokens: 16, NumLayers: 2, NumKvHeads: 2, HeadDim: 64}
}

// opsConn is a connection to a server's Strata and Admin services.
type opsConn struct {
	rpc   pb.StrataClient
	admin pb.AdminClient
}

func dialOps(t *testing.T, addr string) opsConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return opsConn{rpc: pb.NewStrataClient(cc), admin: pb.NewAdminClient(cc)}
}

// as is a context carrying token, or none for "".
func as(t *testing.T, token string) context.Context {
	ctx := ctxT(t)
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func (c opsConn) open(t *testing.T, ctx context.Context, d *pb.Descriptor) ([]byte, int) {
	t.Helper()
	resp, err := c.rpc.OpenNamespace(ctx, &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1, Descriptor_: d})
	if err != nil {
		t.Fatalf("opening %s's namespace: %v", d.GetTenant(), err)
	}
	return resp.GetNamespaceId(), int(resp.GetPageBytes())
}

// put publishes one page per key with the one-call Put.
func (c opsConn) put(t *testing.T, ctx context.Context, ns []byte, size int, keys ...[]byte) {
	t.Helper()
	stream, err := c.rpc.Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		data := slices.Repeat([]byte{byte(i + 1)}, size)
		msg := &pb.PutRequest{Header: &pb.PutHeader{Checksum: crc(data), Page: &pb.PageSpec{Key: k, Size: uint64(size)}}}
		if i == 0 {
			msg.NamespaceId = ns
		}
		if err := stream.Send(msg); err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&pb.PutRequest{Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	for i, r := range resp.GetResults() {
		if r.GetStatus() != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
			t.Fatalf("put page %d: %v", i, r.GetStatus())
		}
	}
}

// pages is how many pages the namespace has on the node, as ListNamespaces
// tells the admin; -1 when the node does not know it.
func (c opsConn) pages(t *testing.T, ns []byte) int {
	t.Helper()
	resp, err := c.admin.ListNamespaces(as(t, "admin-token"), &pb.ListNamespacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range resp.GetNamespaces() {
		if string(n.GetId()) == string(ns) {
			return int(n.GetPages())
		}
	}
	return -1
}

var opsTokens = map[string]string{"acme-token": "acme", "beta-token": "beta"}

// startOpsNode starts a node with acme's and beta's tokens and an admin
// token, each tenant with a namespace of three pages, one leased.
func startOpsNode(t *testing.T) (c opsConn, acme, beta []byte) {
	t.Helper()
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, TenantTokens: opsTokens, AdminToken: "admin-token"})
	c = dialOps(t, n.Addr())
	for _, tenant := range []string{"acme", "beta"} {
		ctx := as(t, tenant+"-token")
		id, size := c.open(t, ctx, opsDescriptor(tenant))
		c.put(t, ctx, id, size, key(1), key(2), key(3))
		if _, err := c.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: id, Keys: [][]byte{key(1)}, Lease: true}); err != nil {
			t.Fatal(err)
		}
		if tenant == "acme" {
			acme = id
		} else {
			beta = id
		}
	}
	return c, acme, beta
}

func TestOpsTenants(t *testing.T) {
	c, acme, beta := startOpsNode(t)
	asAcme := func() context.Context { return as(t, "acme-token") }

	// acme may not touch beta's namespace, in any way.
	_, err := c.admin.DropNamespace(asAcme(), &pb.DropNamespaceRequest{NamespaceId: beta})
	wantErr(t, "acme drops beta's namespace", err, codes.PermissionDenied, pb.ReasonTenantDenied)
	_, err = c.admin.DropNamespace(asAcme(), &pb.DropNamespaceRequest{NamespaceId: beta, Unregister: true})
	wantErr(t, "acme unregisters beta's namespace", err, codes.PermissionDenied, pb.ReasonTenantDenied)
	_, err = c.admin.SetNamespaceTTL(asAcme(), &pb.SetNamespaceTTLRequest{NamespaceId: beta, TtlMs: 1})
	wantErr(t, "acme sets beta's TTL", err, codes.PermissionDenied, pb.ReasonTenantDenied)
	_, err = c.admin.DropNamespace(as(t, ""), &pb.DropNamespaceRequest{NamespaceId: beta})
	wantErr(t, "no token", err, codes.Unauthenticated, pb.ReasonUnauthenticated)
	_, err = c.admin.ListLeases(as(t, "wrong"), &pb.ListLeasesRequest{})
	wantErr(t, "a wrong token lists leases", err, codes.Unauthenticated, pb.ReasonUnauthenticated)
	if got := c.pages(t, beta); got != 3 {
		t.Fatalf("beta's namespace has %d pages after acme's attempts, want 3", got)
	}

	// Each tenant sees its own lease; the admin sees both, or one tenant's.
	for _, l := range []struct {
		token, tenant string
		want          []string
	}{
		{"acme-token", "", []string{"acme"}},
		{"beta-token", "", []string{"beta"}},
		{"acme-token", "beta", nil},
		{"admin-token", "", []string{"acme", "beta"}},
		{"admin-token", "beta", []string{"beta"}},
	} {
		resp, err := c.admin.ListLeases(as(t, l.token), &pb.ListLeasesRequest{Tenant: l.tenant})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, li := range resp.GetLeases() {
			got = append(got, li.GetTenant())
			want := acme
			if li.GetTenant() == "beta" {
				want = beta
			}
			if string(li.GetNamespaceId()) != string(want) || li.GetPages() != 1 || li.GetLeaseId() == 0 ||
				time.UnixMilli(li.GetExpiresUnixMs()).Before(time.Now()) {
				t.Errorf("lease %+v", li)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, l.want) || resp.GetTotal() != uint64(len(l.want)) || resp.GetNodeId() == "" {
			t.Errorf("%s lists leases of %q: %q (total %d), want %q", l.token, l.tenant, got, resp.GetTotal(), l.want)
		}
	}
	resp, err := c.admin.ListLeases(as(t, "admin-token"), &pb.ListLeasesRequest{Limit: 1})
	if err != nil || len(resp.GetLeases()) != 1 || resp.GetTotal() != 2 {
		t.Errorf("ListLeases with limit 1: %v, %d leases, total %d", err, len(resp.GetLeases()), resp.GetTotal())
	}

	// acme drops its own namespace: the pages go, beta's stay.
	drop, err := c.admin.DropNamespace(asAcme(), &pb.DropNamespaceRequest{NamespaceId: acme})
	if err != nil {
		t.Fatalf("acme drops its namespace: %v", err)
	}
	if !drop.GetKnown() || drop.GetPagesDropped() != 3 || drop.GetUnregistered() || drop.GetNodeId() == "" {
		t.Errorf("drop: %+v", drop)
	}
	if got := c.pages(t, acme); got != -1 {
		t.Errorf("acme's namespace after the drop: %d pages, want it gone", got)
	}
	if got := c.pages(t, beta); got != 3 {
		t.Errorf("beta's namespace after acme's drop: %d pages, want 3", got)
	}
	// Still registered: a request brings it back, empty.
	look, err := c.rpc.Lookup(asAcme(), &pb.LookupRequest{NamespaceId: acme, Keys: [][]byte{key(1)}})
	if err != nil || look.GetHitPrefix() != 0 {
		t.Errorf("lookup after the drop: %v, hit prefix %d; want an empty namespace", err, look.GetHitPrefix())
	}

	// The admin unregisters beta's namespace and drops it, twice: the
	// second finds nothing registered, which is no error.
	for i := range 2 {
		drop, err := c.admin.DropNamespace(as(t, "admin-token"), &pb.DropNamespaceRequest{NamespaceId: beta, Unregister: true})
		if err != nil || drop.GetKnown() != (i == 0) || !drop.GetUnregistered() {
			t.Fatalf("unregistering beta's namespace, time %d: %v, %+v", i+1, err, drop)
		}
	}
	_, err = c.rpc.Lookup(as(t, "beta-token"), &pb.LookupRequest{NamespaceId: beta, Keys: [][]byte{key(1)}})
	wantErr(t, "lookup in an unregistered namespace", err, codes.NotFound, pb.ReasonNamespaceNotFound)

	// Malformed and unknown namespaces.
	_, err = c.admin.DropNamespace(asAcme(), &pb.DropNamespaceRequest{NamespaceId: []byte{1, 2, 3}})
	wantErr(t, "a short id", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
	_, err = c.admin.DropNamespace(as(t, "admin-token"), &pb.DropNamespaceRequest{NamespaceId: key(9)})
	wantErr(t, "an unknown namespace", err, codes.NotFound, pb.ReasonNamespaceNotFound)
	_, err = c.admin.SetNamespaceTTL(as(t, "admin-token"), &pb.SetNamespaceTTLRequest{NamespaceId: acme, TtlMs: 1 << 62})
	wantErr(t, "a TTL past time.Duration", err, codes.InvalidArgument, pb.ReasonInvalidArgument)
}

// TestSetNamespaceTTL: the node removes idle pages past the TTL, but not a
// leased one.
func TestSetNamespaceTTL(t *testing.T) {
	c, acme, _ := startOpsNode(t)
	ctx := as(t, "acme-token")
	resp, err := c.admin.SetNamespaceTTL(ctx, &pb.SetNamespaceTTLRequest{NamespaceId: acme, TtlMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPreviousTtlMs() != 0 || resp.GetNamespace().GetTtlMs() != 1 || resp.GetNamespace().GetPages() > 3 ||
		string(resp.GetNamespace().GetId()) != string(acme) || resp.GetNodeId() == "" {
		t.Errorf("SetNamespaceTTL: %+v", resp)
	}
	// The janitor sweeps every second or so; the leased page stays.
	if !poll.Within(10*time.Second, 50*time.Millisecond, func() bool { return c.pages(t, acme) == 1 }) {
		t.Fatalf("after 10s the namespace has %d pages, want the leased one only", c.pages(t, acme))
	}
	look, err := c.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: acme, Keys: [][]byte{key(1), key(2)}})
	if err != nil || !slices.Equal(look.GetPresent(), []bool{true, false}) {
		t.Errorf("lookup after the TTL: %v, present %v; want the leased page only", err, look.GetPresent())
	}
	resp, err = c.admin.SetNamespaceTTL(ctx, &pb.SetNamespaceTTLRequest{NamespaceId: acme})
	if err != nil || resp.GetPreviousTtlMs() != 1 || resp.GetNamespace().GetTtlMs() != 0 ||
		resp.GetNamespace().GetExpiredPages() != 2 {
		t.Errorf("clearing the TTL: %v, %+v", err, resp)
	}
}

// fakeRegistry is a registry in memory. With deletes false it lacks
// DeleteNamespace, as a registry that cannot unregister.
type fakeRegistry struct {
	mu      sync.Mutex
	records map[namespace.ID]namespace.Descriptor // guarded by mu
	deleted []namespace.ID                        // guarded by mu
}

func (r *fakeRegistry) RegisterNamespace(_ context.Context, d namespace.Descriptor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records[d.ID()] = d
	return nil
}

func (r *fakeRegistry) Lookup(_ context.Context, id namespace.ID) (namespace.Descriptor, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.records[id]
	if !ok {
		return namespace.Descriptor{}, errors.New("not registered")
	}
	return d, nil
}

func (r *fakeRegistry) Health(context.Context) error { return nil }
func (r *fakeRegistry) Endpoints() []string          { return []string{"fake"} }

func (r *fakeRegistry) registered(id namespace.ID) bool {
	_, err := r.Lookup(context.Background(), id)
	return err == nil
}

// deletingRegistry is a fakeRegistry that can delete registrations.
type deletingRegistry struct{ *fakeRegistry }

// DeleteNamespace fails for an ID that is not registered, as etcd's
// registry does.
func (r deletingRegistry) DeleteNamespace(_ context.Context, id namespace.ID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.records[id]; !ok {
		return errors.New("not found")
	}
	delete(r.records, id)
	r.deleted = append(r.deleted, id)
	return nil
}

// startServer serves a server over a host tier on loopback, with reg as
// its registry and the tenants' and admin's tokens.
func startServer(t *testing.T, reg server.Registry) opsConn {
	t.Helper()
	st := hostStore(t, 16<<20, store.Config{})
	hashes := map[string]string{}
	for tok, tenant := range opsTokens {
		hashes[server.HashToken(tok)] = tenant
	}
	srv, err := server.New(server.Config{NodeID: "node-ops", Store: st, Registry: reg, Tokens: hashes,
		AdminTokenHash: server.HashToken("admin-token")})
	if err != nil {
		t.Fatal(err)
	}
	return dialOps(t, serveLoopback(t, srv))
}

func TestDropNamespaceUnregisters(t *testing.T) {
	reg := deletingRegistry{&fakeRegistry{records: map[namespace.ID]namespace.Descriptor{}}}
	c := startServer(t, reg)
	asAcme := as(t, "acme-token")
	raw, size := c.open(t, asAcme, opsDescriptor("acme"))
	c.put(t, asAcme, raw, size, key(1), key(2))
	id, _ := namespace.IDFromBytes(raw)
	// beta's namespace is registered (by another node) but not here.
	betaD := pbconv.Descriptor(opsDescriptor("beta")).Normalize()
	reg.RegisterNamespace(t.Context(), betaD)
	beta := betaD.ID()

	drop, err := c.admin.DropNamespace(asAcme, &pb.DropNamespaceRequest{NamespaceId: raw, Unregister: true})
	if err != nil {
		t.Fatal(err)
	}
	if !drop.GetKnown() || drop.GetPagesDropped() != 2 || !drop.GetUnregistered() || drop.GetNodeId() != "node-ops" {
		t.Errorf("drop: %+v", drop)
	}
	if reg.registered(id) || !slices.Equal(reg.deleted, []namespace.ID{id}) {
		t.Errorf("registry after the drop: deleted %v", reg.deleted)
	}
	// Unregistered: a request no longer brings the namespace back.
	_, err = c.rpc.Lookup(asAcme, &pb.LookupRequest{NamespaceId: raw, Keys: [][]byte{key(1)}})
	wantErr(t, "lookup in the unregistered namespace", err, codes.NotFound, pb.ReasonNamespaceNotFound)

	// A namespace this node does not hold: its tenant comes from the
	// registry, and acme may not unregister beta's.
	_, err = c.admin.DropNamespace(asAcme, &pb.DropNamespaceRequest{NamespaceId: beta[:], Unregister: true})
	wantErr(t, "acme unregisters beta's namespace", err, codes.PermissionDenied, pb.ReasonTenantDenied)
	_, err = c.admin.DropNamespace(as(t, "beta-token"), &pb.DropNamespaceRequest{NamespaceId: beta[:]})
	wantErr(t, "dropping a namespace the node does not hold", err, codes.NotFound, pb.ReasonNamespaceNotFound)
	if !reg.registered(beta) {
		t.Fatal("beta's namespace was unregistered by acme")
	}
	drop, err = c.admin.DropNamespace(as(t, "beta-token"), &pb.DropNamespaceRequest{NamespaceId: beta[:], Unregister: true})
	if err != nil || drop.GetKnown() || drop.GetPagesDropped() != 0 || !drop.GetUnregistered() || reg.registered(beta) {
		t.Errorf("beta unregisters its namespace: %v, %+v", err, drop)
	}
	// Again, as ns rm run a second time does: nothing is registered, and
	// that is no error.
	drop, err = c.admin.DropNamespace(as(t, "admin-token"), &pb.DropNamespaceRequest{NamespaceId: raw, Unregister: true})
	if err != nil || drop.GetKnown() || !drop.GetUnregistered() || len(reg.deleted) != 2 {
		t.Errorf("unregistering an unregistered namespace: %v, %+v", err, drop)
	}
}

// TestDropNamespaceCannotUnregister: a registry without DeleteNamespace
// cannot unregister, and then nothing is dropped.
func TestDropNamespaceCannotUnregister(t *testing.T) {
	reg := &fakeRegistry{records: map[namespace.ID]namespace.Descriptor{}}
	c := startServer(t, reg)
	ctx := as(t, "admin-token")
	raw, size := c.open(t, ctx, opsDescriptor("acme"))
	c.put(t, ctx, raw, size, key(1))
	_, err := c.admin.DropNamespace(ctx, &pb.DropNamespaceRequest{NamespaceId: raw, Unregister: true})
	wantErr(t, "unregistering without DeleteNamespace", err, codes.Unimplemented, "")
	if got := c.pages(t, raw); got != 1 {
		t.Errorf("after the refused unregister the namespace has %d pages, want 1", got)
	}
	drop, err := c.admin.DropNamespace(ctx, &pb.DropNamespaceRequest{NamespaceId: raw})
	if err != nil || drop.GetPagesDropped() != 1 || drop.GetUnregistered() {
		t.Errorf("drop without unregister: %v, %+v", err, drop)
	}
}

// countingRegistry counts lookups.
type countingRegistry struct {
	*fakeRegistry
	lookups atomic.Int32
}

func (r *countingRegistry) Lookup(ctx context.Context, id namespace.ID) (namespace.Descriptor, error) {
	r.lookups.Add(1)
	return r.fakeRegistry.Lookup(ctx, id)
}

// Requests naming a namespace the registry lacks ask it once a second at
// most; one registered meanwhile is served after that second.
func TestUnknownNamespaceAsksRegistryOnce(t *testing.T) {
	reg := &countingRegistry{fakeRegistry: &fakeRegistry{records: map[namespace.ID]namespace.Descriptor{}}}
	c := startServer(t, reg)
	d := pbconv.Descriptor(opsDescriptor("acme")).Normalize()
	id := d.ID()
	for range 20 {
		_, err := c.rpc.Lookup(as(t, "acme-token"), &pb.LookupRequest{NamespaceId: id[:], Keys: [][]byte{key(1)}})
		wantErr(t, "lookup in an unregistered namespace", err, codes.NotFound, pb.ReasonNamespaceNotFound)
	}
	if n := reg.lookups.Load(); n != 1 {
		t.Fatalf("20 requests asked the registry %d times, want 1", n)
	}
	if err := reg.RegisterNamespace(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	poll.NoError(t, 5*time.Second, 50*time.Millisecond, "a namespace registered elsewhere served", func() error {
		_, err := c.rpc.Lookup(as(t, "acme-token"), &pb.LookupRequest{NamespaceId: id[:], Keys: [][]byte{key(1)}})
		return err
	})
}
