//go:build linux

package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testlog"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/rdma"
)

// The rdma plane's choice, in every build: a client allowed the plane
// uses it only where the node advertises it and its own device opens,
// and otherwise reads on the next plane (raw tcp here: the nodes run
// without shm), saying why in its log and its counts. TestRDMAPlane reads
// over it where a device exists (scripts/rdma-check.sh).

// rdmaClient dials n allowed the rdma plane, with opts besides, logging
// into the returned buffer.
func rdmaClient(t *testing.T, n *node.Node, opts client.Options) (*client.Client, *testlog.Buffer) {
	t.Helper()
	var log testlog.Buffer
	opts.RDMA, opts.NoShm = true, true
	opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
	return dialWith(t, n.Addr(), opts), &log
}

// advertiseRDMA is a dial option that makes a node's OpenNamespace
// answers advertise the rdma plane, as a node serving it would: the
// client then tries its own device.
func advertiseRDMA() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := reply.(*pb.OpenNamespaceResponse); ok && err == nil && method == pb.Strata_OpenNamespace_FullMethodName {
			r.Rdma = &pb.RdmaPlane{Device: "advertised-by-the-test"}
		}
		return err
	})
}

// roundTrip puts pages through c and gets them back, without a lease and
// under one; every page must come back intact.
func roundTrip(t *testing.T, c *client.Client, seed uint32) {
	t.Helper()
	ctx := ctxT(t)
	ns := open(t, c)
	keys := ns.PageKeys(tokens(16*8, seed))
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys, data), client.Committed, "put")
	lr, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil || lr.Lease == nil {
		t.Fatalf("lookup: %+v %v", lr, err)
	}
	for _, lease := range []*client.Lease{nil, lr.Lease} {
		bufs := pageBufs(ns, len(keys))
		found, err := ns.Get(ctx, keys, bufs, lease)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if !found[i] || !bytes.Equal(bufs[i], data[i]) {
				t.Fatalf("lease %v: page %d found %v, equal %v", lease != nil, i, found[i], bytes.Equal(bufs[i], data[i]))
			}
		}
	}
}

// TestRDMAPeerLacksIt: a node asked for a device it cannot open (no such
// device, or built without the rdma tag) runs without the plane and does
// not advertise it; an allowed client counts and logs that, and reads
// over the raw plane.
func TestRDMAPeerLacksIt(t *testing.T) {
	n := rawNode(t, func(c *node.Config) { c.RDMADevice = "strata-no-such-device" })
	c, log := rdmaClient(t, n, client.Options{})
	roundTrip(t, c, 61)
	if got := c.RDMAFallbacks(); got != (client.RDMAFallbacks{Peer: 1}) {
		t.Fatalf("fallbacks %+v, want one because the peer lacks the plane", got)
	}
	if !c.RawActive() || c.RDMAActive() {
		t.Fatalf("raw %v, rdma %v; want raw only", c.RawActive(), c.RDMAActive())
	}
	if !strings.Contains(log.String(), "rdma: using the next plane: the node does not advertise the rdma plane") {
		t.Fatalf("no reason logged:\n%s", log.String())
	}
	// Asked anyway, the node answers as one that predates the plane.
	stream, err := pb.NewStrataClient(rawConn(t, n.Addr())).Rdma(ctxT(t))
	if err == nil {
		_ = stream.Send(&pb.RdmaRequest{Connect: &pb.RdmaEndpoint{Qpn: 1}}) // io.EOF when the node answered first
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("an Rdma stream to a node without the plane: %v, want UNIMPLEMENTED", err)
	}
}

// TestRDMADeviceLacksIt: a node advertises the plane, and the client's
// device does not open (built without the rdma tag, or no device of that
// name): the client counts and logs why, with the device's error, reads
// over the raw plane, and does not try again on the next Open (at most
// every few seconds).
func TestRDMADeviceLacksIt(t *testing.T) {
	n := rawNode(t, nil)
	c, log := rdmaClient(t, n, client.Options{DialOptions: []grpc.DialOption{advertiseRDMA()},
		RDMAConfig: rdma.Config{Device: "strata-no-such-device"}})
	roundTrip(t, c, 62)
	roundTrip(t, c, 63) // a second Open
	if got := c.RDMAFallbacks(); got != (client.RDMAFallbacks{Device: 1}) {
		t.Fatalf("fallbacks %+v, want one because this client's device is not usable", got)
	}
	if !c.RawActive() || c.RDMAActive() {
		t.Fatalf("raw %v, rdma %v; want raw only", c.RawActive(), c.RDMAActive())
	}
	_, want := rdma.Open(rdma.Config{Device: "strata-no-such-device"}) // this build's reason
	if want == nil || !strings.Contains(log.String(), "this client's rdma device is not usable") ||
		!strings.Contains(log.String(), strings.Join(strings.Fields(want.Error())[:3], " ")) {
		t.Fatalf("log does not say the device is not usable, and why (%v):\n%s", want, log.String())
	}
}

// TestRDMANotAllowed: without Options.RDMA the client neither tries the
// plane nor counts a fallback, advertised or not.
func TestRDMANotAllowed(t *testing.T) {
	n := rawNode(t, nil)
	c := dialWith(t, n.Addr(), client.Options{NoShm: true, DialOptions: []grpc.DialOption{advertiseRDMA()}})
	roundTrip(t, c, 64)
	if got := c.RDMAFallbacks(); got != (client.RDMAFallbacks{}) || c.RDMAActive() {
		t.Fatalf("fallbacks %+v, rdma %v; want none", got, c.RDMAActive())
	}
}

// TestRDMAPlane reads pages over the rdma plane where this build has the
// rdma tag and the machine an RDMA device (soft-RoCE serves):
// scripts/rdma-check.sh runs it. Gets without a lease and under one come
// over RDMA READ, a page reclaimed meanwhile would fail its checksum and
// come on the next plane, and the node's and the client's queue pairs and
// regions are released at Close (the leak check and the node's Close).
func TestRDMAPlane(t *testing.T) {
	dev, err := rdma.Open(rdma.Config{})
	if errors.Is(err, rdma.ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	name := dev.Name()
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	n := rawNode(t, func(c *node.Config) { c.RDMADevice = name })
	c, log := rdmaClient(t, n, client.Options{RDMAConfig: rdma.Config{Device: name}})
	roundTrip(t, c, 65)
	if !c.RDMAActive() || c.RDMAFallbacks() != (client.RDMAFallbacks{}) {
		t.Fatalf("rdma %v, fallbacks %+v; want the rdma plane\n%s", c.RDMAActive(), c.RDMAFallbacks(), log.String())
	}
	if got := c.RDMAPages(); got != 2*8 {
		t.Fatalf("%d pages read over rdma, want 16 (8 without a lease, 8 under one)", got)
	}
	// A page the node does not hold is a miss, as on every plane.
	ns := open(t, c)
	miss := ns.PageKeys(tokens(16, 66))
	found, err := ns.Get(ctxT(t), []namespace.Key{miss[0]}, pageBufs(ns, 1), nil)
	if err != nil || found[0] {
		t.Fatalf("get of a page never put: %v %v", found, err)
	}
}
