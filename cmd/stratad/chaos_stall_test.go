//go:build chaos

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transport"
)

// The stall experiment: one node (--stall-timeout, --raw-idle-timeout and
// --reserve-ttl short) under the load on its raw plane, and three clients
// that stop half way: a gRPC Get whose client stops reading (its stream's
// window is 64 KiB, the pages it names 4 MiB), a raw-plane client that
// sends half a Put frame and stalls, and a gRPC Put stream that sends half
// a page and stalls. The node must cut all three within their timeouts
// (--stall-timeout for the gRPC streams, --raw-idle-timeout for the raw
// one), and the stalled put's reservation must be released, so that
// another client's put of the same page commits. Afterwards, with the load stopped, the pages the stalled Get
// named are deleted and the SSD tier must give back their slots (a page
// still pinned would keep its slot), no lease or reservation may be left,
// and the raw plane's half-put page must not be served.
//
// The load's own client keeps idle raw connections pooled longer than
// this node's idle timeout lets them live: it must check a pooled
// connection before use (client/frames.go, peekAfter), or its gets miss
// and quarantine the node.

const (
	stallTimeout = 2 * time.Second
	stallRawIdle = 4 * time.Second
	stallReserve = 3 * time.Second
	stallSlack   = 3 * time.Second // CPU on two shared cores
	stallPages   = 256             // 4 MiB of 16 KiB pages
)

func TestChaosStall(t *testing.T) {
	bin := buildStratad(t)
	etcdURL := freeEtcdURL(t)
	startEtcd(t, t.TempDir(), etcdURL)
	raw := freeAddr(t)
	n := &chaosNode{bin: bin, dir: t.TempDir(), etcd: etcdURL, listen: freeAddr(t),
		extra: []string{"--stall-timeout", stallTimeout.String(), "--raw-idle-timeout", stallRawIdle.String(),
			"--reserve-ttl", stallReserve.String(), "--raw-listen", raw, "--shm-socket", "off"}}
	n.start(t)
	nodes := []*chaosNode{n}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, l := dialLoad(t, ctx, n.addr, client.Options{NoShm: true, NodeTimeout: time.Second}, 1)
	ns := l.ns

	// The pages the stalled Get names: a namespace of their own, put now.
	stallDesc := chaosDesc
	stallDesc.Tenant = "chaos-stall"
	_, sns := dialOpen(t, ctx, n.addr, client.Options{NoShm: true}, 1, stallDesc)
	stallKeys, stallData := clusterPages(sns, 7, stallPages)
	res, err := sns.Put(ctx, client.ChainPages(stallKeys, stallData))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Committed {
			t.Fatalf("putting the stalled get's page %d: %v", i, r.Status)
		}
	}
	// The pages the two stalled puts leave half written.
	halfKeys, halfData := clusterPages(ns, 1<<11, 2)

	l.run(3)
	defer func() {
		if l.stop != nil {
			l.halt()
		}
	}()
	ok := l.experiment(t, "stalled readers and writers", nodes, 4*time.Second, func(t *testing.T) {
		getDone := make(chan string, 1)
		rawDone := make(chan string, 1)
		putDone := make(chan string, 1)
		go func() { getDone <- stallGet(t, ctx, n.addr, sns.ID(), stallKeys) }()
		go func() { rawDone <- stallRawPut(t, raw, ns.ID(), halfKeys[0], halfData[0]) }()
		go func() { putDone <- stallPut(t, ctx, n.addr, ns, halfKeys[1], halfData[1]) }()
		for _, ch := range []chan string{getDone, rawDone, putDone} {
			t.Log("chaos stall: " + <-ch)
		}
	})
	l.halt()
	l.stop = nil

	// Nothing left pinned, leased or reserved.
	before := nodeInfoTier(t, n.addr, pb.Tier_TIER_SSD)
	deleted, err := sns.Delete(ctx, stallKeys)
	if err != nil {
		t.Fatal(err)
	}
	// Every slot is one page's: a page still pinned when deleted keeps its
	// slot until unpinned, so bytes per page would stay higher. The SSD
	// tier frees slots in the background (each clear synced): wait for it.
	var after *pb.TierStats
	settled := func() bool {
		return after.GetUsedBytes()*before.GetPages() == before.GetUsedBytes()*after.GetPages()
	}
	began := time.Now()
	poll.Within(10*time.Second, 100*time.Millisecond, func() bool { // checked below
		after = nodeInfoTier(t, n.addr, pb.Tier_TIER_SSD)
		return settled()
	})
	info := nodeInfo(t, n.addr)
	t.Logf("chaos stall: deleted the stalled get's %d pages: SSD tier %d pages %d bytes before, %d pages %d bytes %v after; "+
		"node leases %d, reservations %d", deleted, before.GetPages(), before.GetUsedBytes(), after.GetPages(),
		after.GetUsedBytes(), time.Since(began).Round(time.Millisecond), info.GetLeasesActive(), info.GetReservations())
	if deleted != stallPages || before.GetPages()-after.GetPages() != stallPages || !settled() {
		t.Errorf("the stalled get's pages did not all give back their slots within 10s (a pin left?)")
	}
	if info.GetLeasesActive() != 0 || info.GetReservations() != 0 {
		t.Errorf("%d leases and %d reservations left after the stalls", info.GetLeasesActive(), info.GetReservations())
	}
	if got := readAll(t, ctx, ns, halfKeys[:1]); got != 0 {
		t.Errorf("the raw plane's half-put page served")
	}
	if got := readAll(t, ctx, ns, halfKeys[1:]); got != 1 {
		t.Errorf("the page put again after the stalled gRPC put: not served")
	}
	if !ok {
		t.Log("see the figures above")
	}
}

// stallGet opens a Get stream for keys and does not read it for
// stallTimeout+stallSlack; then it reads what is left and says how many
// pages came and how the stream ended. The node must have cut the
// connection by then.
func stallGet(t *testing.T, ctx context.Context, addr string, id namespace.ID, keys []namespace.Key) string {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Error(err)
		return err.Error()
	}
	defer cc.Close()
	req := &pb.GetRequest{NamespaceId: id[:]}
	for _, k := range keys {
		req.Keys = append(req.Keys, k[:])
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewStrataClient(cc).Get(sctx, req)
	if err != nil {
		t.Error(err)
		return err.Error()
	}
	began := time.Now()
	cut := waitLeaves(cc, connectivity.Ready, stallTimeout+stallSlack)
	pages, bytes := 0, 0
	for {
		m, err := stream.Recv()
		if err != nil {
			if err == io.EOF || cut < 0 {
				t.Errorf("the stalled get was not cut within %v (stream ended: %v)", stallTimeout+stallSlack, err)
			}
			return fmt.Sprintf("gRPC get of %d pages that stopped reading: connection cut by the node: %s, having got %d pages' headers (%d bytes); the stream ended: %v",
				len(keys), cutText(cut, stallTimeout+stallSlack), pages, bytes, errShort(err))
		}
		if m.GetHeader() != nil {
			pages++
		}
		bytes += len(m.GetData())
		if time.Since(began) > time.Minute {
			t.Error("the stalled get's stream did not end")
			return "not ended"
		}
	}
}

// waitLeaves waits up to limit for cc to leave state and says how long
// that took (-1: it did not).
func waitLeaves(cc *grpc.ClientConn, state connectivity.State, limit time.Duration) time.Duration {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != state; s = cc.GetState() { // connecting
		if !cc.WaitForStateChange(ctx, s) {
			return -1
		}
	}
	if !cc.WaitForStateChange(ctx, state) {
		return -1
	}
	return time.Since(began)
}

// stallRawPut says hello on the raw plane, sends half of a Put frame for
// key and waits for the node to close the connection (at most
// stallRawIdle+stallSlack).
func stallRawPut(t *testing.T, addr string, id namespace.ID, key namespace.Key, data []byte) string {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Error(err)
		return err.Error()
	}
	defer nc.Close()
	c := transport.NewStreamConn(nc, frame.DefaultMaxFrame)
	if err := c.Send(1, &frame.Hello{Version: frame.ProtocolVersion}); err != nil {
		t.Error(err)
		return err.Error()
	}
	if _, m, err := c.Recv(); err != nil {
		t.Error(err)
		return err.Error()
	} else if _, ok := m.(*frame.Welcome); !ok {
		t.Errorf("raw hello answered %T", m)
		return "no welcome"
	}
	put := &frame.Put{NS: id, Page: frame.PageSpec{Key: key, Size: int64(len(data))}, Checksum: make([]byte, 32), Data: data}
	head, err := frame.AppendHead(nil, 2, put)
	if err != nil {
		t.Error(err)
		return err.Error()
	}
	if _, err := nc.Write(append(head, data[:len(data)/2]...)); err != nil {
		t.Error(err)
		return err.Error()
	}
	began := time.Now()
	nc.SetReadDeadline(began.Add(stallRawIdle + stallSlack))
	_, err = nc.Read(make([]byte, 1))
	took := time.Since(began)
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Errorf("the raw connection with half a frame was not closed within %v: %v", stallRawIdle+stallSlack, err)
	}
	return fmt.Sprintf("raw-plane put stalled after %d of %d bytes of its frame: closed by the node %v later (%v)",
		len(head)+len(data)/2, len(head)+len(data), took.Round(time.Millisecond), errShort(err))
}

// stallPut opens a gRPC Put stream, sends key's header and half its bytes,
// and stalls for stallReserve+stallSlack; then other puts the same page,
// which must commit (the stalled reservation's deadline has passed), and
// the stream is cancelled (the client giving up). It says whether the
// node cut the stalled stream meanwhile: it does not (--stall-timeout
// covers only a Get's sending), and that is printed, not a failure.
func stallPut(t *testing.T, ctx context.Context, addr string, other *client.Namespace, key namespace.Key, data []byte) string {
	id := other.ID()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Error(err)
		return err.Error()
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewStrataClient(cc).Put(sctx)
	if err != nil {
		t.Error(err)
		return err.Error()
	}
	err = stream.Send(&pb.PutRequest{NamespaceId: id[:], Header: &pb.PutHeader{
		Page: &pb.PageSpec{Key: key[:], Size: uint64(len(data))}, Checksum: make([]byte, 32)}, Data: data[:len(data)/2]})
	if err != nil {
		t.Error(err)
		return err.Error()
	}
	cut := waitLeaves(cc, connectivity.Ready, stallReserve+stallSlack)
	if cut < 0 {
		t.Errorf("the stalled put stream was not cut within %v", stallReserve+stallSlack)
	}
	// Past the reservation's deadline another client puts the same page:
	// it commits only if the stalled stream's reservation was released.
	ns := other
	res, err := ns.Put(ctx, client.ChainPages([]namespace.Key{key}, [][]byte{data}))
	status := "error " + errShort(err)
	if err == nil {
		status = res[0].Status.String()
		if res[0].Status != client.Committed {
			t.Errorf("a put of the stalled put's page after its reservation's deadline: %v, want committed", res[0].Status)
		}
	}
	cancel()
	return fmt.Sprintf("gRPC put stream stalled after %d of %d bytes of its page: connection cut by the node: %s; "+
		"another client's put of that page %v later: %s", len(data)/2, len(data), cutText(cut, stallReserve+stallSlack),
		stallReserve+stallSlack, status)
}

// cutText says when a connection was cut (d < 0: not within limit).
func cutText(d, limit time.Duration) string {
	if d < 0 {
		return fmt.Sprintf("no, not within %v", limit)
	}
	return d.Round(time.Millisecond).String() + " after the stall"
}

// errShort is err's message, cut to its first 120 bytes.
func errShort(err error) string {
	if err == nil {
		return "no error"
	}
	msg := err.Error()
	if len(msg) > 120 {
		msg = msg[:120] + "..."
	}
	return strings.TrimSpace(msg)
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
