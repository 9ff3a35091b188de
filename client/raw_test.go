//go:build linux

package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/scrape"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// rawNode starts a node without shared memory, so that its clients move
// page bytes over the raw tcp data plane.
func rawNode(t *testing.T, mod func(*node.Config)) *node.Node {
	t.Helper()
	return startNode(t, func(c *node.Config) {
		c.ShmSocket = "off"
		if mod != nil {
			mod(c)
		}
	})
}

// twoPagesOver dials n as tenant token-a, opens a namespace through a
// client that must use the path active reports (named path), and puts two
// pages of a sequence.
func twoPagesOver(ctx context.Context, t *testing.T, n *node.Node, path string,
	active func(*client.Client) bool) (*client.Client, *client.Namespace, []namespace.Key, [][]byte) {
	t.Helper()
	c := dial(t, n.Addr(), "token-a")
	ns, err := c.Open(ctx, llama())
	if err != nil || !active(c) {
		t.Fatalf("open: %v, %s %v", err, path, active(c))
	}
	keys := ns.PageKeys(tokens(16*2, 9))
	data := pagesFor(ns, keys)
	if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
		t.Fatal(err)
	}
	return c, ns, keys, data
}

// malformedBody writes to w (rc's socket) the frame of m with a body one
// byte too long: the node answers BAD_REQUEST and the connection stays in
// step.
func malformedBody(t *testing.T, rc *transport.Conn, w io.Writer, m frame.Message) {
	t.Helper()
	bad := frame.Append(nil, 9, m)
	bad = append(bad[:len(bad)-1], 0, 0) // a body 1 byte too long
	bad[0]++
	if _, err := w.Write(bad); err != nil {
		t.Fatal(err)
	}
	if _, m, err := rc.Recv(); err != nil {
		t.Fatal(err)
	} else {
		wantCode(t, "malformed body", m, frame.CodeBadRequest)
	}
}

// oversizedFrameHangsUp writes to w (rc's socket) a frame header of op
// whose length is over the node's limit: the node answers with an Error,
// then hangs up.
func oversizedFrameHangsUp(t *testing.T, rc *transport.Conn, w io.Writer, op uint8) {
	t.Helper()
	huge := make([]byte, frame.HeaderSize)
	huge[3], huge[4] = 0x7f, op
	if _, err := w.Write(huge); err != nil {
		t.Fatal(err)
	}
	if _, m, err := rc.Recv(); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*frame.Error); !ok {
		t.Fatalf("oversized frame: %#v", m)
	}
	if _, _, err := rc.Recv(); err == nil {
		t.Fatal("connection still open after an oversized frame")
	}
}

// expiredLeaseThenGet leases keys (holding data) for a millisecond, lets
// the lease expire and checks that a Get under it fails with
// ErrLeaseExpired, then that a Get without one reads every page back
// intact: the node's answers to bad input lost nothing.
func expiredLeaseThenGet(ctx context.Context, t *testing.T, ns *client.Namespace, keys []namespace.Key, data [][]byte) {
	t.Helper()
	lr, err := ns.Lookup(ctx, keys, true, time.Millisecond)
	if err != nil || lr.Lease == nil {
		t.Fatal(lr, err)
	}
	time.Sleep(20 * time.Millisecond) // past the lease's expiry: only the clock passes it
	bufs := pageBufs(ns, len(keys))
	if _, err := ns.Get(ctx, keys, bufs, lr.Lease); !errors.Is(err, client.ErrLeaseExpired) {
		t.Fatalf("expired lease: %v", err)
	}
	readsBack(ctx, t, ns, keys, data)
}

// TestRawRoundTrip: a client puts and gets over the raw data plane
// byte-exact; a gRPC-only client reads the very same bytes, and pages it
// put read back over the raw plane; a small buffer is the caller's error
// and leaves the plane in use.
func TestRawRoundTrip(t *testing.T) {
	n := rawNode(t, nil)
	if n.RawAddr() == "" {
		t.Fatal("node serves no raw data plane by default")
	}
	ctx := ctxT(t)
	c := dial(t, n.Addr(), "")
	ns := open(t, c)
	if !c.RawActive() || c.ShmActive() {
		t.Fatalf("raw %v, shm %v; want raw only", c.RawActive(), c.ShmActive())
	}
	keys := ns.PageKeys(tokens(16*24, 21))
	data := pagesFor(ns, keys)
	for i := range data {
		data[i][i] ^= 0x77
	}
	putWant(ctx, t, ns, client.ChainPages(keys[:12], data[:12]), client.Committed, "put")
	putWant(ctx, t, ns, client.ChainPages(keys[:1], data[:1]), client.Exists, "second put")
	if one, two := c.RawPuts(); one != 2 || two != 0 {
		t.Fatalf("put batches of 12 and 1 pages: %d in one round trip, %d in two; want 2, 0", one, two)
	}
	grpcC := dialWith(t, n.Addr(), client.Options{NoShm: true, NoRaw: true})
	gns := open(t, grpcC)
	if grpcC.RawActive() {
		t.Fatal("NoRaw client uses the raw data plane")
	}
	if _, err := gns.Put(ctx, client.ChainPages(keys[12:], data[12:])); err != nil { // gRPC puts the rest
		t.Fatal(err)
	}
	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil || lr.HitPrefix != len(keys) || lr.Lease == nil || lr.Lease.Pages != len(keys) {
		t.Fatalf("lookup: %+v %v", lr, err)
	}
	if got := c.RawLookups(); got != 1 {
		t.Fatalf("%d lookups answered on the raw plane, want 1", got)
	}
	// A client that only looks keys up uses the raw plane from its first
	// lookup: nothing else has dialed it.
	lookupOnly := dialWith(t, n.Addr(), client.Options{NoShm: true})
	if lr, err := open(t, lookupOnly).Lookup(ctx, keys, false, 0); err != nil || lr.HitPrefix != len(keys) {
		t.Fatalf("lookup-only client: %+v %v", lr, err)
	}
	if got := lookupOnly.RawLookups(); got != 1 {
		t.Fatalf("a lookup-only client's first lookup: %d answered on the raw plane, want 1", got)
	}
	// The raw and the gRPC lookup agree, misses included.
	mixed := append(slices.Clone(keys[:3]), ns.PageKeys(tokens(16, 98))[0], keys[5])
	rawLR, err1 := ns.Lookup(ctx, mixed, false, 0)
	grpcLR, err2 := gns.Lookup(ctx, mixed, false, 0)
	if err1 != nil || err2 != nil || rawLR.HitPrefix != 3 || rawLR.HitPrefix != grpcLR.HitPrefix ||
		!slices.Equal(rawLR.Present, grpcLR.Present) || rawLR.Lease != nil {
		t.Fatalf("lookup with a miss: raw %+v %v, grpc %+v %v", rawLR, err1, grpcLR, err2)
	}
	for _, tc := range []struct {
		name  string
		ns    *client.Namespace
		lease *client.Lease
	}{{"raw, no lease", ns, nil}, {"raw, leased", ns, lr.Lease}, {"grpc", gns, nil}} {
		bufs := pageBufs(ns, len(keys))
		found, err := tc.ns.Get(ctx, keys, bufs, tc.lease)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range keys {
			if !found[i] || !bytes.Equal(bufs[i], data[i]) {
				t.Fatalf("%s: page %d found %v, equal %v", tc.name, i, found[i], bytes.Equal(bufs[i], data[i]))
			}
		}
	}
	// Misses among hits come back as misses, in place.
	other := ns.PageKeys(tokens(16, 99))
	bufs := pageBufs(ns, 3)
	found, err := ns.Get(ctx, []namespace.Key{keys[0], other[0], keys[2]}, bufs, nil)
	if err != nil || !found[0] || found[1] || !found[2] || !bytes.Equal(bufs[2], data[2]) {
		t.Fatalf("mixed get: %v %v", found, err)
	}
	if _, err := ns.Get(ctx, keys[:2], [][]byte{make([]byte, 10), make([]byte, ns.PageBytes())}, nil); !errors.Is(err, client.ErrBufferTooSmall) {
		t.Fatalf("small buffer: %v", err)
	}
	if found, err := ns.Get(ctx, keys[1:2], bufs[:1], nil); err != nil || !found[0] || !bytes.Equal(bufs[0], data[1]) {
		t.Fatalf("after a small buffer: %v %v", found, err)
	}
	if !c.RawActive() {
		t.Fatal("raw plane dropped after a caller error")
	}
}

// TestRawPutBatches: a put batch of more pages than one round trip takes
// goes Reserve first, and both kinds publish every page.
func TestRawPutBatches(t *testing.T) {
	n := rawNode(t, nil)
	ctx := ctxT(t)
	c := dial(t, n.Addr(), "")
	ns := open(t, c)
	keys := ns.PageKeys(tokens(16*40, 5))
	data := pagesFor(ns, keys)
	chain := client.ChainPages(keys, data)
	for _, batch := range [][2]int{{0, 16}, {16, 40}} {
		putWant(ctx, t, ns, chain[batch[0]:batch[1]], client.Committed, fmt.Sprint("batch ", batch))
	}
	if one, two := c.RawPuts(); one != 1 || two != 1 {
		t.Fatalf("batches of 16 and 24 pages: %d in one round trip, %d in two; want 1, 1", one, two)
	}
	wantBytesIn(t, n, len(keys)*ns.PageBytes())
	readsBack(ctx, t, ns, keys, data)
}

// TestRawGetsPoll: gets on the raw plane poll for their pages by default
// (Options.RawPoll), puts and lookups never do, and a client told not to
// poll (RawPoll < 0) gets the same pages without polling.
func TestRawGetsPoll(t *testing.T) {
	ctx, n := ctxT(t), rawNode(t, nil)
	c := dial(t, n.Addr(), "")
	ns := open(t, c)
	keys := ns.PageKeys(tokens(16*8, 9))
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys, data), client.Committed, "put")
	if _, err := ns.Lookup(ctx, keys, false, 0); err != nil {
		t.Fatal(err)
	}
	if found, spent := c.RawPollWindows(); found+spent != 0 {
		t.Fatalf("a put and a lookup polled: %d windows found their bytes, %d ran out; want none", found, spent)
	}
	if one, _ := c.RawPuts(); one != 1 || c.RawLookups() != 1 {
		t.Fatalf("the put and the lookup went over the raw plane %d and %d times, want 1 and 1", one, c.RawLookups())
	}
	// A get whose answer is in the socket before it reads (its goroutine
	// descheduled after the request, on a busy machine) needs no window:
	// read the pages back up to 20 times until one get polls.
	for round := 0; round < 20; round++ {
		for i := range keys {
			readsBack(ctx, t, ns, keys[i:i+1], data[i:i+1])
		}
		if found, spent := c.RawPollWindows(); found+spent > 0 {
			break
		}
	}
	if found, spent := c.RawPollWindows(); found+spent == 0 {
		t.Fatalf("%d gets on the raw plane never polled", 20*len(keys))
	}

	quiet := dialWith(t, n.Addr(), client.Options{RawPoll: -1})
	qns := open(t, quiet)
	readsBack(ctx, t, qns, keys, data)
	if found, spent := quiet.RawPollWindows(); found+spent != 0 {
		t.Fatalf("a client with RawPoll < 0 polled: %d, %d windows", found, spent)
	}
}

// wantBytesIn checks the node's count of page bytes received, over every
// namespace and path: each page put counts once.
func wantBytesIn(t *testing.T, n *node.Node, want int) {
	t.Helper()
	if got := scrape.Sum(scrape.Metrics(t, n.AdminAddr()), "strata_transfer_bytes_total", `direction="in"`); got != float64(want) {
		t.Fatalf("strata_transfer_bytes_total in: %.0f, want %d", got, want)
	}
}

// TestRawPutFrame: the node's answers to one-frame puts: published, already
// there, a wrong checksum or size (nothing published), a bad parent link,
// an unknown namespace, a client of protocol 2 (served, but without Put),
// a client of protocol 1 (refused); the connection stays in step.
func TestRawPutFrame(t *testing.T) {
	n := rawNode(t, func(c *node.Config) { c.TenantTokens = map[string]string{"token-a": "acme"} })
	ctx := ctxT(t)
	_, ns, keys, _ := twoPagesOver(ctx, t, n, "raw", (*client.Client).RawActive)
	addr := n.RawAddr()
	rc, m := rawDial(t, addr, "token-a")
	if w, ok := m.(*frame.Welcome); !ok || w.Version != frame.ProtocolVersion {
		t.Fatalf("welcome: %#v", m)
	}
	fresh := ns.PageKeys(tokens(16*4, 77))
	pages := pagesFor(ns, fresh)
	sum := func(p []byte) []byte { return namespace.CRC32C.Sum(p) }
	put := func(id uint64, k namespace.Key, data, checksum []byte) frame.Message {
		return shmCall(t, rc, id, &frame.Put{NS: ns.ID(), Page: frame.PageSpec{Key: k, Parent: keys[1], HasParent: true, Depth: 2},
			Checksum: checksum, Data: data})
	}
	wantPut := func(what string, m frame.Message, reserve, commit uint8) {
		t.Helper()
		ok, isOK := m.(*frame.PutOK)
		if !isOK || ok.Reserve != reserve || ok.Commit != commit {
			t.Fatalf("%s: answer %#v, want reserve %d commit %d", what, m, reserve, commit)
		}
		t.Logf("%s: %+v", what, ok)
	}
	present := func(k namespace.Key) bool {
		found, err := ns.Get(ctx, []namespace.Key{k}, pageBufs(ns, 1), nil)
		if err != nil {
			t.Fatal(err)
		}
		return found[0]
	}
	wantPut("new page", put(2, fresh[0], pages[0], sum(pages[0])), frame.SlotReserved, uint8(client.Committed))
	if !present(fresh[0]) {
		t.Fatal("a committed put reads as missing")
	}
	wantPut("page there", put(3, fresh[0], pages[0], sum(pages[0])), frame.SlotExists, 0)
	wantPut("wrong checksum", put(4, fresh[1], pages[1], sum(pages[2])), frame.SlotReserved, uint8(client.ChecksumMismatch))
	wantPut("half a page", put(5, fresh[2], pages[2][:len(pages[2])/2], sum(pages[2][:len(pages[2])/2])), frame.SlotRejected, 0)
	if present(fresh[1]) || present(fresh[2]) {
		t.Fatal("a page that failed its put reads as present")
	}
	self := &frame.Put{NS: ns.ID(), Page: frame.PageSpec{Key: fresh[3], Parent: fresh[3], HasParent: true}, Checksum: sum(pages[3]), Data: pages[3]}
	wantCode(t, "own parent", shmCall(t, rc, 6, self), frame.CodeBadRequest)
	wantCode(t, "unknown namespace", shmCall(t, rc, 7, &frame.Put{NS: namespace.ID{9}, Page: frame.PageSpec{Key: fresh[3]},
		Checksum: sum(pages[3]), Data: pages[3]}), frame.CodeNamespaceNotFound)
	wantPut("after the errors", put(8, fresh[3], pages[3], sum(pages[3])), frame.SlotReserved, uint8(client.Committed))

	old := func(version uint16) (*transport.Conn, frame.Message) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c := transport.NewStreamConn(nc, 0)
		t.Cleanup(func() { c.Close() })
		return c, shmCall(t, c, 1, &frame.Hello{Version: version, Token: "token-a"})
	}
	rc2, m := old(frame.MinProtocolVersion)
	if w, ok := m.(*frame.Welcome); !ok || w.Version != frame.MinProtocolVersion {
		t.Fatalf("welcome for protocol %d: %#v", frame.MinProtocolVersion, m)
	}
	wantCode(t, "lookup on protocol 2", shmCall(t, rc2, 4, &frame.Lookup{NS: ns.ID(), Keys: fresh[:1]}), frame.CodeBadRequest)
	wantCode(t, "put on protocol 2", shmCall(t, rc2, 2, &frame.Put{NS: ns.ID(), Page: frame.PageSpec{Key: fresh[1]},
		Checksum: sum(pages[1]), Data: pages[1]}), frame.CodeBadRequest)
	if m := rawRead(t, rc2, 3, &frame.Read{NS: ns.ID(), Keys: fresh[:1]}); !m.(*frame.Page).Found {
		t.Fatalf("read on protocol 2: %#v", m)
	}
	_, m = old(1)
	wantCode(t, "protocol 1", m, frame.CodeVersion)
}

// TestRawOtherTiers: pages the node holds on its SSD tier are read through
// the store, as gRPC reads them, and come back byte-exact.
func TestRawOtherTiers(t *testing.T) {
	n := rawNode(t, func(c *node.Config) {
		c.Tiers = []string{"host", "ssd"}
		c.HostBytes = 1 << 20 // 64 pages of 16 KiB
		c.SSDBytes = 16 << 20
	})
	checkOtherTiers(t, n, (*client.Client).RawActive, 12)
}

// TestRawFallback: a node with the raw plane off advertises nothing, and
// its clients work over gRPC, silently; so does a client told an address
// where nothing listens.
func TestRawFallback(t *testing.T) {
	off := rawNode(t, func(c *node.Config) { c.RawListen = "off" })
	on := rawNode(t, nil)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	ctx := ctxT(t)
	for _, tc := range []struct {
		name string
		addr string
		opts client.Options
	}{{"port off", off.Addr(), client.Options{}}, {"nothing listens", on.Addr(), client.Options{RawAddr: deadAddr}}} {
		c, err := client.Dial(ctx, tc.addr, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		ns := open(t, c)
		keys := ns.PageKeys(tokens(16*2, 4))
		data := pagesFor(ns, keys)
		if res, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil || !res[1].Status.Stored() {
			t.Fatalf("%s: put: %v %v", tc.name, res, err)
		}
		bufs := pageBufs(ns, 2)
		if found, err := ns.Get(ctx, keys, bufs, nil); err != nil || !found[0] || !found[1] || !bytes.Equal(bufs[1], data[1]) {
			t.Fatalf("%s: get over gRPC: %v %v", tc.name, found, err)
		}
		if c.RawActive() {
			t.Fatalf("%s: raw active", tc.name)
		}
		c.Close()
	}
}

// rawDial opens a raw connection and says hello with token.
func rawDial(t *testing.T, addr, token string) (*transport.Conn, frame.Message) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := transport.NewStreamConn(nc, 0)
	t.Cleanup(func() { c.Close() })
	if err := c.Send(1, &frame.Hello{Version: frame.ProtocolVersion, Token: token}); err != nil {
		t.Fatal(err)
	}
	_, m, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

// rawRead sends a Read and returns its first answer frame.
func rawRead(t *testing.T, c *transport.Conn, id uint64, m *frame.Read) frame.Message {
	t.Helper()
	if err := c.Send(id, m); err != nil {
		t.Fatal(err)
	}
	got, resp, err := c.RecvPage(func(p *frame.Page, size int) ([]byte, error) { return make([]byte, size), nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != id {
		t.Fatalf("answer to %d for request %d", got, id)
	}
	return resp
}

// TestRawBadInput: a wrong token, an unknown or foreign namespace, an
// unknown or expired lease, arena requests, malformed and oversized frames
// get clear errors; the pages read back intact afterwards.
func TestRawBadInput(t *testing.T) {
	n := rawNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "acme", "token-b": "other"}
		c.MaxBatch = 8
	})
	ctx := ctxT(t)
	c, ns, keys, data := twoPagesOver(ctx, t, n, "raw", (*client.Client).RawActive)
	addr := n.RawAddr()

	_, m := rawDial(t, addr, "wrong")
	wantCode(t, "wrong token", m, frame.CodeUnauthenticated)
	_, m = rawDial(t, addr, "")
	wantCode(t, "no token", m, frame.CodeUnauthenticated)

	rc, m := rawDial(t, addr, "token-b")
	if w, ok := m.(*frame.Welcome); !ok || w.NodeID != n.ID() || w.ArenaSize != 0 {
		t.Fatalf("hello with a good token: %#v", m)
	}
	wantCode(t, "foreign namespace", rawRead(t, rc, 2, &frame.Read{NS: ns.ID(), Keys: keys}), frame.CodeDenied)
	wantCode(t, "lookup, foreign namespace", shmCall(t, rc, 21, &frame.Lookup{NS: ns.ID(), Keys: keys}), frame.CodeDenied)
	wantCode(t, "unknown namespace", rawRead(t, rc, 3, &frame.Read{NS: namespace.ID{9}, Keys: keys}), frame.CodeNamespaceNotFound)

	rc, _ = rawDial(t, addr, "token-a")
	wantCode(t, "empty batch", rawRead(t, rc, 4, &frame.Read{NS: ns.ID()}), frame.CodeBadRequest)
	wantCode(t, "oversized read", rawRead(t, rc, 5, &frame.Read{NS: ns.ID(), Keys: make([]namespace.Key, 9)}), frame.CodeBatchTooLarge)
	wantCode(t, "unknown lease", rawRead(t, rc, 6, &frame.Read{NS: ns.ID(), Lease: 42, Keys: keys}), frame.CodeLeaseNotFound)
	wantCode(t, "arena get over tcp", shmCall(t, rc, 7, &frame.Get{NS: ns.ID(), Keys: keys}), frame.CodeBadRequest)
	wantCode(t, "empty lookup", shmCall(t, rc, 71, &frame.Lookup{NS: ns.ID()}), frame.CodeBadRequest)
	wantCode(t, "oversized lookup", shmCall(t, rc, 72, &frame.Lookup{NS: ns.ID(), Keys: make([]namespace.Key, 9)}), frame.CodeBatchTooLarge)
	wantCode(t, "lookup, unknown namespace", shmCall(t, rc, 73, &frame.Lookup{NS: namespace.ID{9}, Keys: keys}), frame.CodeNamespaceNotFound)
	if m := shmCall(t, rc, 74, &frame.Lookup{NS: ns.ID(), Keys: keys, Lease: true}); m.(*frame.LookupOK).HitPrefix != 2 || m.(*frame.LookupOK).LeaseID == 0 {
		t.Fatalf("lookup: %#v", m)
	}
	if m := shmCall(t, rc, 8, &frame.Reserve{NS: ns.ID(), Pages: []frame.PageSpec{{Key: namespace.Key{7}, Size: int64(ns.PageBytes())}}}); m.(*frame.ReserveOK).Slots[0].Mapped {
		t.Fatalf("reserve over tcp maps an extent: %#v", m)
	}
	malformedBody(t, rc, rc.Net(), &frame.Read{NS: ns.ID(), Keys: keys})
	if m := rawRead(t, rc, 10, &frame.Read{NS: ns.ID(), Keys: keys[:1]}); !m.(*frame.Page).Found || !bytes.Equal(m.(*frame.Page).Data, data[0]) {
		t.Fatalf("read after a malformed frame: %#v", m)
	}
	oversizedFrameHangsUp(t, rc, rc.Net(), frame.OpRead)
	expiredLeaseThenGet(ctx, t, ns, keys, data)
	if !c.RawActive() {
		t.Fatal("raw plane dropped by the node's error answers")
	}
}

// cutProxy forwards tcp connections to target; the first connection's
// answers are cut after limit bytes (both directions closed), or with flip
// set have the byte at limit inverted; later connections pass whole.
type cutProxy struct {
	lis    net.Listener
	target string
	limit  int64
	flip   bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	n      int        // connections accepted; guarded by mu
	conns  []net.Conn // guarded by mu
}

func startCutProxy(t *testing.T, target string, limit int64, flip bool) *cutProxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, target: target, limit: limit, flip: flip}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		lis.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.n++
		cut := p.n == 1
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(out, in)
			out.Close()
		}()
		go func() {
			defer p.wg.Done()
			if cut && p.flip {
				io.CopyN(in, out, p.limit)
				var b [1]byte
				if _, err := io.ReadFull(out, b[:]); err == nil {
					b[0] ^= 0xff
					in.Write(b[:])
				}
				io.Copy(in, out)
				in.Close()
				return
			}
			if cut {
				io.CopyN(in, out, p.limit)
				in.Close()
				out.Close()
				return
			}
			io.Copy(in, out)
			in.Close()
		}()
	}
}

// threeRawPages starts a node serving the raw plane and publishes three
// pages of a sequence (seed) through it; it returns the length of the
// handshake's Welcome frame and of one Page frame on the raw connection,
// for proxies that cut or corrupt the stream at a chosen byte.
func threeRawPages(t *testing.T, seed uint32) (n *node.Node, keys []namespace.Key, data [][]byte, welcome, pageFrame int64) {
	t.Helper()
	ctx := ctxT(t)
	n = rawNode(t, nil)
	welcome = int64(len(frame.Append(nil, 0, &frame.Welcome{Version: frame.ProtocolVersion, NodeID: n.ID(), MaxBatch: 16384})))
	ns, err := dial(t, n.Addr(), "").Open(ctx, llama())
	if err != nil {
		t.Fatal(err)
	}
	keys = ns.PageKeys(tokens(16*3, seed))
	data = pagesFor(ns, keys)
	if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
		t.Fatal(err)
	}
	pageFrame = int64(frame.HeaderSize + 6 + 4 + ns.PageBytes()) // crc32c checksums: 4 bytes
	return n, keys, data, welcome, pageFrame
}

// openVia opens the namespace on n through a client whose raw plane goes
// through p, and checks that the plane is in use.
func openVia(t *testing.T, n *node.Node, p *cutProxy) *client.Namespace {
	t.Helper()
	c := dialWith(t, n.Addr(), client.Options{RawAddr: p.lis.Addr().String()})
	ns := open(t, c)
	if !c.RawActive() {
		t.Fatal("raw plane through the proxy not in use")
	}
	return ns
}

// TestRawAnswerAfterQuietSpell: a raw connection that answered a get and
// then sat quiet for longer than the node's stall timeout still answers
// the next put. The node used to leave the get's write deadline on the
// connection: the put was stored, its answer could not be written, the
// connection closed, and the client's retry over gRPC came back Exists
// (strata-load's 8-worker put case failed so).
func TestRawAnswerAfterQuietSpell(t *testing.T) {
	ctx := ctxT(t)
	n := rawNode(t, func(c *node.Config) { c.StallTimeout = 200 * time.Millisecond })
	c := dial(t, n.Addr(), "")
	ns := open(t, c)
	if !c.RawActive() {
		t.Fatal("raw plane not in use")
	}
	keys := ns.PageKeys(tokens(16*2, 35))
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys[:1], data[:1]), client.Committed, "first put")
	if found, err := ns.Get(ctx, keys[:1], pageBufs(ns, 1), nil); err != nil || !found[0] {
		t.Fatalf("get: %v, %v", found, err)
	}
	time.Sleep(500 * time.Millisecond) // a quiet spell past the stall timeout: nothing happens to wait for
	putWant(ctx, t, ns, []client.Page{{Key: keys[1], Parent: keys[0], HasParent: true, Depth: 1, Data: data[1]}}, client.Committed, "put after a quiet spell")
}

// TestRawPooledConnectionClosedByNode: a raw connection the node closed
// while it sat idle in the client's pool (the node's idle timeout shorter
// than the pool's) is not used again: the next get dials and finds its
// pages, where it used to lose the connection, miss every page and
// quarantine a healthy node.
func TestRawPooledConnectionClosedByNode(t *testing.T) {
	ctx := ctxT(t)
	n := rawNode(t, func(c *node.Config) { c.RawIdleTimeout = 200 * time.Millisecond })
	c := dial(t, n.Addr(), "")
	ns := open(t, c)
	keys := ns.PageKeys(tokens(16*4, 36))
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys, data), client.Committed, "put")
	for round := range 3 {
		bufs := pageBufs(ns, len(keys))
		found, err := ns.Get(ctx, keys, bufs, nil)
		if err != nil || slices.Contains(found, false) {
			t.Fatalf("get %d: found %v, %v", round, found, err)
		}
		for i := range keys {
			if !bytes.Equal(bufs[i], data[i]) {
				t.Fatalf("get %d: page %d differs", round, i)
			}
		}
		time.Sleep(400 * time.Millisecond) // past the node's idle timeout: it closes the pooled connection, unseen until used
	}
}

// TestRawConnectionLost: a connection that dies in the middle of a page is
// a miss (the node failed: docs/design.md §6.5), never a page reported found, nor an
// error; the next call works on a new connection.
func TestRawConnectionLost(t *testing.T) {
	ctx := ctxT(t)
	n, keys, data, welcome, pageFrame := threeRawPages(t, 33)
	// The handshake's Welcome plus the first page and half of the second.
	p := startCutProxy(t, n.RawAddr(), welcome+pageFrame+pageFrame/2, false)
	ns := openVia(t, n, p)
	bufs := pageBufs(ns, 3)
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil || slices.Contains(found, true) {
		t.Fatalf("get over a connection cut mid-page: found %v, err %v; want misses", found, err)
	}
	found, err = ns.Get(ctx, keys, bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !found[i] || !bytes.Equal(bufs[i], data[i]) {
			t.Fatalf("page %d after reconnecting: found %v", i, found[i])
		}
	}
}

// TestRawCorruptByte: a page whose bytes changed on the way is reported not
// found with ErrChecksum; its neighbours arrive intact.
func TestRawCorruptByte(t *testing.T) {
	ctx := ctxT(t)
	n, keys, data, welcome, pageFrame := threeRawPages(t, 34)
	p := startCutProxy(t, n.RawAddr(), welcome+pageFrame+pageFrame-100, true) // inside page 1's bytes
	ns := openVia(t, n, p)
	bufs := pageBufs(ns, 3)
	found, err := ns.Get(ctx, keys, bufs, nil)
	if !errors.Is(err, client.ErrChecksum) || found == nil || !found[0] || found[1] || !found[2] {
		t.Fatalf("get with a flipped byte: found %v, err %v", found, err)
	}
	if !bytes.Equal(bufs[0], data[0]) || !bytes.Equal(bufs[2], data[2]) {
		t.Fatal("intact pages differ")
	}
}
