package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// startNode runs a real node in-process: embedded etcd, gRPC on a loopback
// port chosen by the kernel.
func startNode(t testing.TB, mod func(*node.Config)) *node.Node {
	t.Helper()
	return addNodeWith(t, nil, mod).Node
}

// dial dials addr with a tenant token.
func dial(t testing.TB, addr, token string) *client.Client {
	t.Helper()
	return dialWith(t, addr, client.Options{Token: token})
}

// dialWith dials addr with opts; the test's cleanup closes the client.
func dialWith(t testing.TB, addr string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.Dial(ctxT(t), addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing client: %v", err)
		}
	})
	return c
}

// open opens the llama namespace through c.
func open(t testing.TB, c *client.Client) *client.Namespace {
	t.Helper()
	ns, err := c.Open(ctxT(t), llama())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// pageBufs returns n buffers of ns's page size.
func pageBufs(ns *client.Namespace, n int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	return bufs
}

// readsBack fails t unless ns holds every page of keys with its data.
func readsBack(ctx context.Context, t *testing.T, ns *client.Namespace, keys []namespace.Key, data [][]byte) {
	t.Helper()
	readsOnly(ctx, t, ns, keys, data, func(int) bool { return true })
}

// readsOnly fails t unless ns holds exactly the pages of keys that held
// names by index, each with its data.
func readsOnly(ctx context.Context, t *testing.T, ns *client.Namespace, keys []namespace.Key, data [][]byte, held func(i int) bool) {
	t.Helper()
	bufs := pageBufs(ns, len(keys))
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if want := held(i); found[i] != want || want && !bytes.Equal(bufs[i], data[i]) {
			t.Fatalf("page %d: found %v, want %v, bytes equal %v", i, found[i], want, bytes.Equal(bufs[i], data[i]))
		}
	}
}

// putWant puts pages and checks that every one comes back with status
// want; what names the put in a failure.
func putWant(ctx context.Context, t testing.TB, ns *client.Namespace, pages []client.Page, want client.PutStatus, what string) {
	t.Helper()
	res, err := ns.Put(ctx, pages)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, r := range res {
		if r.Status != want {
			t.Fatalf("%s: page %d: %v %s, want %v", what, i, r.Status, r.Reason, want)
		}
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// llama is a small descriptor: 2 layers, 2 KV heads of 64, bf16, 16-token
// pages: 16 KiB pages.
func llama() namespace.Descriptor {
	return namespace.Descriptor{Tenant: "acme", Model: "meta-llama/Llama-3-8B", ModelRevision: "r1",
		Engine: "vllm", DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}
}

func tokens(n int, seed uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = seed*7919 + uint32(i)*31
	}
	return out
}

// pagesFor is a page of ns's size for each of keys, its bytes its key's
// first eight repeated (pageData).
func pagesFor(ns *client.Namespace, keys []namespace.Key) [][]byte {
	data := make([][]byte, len(keys))
	for i, k := range keys {
		data[i] = pageData(k, ns.PageBytes())
	}
	return data
}

// mustStore fails t unless a put (what names it) answered no error and
// stored every page.
func mustStore(t testing.TB, what string, res []client.PutResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, r := range res {
		if !r.Status.Stored() {
			t.Fatalf("%s: page %d: %v %s", what, i, r.Status, r.Reason)
		}
	}
}

func TestPutLookupGet(t *testing.T) {
	n := startNode(t, nil)
	ns := open(t, dial(t, n.Addr(), ""))
	ctx := ctxT(t)
	keys := ns.PageKeys(tokens(16*10+5, 1))
	if len(keys) != 10 {
		t.Fatalf("%d keys for 10 full pages", len(keys))
	}
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys[:6], data[:6]), client.Committed, "put")
	// Putting again: Exists, no bytes sent.
	putWant(ctx, t, ns, client.ChainPages(keys[:2], data[:2]), client.Exists, "second put")
	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lr.HitPrefix != 6 || lr.Lease == nil || lr.Lease.Pages != 6 {
		t.Fatalf("lookup: hit prefix %d lease %+v", lr.HitPrefix, lr.Lease)
	}
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	found, err := ns.Get(ctx, keys[:8], bufs, lr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if found[i] != (i < 6) {
			t.Fatalf("page %d found=%v", i, found[i])
		}
		if i < 6 && !bytes.Equal(bufs[i], data[i]) {
			t.Fatalf("page %d: wrong bytes", i)
		}
	}
	if err := lr.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := ns.Delete(ctx, keys[5:6]); err != nil || d != 1 {
		t.Fatalf("delete: %d %v", d, err)
	}
	if lr, _ := ns.Lookup(ctx, keys, false, 0); lr.HitPrefix != 5 {
		t.Fatalf("hit prefix after delete: %d", lr.HitPrefix)
	}
}

// TestOtherProcessHits: a second process that computes keys from the same
// tokens and descriptor finds and reads the pages this one wrote.
func TestOtherProcessHits(t *testing.T) {
	if addr := os.Getenv("STRATA_TEST_CHILD_ADDR"); addr != "" {
		t.Skip("child mode runs in TestChildReader")
	}
	n := startNode(t, nil)
	ns := open(t, dial(t, n.Addr(), ""))
	ctx := ctxT(t)
	keys := ns.PageKeys(tokens(16*20, 42))
	if _, err := ns.Put(ctx, client.ChainPages(keys, pagesFor(ns, keys))); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChildReader$", "-test.v")
	cmd.Env = append(os.Environ(), "STRATA_TEST_CHILD_ADDR="+n.Addr())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child: 20 pages hit and verified") {
		t.Fatalf("child process: %v\n%s", err, out)
	}
}

// TestChildReader is the second process of TestOtherProcessHits.
func TestChildReader(t *testing.T) {
	addr := os.Getenv("STRATA_TEST_CHILD_ADDR")
	if addr == "" {
		t.Skip("runs only as TestOtherProcessHits's child process")
	}
	c := dial(t, addr, "")
	ctx := ctxT(t)
	ns, err := c.Open(ctx, llama())
	if err != nil {
		t.Fatal(err)
	}
	keys := ns.PageKeys(tokens(16*20, 42))
	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil || lr.HitPrefix != len(keys) {
		t.Fatalf("lookup: %v, hit prefix %d", err, lr.HitPrefix)
	}
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	found, err := ns.Get(ctx, keys, bufs, lr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	want := pagesFor(ns, keys)
	for i := range keys {
		if !found[i] || !bytes.Equal(bufs[i], want[i]) {
			t.Fatalf("page %d differs", i)
		}
	}
	fmt.Printf("child: %d pages hit and verified\n", len(keys))
}

// TestNamespacesIsolate: descriptors that differ only in tp_size, dtype or
// model revision never hit each other's pages.
func TestNamespacesIsolate(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n.Addr(), "")
	ctx := ctxT(t)
	base := open(t, c)
	toks := tokens(16*8, 7)
	keys := base.PageKeys(toks)
	if _, err := base.Put(ctx, client.ChainPages(keys, pagesFor(base, keys))); err != nil {
		t.Fatal(err)
	}
	variants := map[string]func(*namespace.Descriptor){
		"tp_size":        func(d *namespace.Descriptor) { d.TPSize = 2 },
		"dtype":          func(d *namespace.Descriptor) { d.DType = "fp16" },
		"model_revision": func(d *namespace.Descriptor) { d.ModelRevision = "r2" },
	}
	for name, mod := range variants {
		t.Run(name, func(t *testing.T) {
			d := llama()
			mod(&d)
			ns, err := c.Open(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if ns.ID() == base.ID() {
				t.Fatal("same namespace id")
			}
			vk := ns.PageKeys(toks)
			lr, err := ns.Lookup(ctx, vk, false, 0)
			if err != nil || lr.HitPrefix != 0 {
				t.Fatalf("variant's own keys: hit prefix %d, %v", lr.HitPrefix, err)
			}
			// Even the base namespace's raw keys miss in the variant.
			lr, err = ns.Lookup(ctx, keys, false, 0)
			if err != nil || lr.HitPrefix != 0 {
				t.Fatalf("base keys in variant: hit prefix %d, %v", lr.HitPrefix, err)
			}
		})
	}
}

func TestTenantsCannotCross(t *testing.T) {
	n := startNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "tenant-a", "token-b": "tenant-b"}
	})
	ctx := ctxT(t)
	a, b := dial(t, n.Addr(), "token-a"), dial(t, n.Addr(), "token-b")
	da := llama()
	da.Tenant = "tenant-a"
	nsA, err := a.Open(ctx, da)
	if err != nil {
		t.Fatal(err)
	}
	keys := nsA.PageKeys(tokens(32, 1))
	if _, err := nsA.Put(ctx, client.ChainPages(keys, pagesFor(nsA, keys))); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, da); !errors.Is(err, client.ErrTenantDenied) {
		t.Fatalf("tenant b opening tenant a's namespace: %v, want ErrTenantDenied", err)
	}
	// Without a good token the client cannot even learn the view (Dial
	// asks the node for it), let alone open the namespace.
	for _, token := range []string{"", "wrong"} {
		c, err := client.Dial(ctx, n.Addr(), client.Options{Token: token})
		if err == nil {
			_, err = c.Open(ctx, da)
			c.Close()
		}
		if !errors.Is(err, client.ErrUnauthenticated) {
			t.Fatalf("token %q: %v, want ErrUnauthenticated", token, err)
		}
	}
}

func TestLeaseExpires(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.LeaseTTL = 300 * time.Millisecond })
	ns := open(t, dial(t, n.Addr(), ""))
	ctx := ctxT(t)
	keys := ns.PageKeys(tokens(32, 3))
	if _, err := ns.Put(ctx, client.ChainPages(keys, pagesFor(ns, keys))); err != nil {
		t.Fatal(err)
	}
	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil || lr.Lease == nil {
		t.Fatal(lr, err)
	}
	// Wait for the expiry the node announced, polling with unleased lookups
	// (which must not extend it).
	poll.Until(t, 5*time.Second, 20*time.Millisecond, "the lease's announced expiry passing", func() bool {
		if _, err := ns.Lookup(ctx, keys, false, 0); err != nil {
			t.Fatal(err)
		}
		return time.Now().After(lr.Lease.Expires.Add(100 * time.Millisecond))
	})
	bufs := [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes())}
	if _, err := ns.Get(ctx, keys, bufs, lr.Lease); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("get under an expired lease: %v, want ErrLeaseExpired", err)
	}
	if err := lr.Lease.Renew(ctx, 0); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("renew of an expired lease: %v", err)
	}
}

// TestLeaseSurvivesPressure: with the real host tier, a leased prefix stays
// readable while far more pages than fit are written; unleased pages go.
func TestLeaseSurvivesPressure(t *testing.T) {
	// 256 pages of 16 KiB; puts of half the tier, past the tenant's default
	// reservation share once shm slots are held: the whole tier is its own.
	n := startNode(t, func(c *node.Config) { c.HostBytes, c.ReserveShare = 4<<20, 1 })
	ns := open(t, dial(t, n.Addr(), ""))
	ctx := ctxT(t)
	first := ns.PageKeys(tokens(16*8, 100))
	firstData := pagesFor(ns, first)
	if _, err := ns.Put(ctx, client.ChainPages(first, firstData)); err != nil {
		t.Fatal(err)
	}
	lr, err := ns.Lookup(ctx, first[:3], true, 30*time.Second)
	if err != nil || lr.Lease == nil {
		t.Fatal(lr, err)
	}
	for seq := range 8 { // 8 × 128 pages: four times the tier
		keys := ns.PageKeys(tokens(16*128, uint32(200+seq)))
		putWant(ctx, t, ns, client.ChainPages(keys, pagesFor(ns, keys)), client.Committed, fmt.Sprintf("sequence %d", seq))
	}
	bufs := [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes())}
	found, err := ns.Get(ctx, first[:3], bufs, lr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !found[i] || !bytes.Equal(bufs[i], firstData[i]) {
			t.Fatalf("leased page %d lost or changed under pressure", i)
		}
	}
	after, err := ns.Lookup(ctx, first, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < len(first); i++ {
		if after.Present[i] {
			t.Fatalf("unleased page %d survived four tiers' worth of writes", i)
		}
	}
}

// TestRacingWriters: clients putting the same pages at once leave exactly
// one copy of each; exactly one writer's commit wins per page.
func TestRacingWriters(t *testing.T) {
	n := startNode(t, nil)
	ctx := ctxT(t)
	const writers = 6
	keysOf := func(ns *client.Namespace) []namespace.Key { return ns.PageKeys(tokens(16*16, 9)) }
	results := make([][]client.PutResult, writers)
	errs := make(chan error, writers)
	start := make(chan struct{})
	for w := range writers {
		go func() {
			ns, err := dial(t, n.Addr(), "").Open(ctx, llama())
			if err != nil {
				errs <- err
				return
			}
			keys := keysOf(ns)
			<-start
			results[w], err = ns.Put(ctx, client.ChainPages(keys, pagesFor(ns, keys)))
			errs <- err
		}()
	}
	close(start)
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for page := range 16 {
		wins := 0
		for w := range writers {
			switch results[w][page].Status {
			case client.Committed:
				wins++
			case client.Exists:
			default:
				t.Fatalf("writer %d page %d: %v", w, page, results[w][page].Status)
			}
		}
		if wins != 1 {
			t.Fatalf("page %d: %d winning commits", page, wins)
		}
	}
	ns, err := dial(t, n.Addr(), "").Open(ctx, llama())
	if err != nil {
		t.Fatal(err)
	}
	lr, err := ns.Lookup(ctx, keysOf(ns), false, 0)
	if err != nil || lr.HitPrefix != 16 {
		t.Fatalf("after the race: hit prefix %d, %v", lr.HitPrefix, err)
	}
}

// TestKeyFormatBlocks: a namespace opened with the sha256-blocks key format
// has its own ID on the node (which computes it from the wire descriptor,
// key format included), its pages are keyed in that format, and they
// round-trip; the node refuses sha256-blocks with pages that are not whole
// SHA-256 blocks.
func TestKeyFormatBlocks(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n.Addr(), "")
	ctx := ctxT(t)
	d := llama()
	d.KeyFormat = namespace.KeyBlocks
	ns, err := c.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if ns.ID() == llama().ID() || ns.ID() != d.ID() {
		t.Fatalf("namespace ID %s; the sha256-chain one is %s", ns.ID(), llama().ID())
	}
	toks := tokens(16*8, 3)
	keys := ns.PageKeys(toks)
	want := namespace.KeyBlocks.AppendPageKeys(nil, namespace.Key(ns.ID()), toks, 16)
	if !slices.Equal(keys, want) || slices.Equal(keys, namespace.PageKeys(ns.ID(), toks, 16)) {
		t.Fatal("PageKeys does not follow the namespace's key format")
	}
	putWant(ctx, t, ns, client.ChainPages(keys, pagesFor(ns, keys)), client.Committed, "put")
	if lr, err := ns.Lookup(ctx, keys, false, 0); err != nil || lr.HitPrefix != len(keys) {
		t.Fatalf("lookup: %+v %v", lr, err)
	}
	d.PageTokens = 8
	if _, err := c.Open(ctx, d); err == nil || !strings.Contains(err.Error(), "key_format") {
		t.Fatalf("opening sha256-blocks with 8-token pages: %v", err)
	}
}

// TestPageFormat: namespaces that differ only in page_format are two
// namespaces on the node (which computes the ID from the wire descriptor,
// page format included), each readable; a page format whose size is not
// the page's is refused by the client and, sent anyway, by the node with
// InvalidArgument.
func TestPageFormat(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n.Addr(), "")
	ctx := ctxT(t)
	var ids []namespace.ID
	for _, f := range []string{"kv:L2.S2.T16.H2.D64:bf16", "kv:S2.L2.T16.H2.D64:bf16"} {
		d := llama()
		d.PageFormat = f
		ns, err := c.Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if ns.ID() != d.ID() || ns.ID() == llama().ID() || ns.Descriptor().PageFormat != f {
			t.Fatalf("%s: namespace %s, descriptor's %s, without a format %s", f, ns.ID(), d.ID(), llama().ID())
		}
		keys := ns.PageKeys(tokens(16*2, 5))
		putWant(ctx, t, ns, client.ChainPages(keys, pagesFor(ns, keys)), client.Committed, "put")
		readsBack(ctx, t, ns, keys, pagesFor(ns, keys))
		ids = append(ids, ns.ID())
	}
	if ids[0] == ids[1] {
		t.Fatal("two page formats share a namespace")
	}

	bad := llama()
	bad.PageFormat = "kv:L2.S2.T16.H2.D64:fp32" // 32 KiB; the page is 16 KiB
	const why = "page_format: describes 32768 bytes, the page is 16384 bytes"
	if _, err := c.Open(ctx, bad); !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), why) {
		t.Fatalf("client opened a page format of the wrong size: %v", err)
	}
	_, err := pb.NewStrataClient(rawConn(t, n.Addr())).OpenNamespace(ctx, &pb.OpenNamespaceRequest{
		Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1, Descriptor_: pbconv.DescriptorProto(bad)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), why) {
		t.Fatalf("node opened a page format of the wrong size: %v", err)
	}
}
