package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
)

// The reservation share (store/quota.go) at the node: every tenant has
// it, wherever its token comes from and whatever its quota, and a bad
// share or reservation deadline is refused at start and loses nothing.

// tierRPC reserves and aborts pages of a node's namespaces over gRPC as
// one tenant or another.
type tierRPC struct {
	t   *testing.T
	ctx context.Context
	rpc pb.StrataClient
}

func newTierRPC(ctx context.Context, t *testing.T, n *testnode.Node) *tierRPC {
	return &tierRPC{t: t, ctx: ctx, rpc: pb.NewStrataClient(testnode.Dial(t, n.Addr()))}
}

// as is the context of a call with token ("" for none).
func (r *tierRPC) as(token string) context.Context {
	if token == "" {
		return r.ctx
	}
	return metadata.AppendToOutgoingContext(r.ctx, "authorization", "Bearer "+token)
}

// open opens desc's namespace as tenant with token, waiting up to 5 s for
// a token put in etcd to be in force.
func (r *tierRPC) open(token, tenant string) []byte {
	r.t.Helper()
	d := desc
	d.Tenant = tenant
	var id []byte
	poll.NoError(r.t, 5*time.Second, 50*time.Millisecond, "opening tenant "+tenant+"'s namespace", func() error {
		resp, err := r.rpc.OpenNamespace(r.as(token), &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1,
			Descriptor_: pbconv.DescriptorProto(d)})
		id = resp.GetNamespaceId()
		return err
	})
	return id
}

// hog reserves count pages for a day and returns the write ids reserved
// and the first refusal's reason.
func (r *tierRPC) hog(token string, ns []byte, count int) (wids []uint64, refusal string) {
	r.t.Helper()
	specs := make([]*pb.PageSpec, count)
	for i := range specs {
		specs[i] = &pb.PageSpec{Key: []byte{0xEE, byte(i), byte(i >> 8), 31: 1}, Depth: uint32(i), Size: page}
	}
	resp, err := r.rpc.Reserve(r.as(token), &pb.ReserveRequest{NamespaceId: ns, Pages: specs,
		DeadlineMs: uint32((24 * time.Hour).Milliseconds())})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, res := range resp.GetReservations() {
		switch {
		case res.GetStatus() == pb.ReserveStatus_RESERVE_STATUS_RESERVED:
			wids = append(wids, res.GetWriteId())
		case refusal == "":
			refusal = res.GetReason()
		}
	}
	return wids, refusal
}

func (r *tierRPC) abort(token string, ns []byte, wids []uint64) {
	r.t.Helper()
	if _, err := r.rpc.Abort(r.as(token), &pb.AbortRequest{NamespaceId: ns, WriteIds: wids}); err != nil {
		r.t.Fatal(err)
	}
}

// TestReserveShareEveryTenant: a tenant of the --tenant-token flags, one
// from etcd with a byte quota and one from etcd without a quota each get
// the same half of the tier when they reserve all of it, refused QUOTA
// past it; a reservation quota below the share bounds its tenant further.
func TestReserveShareEveryTenant(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 2 << 20, ShmSocket: "off", NoCutoffFloor: true, // 128 pages
		TenantTokens: map[string]string{"tok-f": "flagged"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	putTenants(ctx, t, n,
		registry.Tenant{Name: "quota", TokenSHA256: server.HashToken("tok-q"), Quota: registry.Quota{Bytes: 1 << 30}},
		registry.Tenant{Name: "plain", TokenSHA256: server.HashToken("tok-p")},
		registry.Tenant{Name: "tight", TokenSHA256: server.HashToken("tok-t"), Quota: registry.Quota{ReserveBytes: 16 * page}})
	r := newTierRPC(ctx, t, n)
	for _, tc := range []struct {
		token, tenant string
		want          int
		why           string
	}{
		{"tok-f", "flagged", 64, "reservation share"},
		{"tok-q", "quota", 64, "reservation share"},
		{"tok-p", "plain", 64, "reservation share"},
		{"tok-t", "tight", 16, "262144 bytes reserved of its 262144"},
	} {
		ns := r.open(tc.token, tc.tenant)
		wids, refusal := r.hog(tc.token, ns, 128)
		t.Logf("%s reserved %d of 128 pages; then: %s", tc.tenant, len(wids), refusal)
		if len(wids) != tc.want || !strings.Contains(refusal, "QUOTA") || !strings.Contains(refusal, tc.why) {
			t.Errorf("tenant %s reserving the whole tier: %d pages, then %q; want %d, then QUOTA (%s)",
				tc.tenant, len(wids), refusal, tc.want, tc.why)
		}
		r.abort(tc.token, ns, wids)
	}
}

// TestReserveShareOpenNode: on an open node, the tenants that descriptors
// name (the adapters' "default" among them) have the share too.
func TestReserveShareOpenNode(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 2 << 20, ShmSocket: "off", NoCutoffFloor: true}) // 128 pages
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newTierRPC(ctx, t, n)
	wids, refusal := r.hog("", r.open("", "default"), 128)
	if len(wids) != 64 || !strings.Contains(refusal, "QUOTA") {
		t.Fatalf("tenant default reserving the whole tier: %d pages, then %q; want 64, then QUOTA", len(wids), refusal)
	}
	d := desc
	d.Tenant = "other"
	_, ns := openNS(t, n.Addr(), client.Options{}, d)
	_, pages := chain(ns, 0, 48)
	res, err := ns.Put(ctx, pages)
	if err != nil || committed(res) != 48 {
		t.Fatalf("another tenant beside default's reservations: %d of 48 committed, %v", committed(res), err)
	}
}

// TestBadReserveConfigLosesNothing: a node restarted with a reservation
// share outside (0, 1] or a default reservation deadline past the longest
// refuses to start, saying which, and the pages it held are all there at
// the next start with a good config.
func TestBadReserveConfigLosesNothing(t *testing.T) {
	dir := t.TempDir()
	good := node.Config{DataDir: dir, Tiers: []string{"host", "ssd"}, HostBytes: 4 << 20, SSDBytes: 16 << 20,
		Listen: "127.0.0.1:0", EmbeddedEtcdURL: "http://127.0.0.1:0", ShmSocket: "off"}
	n := testnode.Start(t, good)
	_, ns := openNS(t, n.Addr(), client.Options{}, desc)
	keys, pages := chain(ns, 0, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if res, err := ns.Put(ctx, pages); err != nil || committed(res) != 16 {
		t.Fatalf("put: %d of 16 committed, %v", committed(res), err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*node.Config)
		want string
	}{
		{"share 2", func(c *node.Config) { c.ReserveShare = 2 }, "reserve share 2: want a share of each tier in (0, 1]"},
		{"deadline past the longest", func(c *node.Config) { c.ReserveTTL, c.MaxReserveTTL = 10*time.Minute, time.Minute },
			"default reservation TTL 10m0s exceeds the maximum 1m0s"},
	} {
		cfg := good
		tc.mod(&cfg)
		bad, err := node.Start(ctx, cfg)
		if err == nil {
			bad.Close()
			t.Fatalf("%s: started", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
		t.Logf("%s: %v", tc.name, err)
	}
	n = testnode.Start(t, good)
	_, ns = openNS(t, n.Addr(), client.Options{}, desc)
	if got := readBack(t, ns, keys); got != len(keys) {
		t.Fatalf("after the refused starts: %d of %d pages", got, len(keys))
	}
}
