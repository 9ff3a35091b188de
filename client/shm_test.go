//go:build linux

package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// shmNode starts a node whose shm socket is at a known path.
func shmNode(t *testing.T, mod func(*node.Config)) (*node.Node, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	n := startNode(t, func(c *node.Config) {
		c.ShmSocket = sock
		if mod != nil {
			mod(c)
		}
	})
	return n, sock
}

// openShm dials n, opens the llama namespace and fails t unless the client
// uses shared memory.
func openShm(t *testing.T, n *node.Node) (*client.Client, *client.Namespace) {
	t.Helper()
	c := dial(t, n.Addr(), "")
	ns, err := c.Open(ctxT(t), llama())
	if err != nil || !c.ShmActive() {
		t.Fatalf("open: %v, shm %v", err, c.ShmActive())
	}
	return c, ns
}

// TestShmRoundTrip: a client on the node's host finds the socket by
// convention, puts and gets through shared memory byte-exact, and a tcp
// client reads the very same bytes.
func TestShmRoundTrip(t *testing.T) {
	n, _ := shmNode(t, nil)
	ctx := ctxT(t)
	c := dial(t, n.Addr(), "")
	ns, err := c.Open(ctx, llama())
	if err != nil {
		t.Fatal(err)
	}
	if !c.ShmActive() {
		t.Fatal("client on the node's host is not using shared memory")
	}
	keys := ns.PageKeys(tokens(16*12, 3))
	data := pagesFor(ns, keys)
	for i := range data {
		data[i][i] ^= 0x5a // pages differ beyond their key prefix
	}
	putWant(ctx, t, ns, client.ChainPages(keys[:10], data[:10]), client.Committed, "put")
	putWant(ctx, t, ns, client.ChainPages(keys[:1], data[:1]), client.Exists, "second put")
	wantBytesIn(t, n, 10*ns.PageBytes())
	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil || lr.HitPrefix != 10 || lr.Lease == nil || lr.Lease.Pages != 10 {
		t.Fatalf("lookup: %+v %v", lr, err)
	}
	if got := c.ShmLookups(); got != 1 {
		t.Fatalf("%d lookups answered through shared memory, want 1", got)
	}
	tcp := dialWith(t, n.Addr(), client.Options{NoShm: true})
	tns := open(t, tcp)
	if tcp.ShmActive() {
		t.Fatal("NoShm client uses shared memory")
	}
	for _, tc := range []struct {
		name  string
		ns    *client.Namespace
		lease *client.Lease
	}{{"shm", ns, lr.Lease}, {"shm, no lease", ns, nil}, {"tcp", tns, nil}} {
		bufs := make([][]byte, len(keys))
		for i := range bufs {
			bufs[i] = make([]byte, ns.PageBytes())
		}
		found, err := tc.ns.Get(ctx, keys, bufs, tc.lease)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range keys {
			if found[i] != (i < 10) || (i < 10 && !bytes.Equal(bufs[i], data[i])) {
				t.Fatalf("%s: page %d found=%v, bytes equal %v", tc.name, i, found[i], bytes.Equal(bufs[i], data[i]))
			}
		}
	}
	// A buffer too small is the caller's error, not a broken session.
	if _, err := ns.Get(ctx, keys[:1], [][]byte{make([]byte, 10)}, nil); !errors.Is(err, client.ErrBufferTooSmall) {
		t.Fatalf("small buffer: %v", err)
	}
	if !c.ShmActive() {
		t.Fatal("session broken by a caller error")
	}
	// A page deleted is a miss.
	if _, err := ns.Delete(ctx, keys[:1]); err != nil {
		t.Fatal(err)
	}
	if found, err := ns.Get(ctx, keys[:1], [][]byte{make([]byte, ns.PageBytes())}, nil); err != nil || found[0] {
		t.Fatalf("deleted page: found %v, %v", found, err)
	}
}

// TestShmFallback: without the socket (disabled, or a path where no node
// listens) the client works over tcp, silently.
func TestShmFallback(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.ShmSocket = "off" })
	ctx := ctxT(t)
	for _, opts := range []client.Options{{}, {ShmSocket: filepath.Join(t.TempDir(), "none.sock")}} {
		c, err := client.Dial(ctx, n.Addr(), opts)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := c.Open(ctx, llama())
		if err != nil {
			t.Fatal(err)
		}
		if c.ShmActive() {
			t.Fatal("shm active without a socket")
		}
		keys := ns.PageKeys(tokens(16*2, 4))
		data := pagesFor(ns, keys)
		if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
			t.Fatal(err)
		}
		bufs := [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes())}
		if found, err := ns.Get(ctx, keys, bufs, nil); err != nil || !found[0] || !bytes.Equal(bufs[1], data[1]) {
			t.Fatalf("get over tcp: %v %v", found, err)
		}
		c.Close()
	}
}

// TestShmOtherNodeSocket: a socket that belongs to another node is not
// used (the Welcome names the wrong node id).
func TestShmOtherNodeSocket(t *testing.T) {
	_, sockA := shmNode(t, nil)
	b := startNode(t, func(c *node.Config) { c.ShmSocket = "off" })
	c, err := client.Dial(ctxT(t), b.Addr(), client.Options{ShmSocket: sockA})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Open(ctxT(t), llama()); err != nil {
		t.Fatal(err)
	}
	if c.ShmActive() {
		t.Fatal("client maps another node's arena")
	}
}

// shmRaw opens an shm control connection and says hello with token.
func shmRaw(t *testing.T, sock, token string) (*transport.Conn, frame.Message) {
	t.Helper()
	c, m, fds := shmHello(t, sock, token)
	closeTestFDs(fds)
	return c, m
}

// shmHello dials the shm socket and says hello with token: the connection
// (closed with the test), the answer and the fds that came with it.
func shmHello(t *testing.T, sock, token string) (*transport.Conn, frame.Message, []int) {
	t.Helper()
	uc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c := transport.NewConn(uc.(*net.UnixConn), 0)
	t.Cleanup(func() { c.Close() })
	if err := c.Send(1, &frame.Hello{Version: frame.ProtocolVersion, Token: token}); err != nil {
		t.Fatal(err)
	}
	_, m, fds, err := c.RecvFDs(2)
	if err != nil {
		t.Fatal(err)
	}
	return c, m, fds
}

func shmCall(t *testing.T, c *transport.Conn, id uint64, m frame.Message) frame.Message {
	t.Helper()
	if err := c.Send(id, m); err != nil {
		t.Fatal(err)
	}
	got, resp, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got != id {
		t.Fatalf("answer to %d for request %d", got, id)
	}
	return resp
}

func wantCode(t *testing.T, what string, m frame.Message, code frame.Code) {
	t.Helper()
	e, ok := m.(*frame.Error)
	if !ok || e.Code != code {
		t.Fatalf("%s: answer %#v, want error code %d", what, m, code)
	}
	t.Logf("%s: %v", what, e)
}

// TestShmBadInput: a wrong token, malformed frames, an unknown or foreign
// namespace, an expired lease and oversized batches get clear errors, and
// the page stored before reads back intact afterwards.
func TestShmBadInput(t *testing.T) {
	n, sock := shmNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "acme", "token-b": "other"}
		c.ShmTenants = []string{"acme", "other"}
		c.MaxBatch = 8
	})
	ctx := ctxT(t)
	c, ns, keys, data := twoPagesOver(ctx, t, n, "shm", (*client.Client).ShmActive)

	_, m := shmRaw(t, sock, "wrong")
	wantCode(t, "wrong token", m, frame.CodeUnauthenticated)

	rc, m := shmRaw(t, sock, "token-b")
	if _, ok := m.(*frame.Welcome); !ok {
		t.Fatalf("hello with a good token: %#v", m)
	}
	wantCode(t, "foreign namespace", shmCall(t, rc, 2, &frame.Get{NS: ns.ID(), Keys: keys}), frame.CodeDenied)
	wantCode(t, "unknown namespace", shmCall(t, rc, 3, &frame.Get{NS: namespace.ID{9}, Keys: keys}), frame.CodeNamespaceNotFound)

	rc, _ = shmRaw(t, sock, "token-a")
	wantCode(t, "empty batch", shmCall(t, rc, 4, &frame.Get{NS: ns.ID()}), frame.CodeBadRequest)
	wantCode(t, "oversized get", shmCall(t, rc, 5, &frame.Get{NS: ns.ID(), Keys: make([]namespace.Key, 9)}), frame.CodeBatchTooLarge)
	wantCode(t, "oversized reserve", shmCall(t, rc, 6, &frame.Reserve{NS: ns.ID(), Pages: make([]frame.PageSpec, 9)}), frame.CodeBatchTooLarge)
	wantCode(t, "bad page size", shmCall(t, rc, 7, &frame.Reserve{NS: ns.ID(), Pages: make([]frame.PageSpec, 1)}), frame.CodeBadRequest)
	wantCode(t, "unknown lease", shmCall(t, rc, 8, &frame.Get{NS: ns.ID(), Lease: 42, Keys: keys}), frame.CodeLeaseNotFound)
	malformedBody(t, rc, rc.Unix(), &frame.Get{NS: ns.ID(), Keys: keys})
	// A commit of a write id never issued answers UNKNOWN_WRITE.
	if m := shmCall(t, rc, 10, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{{WriteID: 77, Size: 1}}}); m.(*frame.CommitOK).Statuses[0] != uint8(client.UnknownWrite) {
		t.Fatalf("unknown write: %#v", m)
	}
	oversizedFrameHangsUp(t, rc, rc.Unix(), frame.OpGet)
	expiredLeaseThenGet(ctx, t, ns, keys, data) // nothing lost: the pages read back intact
	if !c.ShmActive() {
		t.Fatal("session broken by the node's error answers")
	}
}

var _ = context.Background

// TestShmOtherTiers: with a host tier too small for the pages, puts whose
// reservations land on the SSD tier send their bytes over tcp and gets of
// pages there read them over tcp, inside the same shm calls; every page
// reads back byte-exact.
func TestShmOtherTiers(t *testing.T) {
	n, _ := shmNode(t, func(c *node.Config) {
		c.Tiers = []string{"host", "ssd"}
		c.HostBytes = 1 << 20 // 64 pages of 16 KiB
		c.SSDBytes = 16 << 20
	})
	checkOtherTiers(t, n, (*client.Client).ShmActive, 11)
}

// checkOtherTiers puts 200 pages through a node whose host tier holds 64,
// so most land on its SSD tier, and reads them back under a lease (as an
// engine reads: without one the mover may demote a page between the lookup
// and the copy, which reads as a miss); every page must come back
// byte-exact, over the transport active reports in use.
func checkOtherTiers(t *testing.T, n *node.Node, active func(*client.Client) bool, seed uint32) {
	t.Helper()
	ctx := ctxT(t)
	c := dial(t, n.Addr(), "")
	ns, err := c.Open(ctx, llama())
	if err != nil || !active(c) {
		t.Fatalf("open: %v, transport in use %v", err, active(c))
	}
	keys := ns.PageKeys(tokens(16*200, seed))
	data := pagesFor(ns, keys)
	for i := range data {
		data[i][100] = byte(i)
	}
	for start := 0; start < len(keys); start += 50 {
		res, err := ns.Put(ctx, client.ChainPages(keys[start:start+50], data[start:start+50]))
		mustStore(t, fmt.Sprintf("put from page %d", start), res, err)
	}
	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil || lr.HitPrefix != len(keys) || lr.Lease == nil {
		t.Fatalf("lookup: hit %d of %d, %v", lr.HitPrefix, len(keys), err)
	}
	defer lr.Lease.Release(ctx)
	bufs := pageBufs(ns, len(keys))
	found, err := ns.Get(ctx, keys, bufs, lr.Lease)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !found[i] || !bytes.Equal(bufs[i], data[i]) {
			t.Fatalf("page %d: found %v, bytes equal %v", i, found[i], bytes.Equal(bufs[i], data[i]))
		}
	}
	if !active(c) {
		t.Fatal("the transport broke during the test")
	}
}

// TestShmNodeGoneUnmaps: gets served from the location cache ask the node
// nothing, yet once the node is gone the session notices (its idle
// connection closed, no new one to be had), stops reading the dead node's
// arena and unmaps it: the pages are misses, and the client does not keep
// the dead node's memory.
func TestShmNodeGoneUnmaps(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	tn := addNodeWith(t, nil, func(c *node.Config) { c.ShmSocket = sock })
	ctx := ctxT(t)
	c, ns := openShm(t, tn.Node)
	keys := ns.PageKeys(tokens(16*4, 9))
	putWant(ctx, t, ns, client.ChainPages(keys, pagesFor(ns, keys)), client.Committed, "put")
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	if found, err := ns.Get(ctx, keys, bufs, nil); err != nil || !found[0] {
		t.Fatalf("get: %v %v", found, err)
	}
	tn.Close()
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the client to stop using the gone node's arena", func() bool {
		found, _ := ns.Get(ctx, keys, bufs, nil)
		return !found[0] && !c.ShmActive()
	})
}

// TestPutFromPieces: a Put whose pages are registered in a Pieces puts
// each page's pieces: over shared memory straight into the arena, over raw
// tcp straight to the socket, in one call (3 pages) and in two (17: a
// reservation, then Write frames), their staging buffers never written;
// over gRPC gathered into the buffer first. Either way a tcp client reads
// back the page the pieces make. Pieces that do not add up to a page are
// refused with nothing sent.
func TestPutFromPieces(t *testing.T) {
	n, _ := shmNode(t, nil)
	ctx := ctxT(t)
	_, shmNS := openShm(t, n)
	tcp := dialWith(t, n.Addr(), client.Options{NoShm: true})
	tcpNS := open(t, tcp)
	rpcNS := open(t, dialWith(t, n.Addr(), client.Options{NoShm: true, NoRaw: true}))
	for k, tc := range []struct {
		name     string
		ns       *client.Namespace
		pages    int
		gathered bool
	}{{"shm", shmNS, 3, false}, {"raw tcp, one call", tcpNS, 3, false}, {"raw tcp, two calls", tcpNS, 17, false},
		{"grpc", rpcNS, 3, true}} {
		keys := tc.ns.PageKeys(tokens(16*tc.pages, 40+uint32(k)))
		data := pagesFor(tc.ns, keys)
		pcs := client.NewPieces()
		pages := client.ChainPages(keys, make([][]byte, len(keys)))
		for i := range pages {
			pages[i].Data = make([]byte, tc.ns.PageBytes())
			cut := 100 + 512*i
			pcs.Add(pages[i].Data, [][]byte{data[i][:cut], data[i][cut : cut+10], nil, data[i][cut+10:]})
		}
		putWant(client.WithPieces(ctx, pcs), t, tc.ns, pages, client.Committed, tc.name)
		bufs := make([][]byte, len(keys))
		for i := range bufs {
			bufs[i] = make([]byte, tc.ns.PageBytes())
		}
		found, err := tcpNS.Get(ctx, keys, bufs, nil)
		if err != nil {
			t.Fatalf("%s: get: %v", tc.name, err)
		}
		for i := range keys {
			if !found[i] || !bytes.Equal(bufs[i], data[i]) {
				t.Fatalf("%s: page %d found %v, bytes equal %v", tc.name, i, found[i], bytes.Equal(bufs[i], data[i]))
			}
			if staged := bytes.Equal(pages[i].Data, data[i]); staged != tc.gathered {
				t.Fatalf("%s: page %d's buffer holds the page %v, want %v", tc.name, i, staged, tc.gathered)
			}
		}
		if one, two := tcp.RawPuts(); tc.name == "raw tcp, two calls" && (one != 1 || two != 1) {
			t.Fatalf("%s: raw put batches %d in one call, %d in two; want 1 and 1", tc.name, one, two)
		}
		short := client.NewPieces()
		bad := []client.Page{{Key: tc.ns.PageKeys(tokens(16, 90+uint32(k)))[0], Data: make([]byte, tc.ns.PageBytes())}}
		short.Add(bad[0].Data, [][]byte{data[0][:100]})
		if _, err := tc.ns.Put(client.WithPieces(ctx, short), bad); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("%s: pieces short of a page: %v", tc.name, err)
		}
	}
}

// TestGetIntoPieces: a Get whose pages are registered in a Pieces reads
// them straight into their pieces (Written) over shared memory, from the
// node's answer and from the location cache, and over raw tcp, CRC-32C
// and SHA-256 pages alike, each verified as it arrives; over gRPC the page
// lands in its buffer as always, and Written says so.
func TestGetIntoPieces(t *testing.T) {
	n, _ := shmNode(t, nil)
	ctx := ctxT(t)
	shmC, ns := openShm(t, n)
	keys := ns.PageKeys(tokens(16*3, 21))
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys, data), client.Committed, "put")
	sha := llama()
	sha.Checksum = namespace.SHA256
	shaNS, err := shmC.Open(ctx, sha)
	if err != nil {
		t.Fatal(err)
	}
	shaKeys := shaNS.PageKeys(tokens(16*3, 22))
	shaData := pagesFor(shaNS, shaKeys)
	putWant(ctx, t, shaNS, client.ChainPages(shaKeys, shaData), client.Committed, "put sha-256")
	tcp := dialWith(t, n.Addr(), client.Options{NoShm: true})
	shaTCP, err := tcp.Open(ctx, sha)
	if err != nil {
		t.Fatal(err)
	}
	rpc := dialWith(t, n.Addr(), client.Options{NoShm: true, NoRaw: true})
	for _, tc := range []struct {
		name    string
		ns      *client.Namespace
		keys    []namespace.Key
		data    [][]byte
		written bool
	}{{"shm", ns, keys, data, true}, {"shm, cached", ns, keys, data, true}, {"raw tcp", open(t, tcp), keys, data, true},
		{"raw tcp, sha-256", shaTCP, shaKeys, shaData, true}, {"grpc", open(t, rpc), keys, data, false}} {
		bufs := make([][]byte, len(tc.keys))
		pieces := make([][][]byte, len(tc.keys))
		pcs := client.NewPieces()
		for i := range tc.keys {
			bufs[i] = make([]byte, ns.PageBytes())
			cut := 100 + i
			pieces[i] = [][]byte{make([]byte, cut), make([]byte, ns.PageBytes()/2-cut), make([]byte, ns.PageBytes()-ns.PageBytes()/2)}
			pcs.Add(bufs[i], pieces[i])
		}
		found, err := tc.ns.Get(client.WithPieces(ctx, pcs), tc.keys, bufs, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range tc.keys {
			got := bufs[i]
			if pcs.Written(bufs[i]) {
				got = bytes.Join(pieces[i], nil)
			}
			if !found[i] || pcs.Written(bufs[i]) != tc.written || !bytes.Equal(got, tc.data[i]) {
				t.Fatalf("%s: page %d found %v, written %v (want %v), bytes equal %v", tc.name, i, found[i],
					pcs.Written(bufs[i]), tc.written, bytes.Equal(got, tc.data[i]))
			}
		}
	}
}
