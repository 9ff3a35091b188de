package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// testNode is a real node serving on loopback, with a data-plane client
// to fill it.
type testNode struct {
	node  *node.Node
	addr  string
	cc    *grpc.ClientConn
	data  pb.StrataClient
	token string // sent on data-plane calls when set

	stopOnce sync.Once
	stopErr  error
}

// startNode starts a node in-process with its own embedded etcd; it closes
// when the test ends. The host tier is 4 slabs of the default 64 MiB: one
// slab carved for 16 KiB pages leaves none for the fork's 32 KiB pages
// (the node does not set a smaller slab size for small tiers), and memory
// is only committed as pages arrive.
func startNode(t *testing.T, tokens map[string]string) *testNode {
	t.Helper()
	return startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		EmbeddedEtcdURL: "http://127.0.0.1:0", HostBytes: 256 << 20, TenantTokens: tokens})
}

// startNodeConfig starts a node from cfg; it closes when the test ends,
// unless stop closed it before.
func startNodeConfig(t *testing.T, cfg node.Config) *testNode {
	t.Helper()
	n, err := node.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("starting node: %v", err)
	}
	tn := &testNode{node: n, addr: n.Addr()}
	t.Cleanup(func() {
		if err := tn.stop(); err != nil {
			t.Errorf("closing node: %v", err)
		}
	})
	if tn.cc, err = grpc.NewClient(n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.cc.Close() })
	tn.data = pb.NewStrataClient(tn.cc)
	return tn
}

// stop closes the node, once.
func (n *testNode) stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.node.Close() })
	return n.stopErr
}

func (n *testNode) ctx(t *testing.T) context.Context {
	if n.token == "" {
		return t.Context()
	}
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+n.token)
}

// descriptor is a small model's namespace: 2 layers × 2 KV heads × 64
// dims × bf16 × 16 tokens × K and V = 16 KiB pages.
func descriptor(tenant string) *pb.Descriptor {
	return &pb.Descriptor{Tenant: tenant, Model: "llama-3-8b", ModelRevision: "r1", Engine: "vllm",
		Dtype: "bf16", PageTokens: 16, NumLayers: 2, NumKvHeads: 2, HeadDim: 64}
}

func (n *testNode) open(t *testing.T, d *pb.Descriptor) *pb.OpenNamespaceResponse {
	t.Helper()
	resp, err := n.data.OpenNamespace(n.ctx(t), &pb.OpenNamespaceRequest{
		Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1, Descriptor_: d})
	if err != nil {
		t.Fatalf("opening namespace: %v", err)
	}
	return resp
}

// page is one page the test publishes.
type page struct {
	key, parent []byte
	depth       uint32
	data        []byte
}

// checksum is the page's CRC-32C, 4 bytes big-endian.
func (p page) checksum() []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.Checksum(p.data, crc32.MakeTable(crc32.Castagnoli)))
}

// chain makes count pages of one token sequence: each key hashes its
// parent's, as the native key scheme does.
func chain(seed string, count int, pageBytes uint64) []page {
	var pages []page
	prev := []byte(seed)
	for i := range count {
		key := sha256.Sum256(append(bytes.Clone(prev), byte(i)))
		p := page{key: key[:], depth: uint32(i), data: bytes.Repeat([]byte{byte(i + 1), byte(len(seed))}, int(pageBytes/2))}
		if i > 0 {
			p.parent = prev
		}
		pages = append(pages, p)
		prev = key[:]
	}
	return pages
}

// put publishes pages with the one-call Put stream.
func (n *testNode) put(t *testing.T, nsID []byte, pages []page) {
	t.Helper()
	stream, err := n.data.Put(n.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pages {
		msg := &pb.PutRequest{Header: &pb.PutHeader{Checksum: p.checksum(), Page: &pb.PageSpec{
			Key: p.key, ParentKey: p.parent, Depth: p.depth, Size: uint64(len(p.data))}}}
		if i == 0 {
			msg.NamespaceId = nsID
		}
		if err := stream.Send(msg); err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(p.data); off += 4096 {
			if err := stream.Send(&pb.PutRequest{Data: p.data[off:min(off+4096, len(p.data))]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	for i, r := range resp.GetResults() {
		if r.GetStatus() != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
			t.Fatalf("put page %d: %v %s", i, r.GetStatus(), r.GetReason())
		}
	}
}

// lookup looks keys up, optionally taking a lease on the hit prefix.
func (n *testNode) lookup(t *testing.T, nsID []byte, lease bool, keys ...[]byte) *pb.LookupResponse {
	t.Helper()
	resp, err := n.data.Lookup(n.ctx(t), &pb.LookupRequest{NamespaceId: nsID, Keys: keys, Lease: lease})
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	return resp
}

// strata runs the CLI in-process against addr with env as its environment.
func strata(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd(func(k string) string { return env[k] })
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// run runs the CLI against n and fails the test on an error.
func (n *testNode) run(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := strata(t, map[string]string{"STRATA_ENDPOINT": n.addr, "STRATA_TOKEN": n.token}, args...)
	if err != nil {
		t.Fatalf("strata %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// table splits a table into rows of cells.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}
