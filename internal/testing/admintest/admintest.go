// Package admintest fills real strata nodes for the tests of package admin
// and of the strata CLI: nodes started by internal/testnode, each with a
// gRPC connection, namespaces opened, chains of pages put and looked up
// over the nodes' gRPC API, and ThreeNodes, a filled three-node cluster.
// Everything it starts closes when the test ends.
package admintest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Node is a real node serving on loopback, with a connection to fill it.
type Node struct {
	*testnode.Node
	Addr  string
	CC    *grpc.ClientConn
	Data  pb.StrataClient
	Token string // sent on the calls of Open, Put and Lookup when set
}

// StartOne starts a node with its own embedded etcd and the tenants'
// tokens (token → tenant; nil: no authentication). The host tier is 4
// slabs of the default 64 MiB: one slab carved for 16 KiB pages leaves
// none for 32 KiB pages (the node does not set a smaller slab size for
// small tiers), and memory is only committed as pages arrive.
func StartOne(t testing.TB, tokens map[string]string) *Node {
	t.Helper()
	return connect(t, testnode.Start(t, node.Config{HostBytes: 256 << 20, TenantTokens: tokens}))
}

// connect dials n.
func connect(t testing.TB, n *testnode.Node) *Node {
	t.Helper()
	cc := testnode.Dial(t, n.Addr())
	return &Node{Node: n, Addr: n.Addr(), CC: cc, Data: pb.NewStrataClient(cc)}
}

// StartCluster starts count nodes from cfg sharing one embedded etcd
// (testnode.StartCluster), joined in one gossip cluster, and waits until
// each sees all alive. It returns etcd's endpoints and the nodes sorted by
// node ID, as Members lists them.
func StartCluster(t testing.TB, count int, cfg node.Config) (etcd []string, nodes []*Node) {
	t.Helper()
	c := testnode.StartCluster(t, count, func(_ int, c *node.Config) {
		endpoints := c.EtcdEndpoints
		*c = cfg
		c.EtcdEndpoints = endpoints
		if c.Handoff.Every == 0 {
			// The fixtures put pages on the nodes they name, not where
			// placement puts them: a node handing them back to their owner
			// (peer.Handoff) would change the counts mid-test.
			c.Handoff.Every = -1
		}
	})
	for _, n := range c.Nodes {
		nodes = append(nodes, connect(t, n))
	}
	slices.SortFunc(nodes, func(x, y *Node) int { return strings.Compare(x.ID(), y.ID()) })
	alive := map[string]string{}
	for _, n := range nodes {
		alive[n.ID()] = "alive"
	}
	for _, n := range nodes {
		n.AwaitMembers(t, alive)
	}
	return c.Etcd.Endpoints(), nodes
}

// AwaitMembers waits until n's membership view is want (see
// testnode.AwaitMembers).
func (n *Node) AwaitMembers(t testing.TB, want map[string]string) {
	t.Helper()
	testnode.AwaitMembers(t, n.CC, want)
}

// Ctx is the test's context, with n's token when it has one.
func (n *Node) Ctx(t testing.TB) context.Context {
	if n.Token == "" {
		return t.Context()
	}
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+n.Token)
}

// Descriptor is a small model's namespace: 2 layers × 2 KV heads × 64
// dims × bf16 × 16 tokens × K and V = 16 KiB pages.
func Descriptor(tenant string) *pb.Descriptor {
	return &pb.Descriptor{Tenant: tenant, Model: "llama-3-8b", ModelRevision: "r1", Engine: "vllm",
		Dtype: "bf16", PageTokens: 16, NumLayers: 2, NumKvHeads: 2, HeadDim: 64}
}

// Open opens the namespace of d on n.
func (n *Node) Open(t testing.TB, d *pb.Descriptor) *pb.OpenNamespaceResponse {
	t.Helper()
	resp, err := n.Data.OpenNamespace(n.Ctx(t), &pb.OpenNamespaceRequest{
		Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1, Descriptor_: d})
	if err != nil {
		t.Fatalf("opening namespace: %v", err)
	}
	return resp
}

// Page is one page a test publishes.
type Page struct {
	Key, Parent []byte
	Depth       uint32
	Data        []byte
}

// Checksum is the page's CRC-32C, 4 bytes big-endian.
func (p Page) Checksum() []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.Checksum(p.Data, crc32.MakeTable(crc32.Castagnoli)))
}

// Chain makes count pages of one token sequence: each key hashes its
// parent's, as the native key scheme does.
func Chain(seed string, count int, pageBytes uint64) []Page {
	var pages []Page
	prev := []byte(seed)
	for i := range count {
		key := sha256.Sum256(append(bytes.Clone(prev), byte(i)))
		p := Page{Key: key[:], Depth: uint32(i), Data: bytes.Repeat([]byte{byte(i + 1), byte(len(seed))}, int(pageBytes/2))}
		if i > 0 {
			p.Parent = prev
		}
		pages = append(pages, p)
		prev = key[:]
	}
	return pages
}

// Put publishes pages with the one-call Put stream: each page's header,
// then its bytes in chunks of 4 KiB.
func (n *Node) Put(t testing.TB, nsID []byte, pages []Page) {
	t.Helper()
	stream, err := n.Data.Put(n.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range putMessages(nsID, pages) {
		if err := stream.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	results := resp.GetResults()
	if i := slices.IndexFunc(results, func(r *pb.CommitResult) bool {
		return r.GetStatus() != pb.CommitStatus_COMMIT_STATUS_COMMITTED
	}); i >= 0 {
		t.Fatalf("put page %d: %v %s", i, results[i].GetStatus(), results[i].GetReason())
	}
}

// putMessages is the Put stream of pages; the first message names the
// namespace.
func putMessages(nsID []byte, pages []Page) []*pb.PutRequest {
	var msgs []*pb.PutRequest
	for _, p := range pages {
		msgs = append(msgs, &pb.PutRequest{Header: &pb.PutHeader{Checksum: p.Checksum(), Page: &pb.PageSpec{
			Key: p.Key, ParentKey: p.Parent, Depth: p.Depth, Size: uint64(len(p.Data))}}})
		for chunk := range slices.Chunk(p.Data, 4096) {
			msgs = append(msgs, &pb.PutRequest{Data: chunk})
		}
	}
	if len(msgs) > 0 {
		msgs[0].NamespaceId = nsID
	}
	return msgs
}

// Lookup looks keys up, optionally taking a lease on the hit prefix.
func (n *Node) Lookup(t testing.TB, nsID []byte, lease bool, keys ...[]byte) *pb.LookupResponse {
	t.Helper()
	resp, err := n.Data.Lookup(n.Ctx(t), &pb.LookupRequest{NamespaceId: nsID, Keys: keys, Lease: lease})
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	return resp
}

// ThreeNodes is three nodes sharing one embedded etcd, joined in one
// gossip cluster, and one namespace (acme's llama, Descriptor) written to
// two of them; A, B and C are in node ID order:
//
//	A: chain "a", 3 pages, looked up on A: 3 hits of 4 keys, leased;
//	B: chain "b", 2 pages, and a copy of A's first page; looked up on B:
//	   1 hit of 1 key;
//	C: nothing. It does not know the namespace, which was opened on A and
//	   B only.
type ThreeNodes struct {
	Etcd      []string
	A, B, C   *Node
	Nodes     []*Node // A, B, C: sorted by node ID, as Members lists them
	NS        []byte  // the namespace's ID
	PageBytes uint64
	ChainA    []Page
	ChainB    []Page
}

// StartThreeNodes starts ThreeNodes, each node from cfg (see
// StartCluster).
func StartThreeNodes(t testing.TB, cfg node.Config) *ThreeNodes {
	t.Helper()
	f := &ThreeNodes{}
	f.Etcd, f.Nodes = StartCluster(t, 3, cfg)
	f.A, f.B, f.C = f.Nodes[0], f.Nodes[1], f.Nodes[2]
	open := f.A.Open(t, Descriptor("acme"))
	f.NS, f.PageBytes = open.GetNamespaceId(), open.GetPageBytes()
	f.B.Open(t, Descriptor("acme"))
	f.ChainA, f.ChainB = Chain("a", 3, f.PageBytes), Chain("b", 2, f.PageBytes)
	f.A.Put(t, f.NS, f.ChainA)
	f.B.Put(t, f.NS, append(slices.Clone(f.ChainB), f.ChainA[0]))
	missing := make([]byte, 32)
	if got := f.A.Lookup(t, f.NS, true, f.ChainA[0].Key, f.ChainA[1].Key, f.ChainA[2].Key, missing); got.GetHitPrefix() != 3 {
		t.Fatalf("hit prefix on A = %d, want 3", got.GetHitPrefix())
	}
	if got := f.B.Lookup(t, f.NS, false, f.ChainB[0].Key); got.GetHitPrefix() != 1 {
		t.Fatalf("hit prefix on B = %d, want 1", got.GetHitPrefix())
	}
	return f
}
