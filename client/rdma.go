package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/rdma"
)

// The rdma plane (package rdma; rpc Rdma in strata.proto; server/rdma.go):
// a client allowed to (Options.RDMA) reads the pages of a node that
// advertises the plane in its OpenNamespace answer with RDMA READ from the
// node's host arena, into a registered buffer of its own, then copies them
// into the caller's buffers. It serves gets only: a lookup carries no page
// bytes, and puts go on the next plane (ok false hands them on).
//
// The plane is chosen at Open, per node: when the node does not advertise
// it (no device, built without the rdma tag, a tenant that may not read
// the arena, an older node), when this client cannot open its device
// (built without the tag, none present, none of that name) or when the
// queue pair cannot be connected, calls use the next plane (raw tcp, then
// gRPC; plane.go orders them), and the reason is logged and counted
// (Client.RDMAFallbacks). A later Open tries again, at most every
// retryAfter.
//
// A get is one round trip on the session's Rdma stream, which locates the
// pages (under the caller's lease, if any), then RDMA READs of the pages
// in the arena. A page not under a lease may be reclaimed while it is
// read: a remote reader has no generation word to re-check, so every page
// read is checked against the checksum the node located it with, and one
// that does not match (reclaimed meanwhile), like one outside the arena
// (another tier) or larger than the buffer, is read on the next plane. A
// session whose stream or queue pair fails, or whose call's context ends
// mid-request, is broken: the call goes to the next plane and the next
// Open starts a new session.

// rdmaBuffer is the size of a session's registered buffer: a get reads
// this much at a time; a larger page goes on the next plane.
const rdmaBuffer = 8 << 20

// RDMAFallbacks counts, by reason, the times a client allowed the rdma
// plane (Options.RDMA) used the next plane for a node instead.
type RDMAFallbacks struct {
	// Peer: the node did not advertise the plane.
	Peer int64
	// Device: this client could not open its RDMA device or register its
	// buffer.
	Device int64
	// Connect: the queue pair could not be connected, or a session broke.
	Connect int64
}

// rdmaCounts is the client's RDMAFallbacks, shared by its node
// connections.
type rdmaCounts struct{ peer, device, connect atomic.Int64 }

// RDMAFallbacks is how many times, by reason, the client used the next
// plane for a node instead of the rdma plane.
func (c *Client) RDMAFallbacks() RDMAFallbacks {
	f := c.opts.rdmaCounts
	return RDMAFallbacks{Peer: f.peer.Load(), Device: f.device.Load(), Connect: f.connect.Load()}
}

// RDMAActive reports whether the client has connections to nodes and
// reads each one's pages over the rdma plane.
func (c *Client) RDMAActive() bool {
	return c.everyNode(func(nc *nodeClient) bool {
		s := nc.rdma.Load()
		return s != nil && !s.broken.Load()
	})
}

// rdmaSession is a connected queue pair to one node, its registered
// buffer and the Rdma stream that locates pages.
type rdmaSession struct {
	nodeID string
	pages  atomic.Int64 // pages read over the plane
	broken atomic.Bool
	// broke counts and logs a session that failed in use (fail).
	broke func(error)

	// mu serialises calls: the stream carries one request at a time, the
	// buffer and the pair one batch.
	mu     sync.Mutex
	dev    *rdma.Device
	buf    *rdma.Region
	pair   *rdma.Pair
	stream pb.Strata_RdmaClient
	cancel context.CancelFunc // ends the stream
}

// startRDMA records, after an Open, whether the node advertised the rdma
// plane (advert), and starts a session when it did and the client may use
// it; otherwise it records why not.
func (c *nodeClient) startRDMA(advert *pb.RdmaPlane, nodeID string) {
	if !c.rdmaAllowed {
		return
	}
	c.rdmaAdvert.Store(advert)
	if advert == nil {
		c.rdmaFallback(&c.rdmaCounts.peer, "the node does not advertise the rdma plane", nodeID, nil)
		return
	}
	c.rdmaSession(nodeID)
}

// rdmaSession is the node's rdma session, or nil: it starts one when the
// node advertised the plane and none works, at most every retryAfter.
func (c *nodeClient) rdmaSession(nodeID string) *rdmaSession {
	if s := c.rdma.Load(); s != nil && !s.broken.Load() && s.nodeID == nodeID {
		return s
	}
	if c.rdmaAdvert.Load() == nil || nodeID == "" || !c.rdmaDue() {
		return nil // the common case of a node without the plane takes no lock
	}
	c.rdmaMu.Lock()
	defer c.rdmaMu.Unlock()
	if s := c.rdma.Load(); s != nil {
		if !s.broken.Load() && s.nodeID == nodeID {
			return s
		}
		c.rdma.Store(nil)
		c.bg.Go(func() { _ = s.close() }) // once the calls using it are done
	}
	if !c.rdmaDue() {
		return nil
	}
	c.rdmaTried.Store(time.Now().UnixNano())
	s := &rdmaSession{nodeID: nodeID, broke: func(err error) {
		c.rdmaFallback(&c.rdmaCounts.connect, "the rdma session broke", nodeID, err)
	}}
	if err := s.open(c.rdmaConfig); err != nil {
		_ = s.close() // what opened is released; the open's error says why
		c.rdmaFallback(&c.rdmaCounts.device, "this client's rdma device is not usable", nodeID, err)
		return nil
	}
	if err := s.connect(c.rpc); err != nil {
		_ = s.close()
		c.rdmaFallback(&c.rdmaCounts.connect, "the rdma queue pair did not connect", nodeID, err)
		return nil
	}
	c.rdma.Store(s)
	c.log.Info("rdma: reading pages over the rdma plane", "node", nodeID, "device", c.rdmaAdvert.Load().GetDevice())
	return s
}

// rdmaDue reports whether retryAfter has passed since a session was last
// started.
func (c *nodeClient) rdmaDue() bool {
	return time.Since(time.Unix(0, c.rdmaTried.Load())) >= retryAfter
}

// rdmaFallback counts and logs why the node's calls use the next plane.
func (c *nodeClient) rdmaFallback(count *atomic.Int64, why, nodeID string, err error) {
	count.Add(1)
	c.log.Info("rdma: using the next plane: "+why, "node", nodeID, "err", err)
}

// rdmaFor is the rdma session for this namespace's node, or nil.
func (n *nodeNS) rdmaFor() *rdmaSession { return n.c.rdmaSession(n.nodeID) }

// open opens the device and makes the buffer and the queue pair.
func (s *rdmaSession) open(cfg rdma.Config) error {
	var err error
	if s.dev, err = rdma.Open(cfg); err != nil {
		return err
	}
	if s.buf, err = s.dev.Alloc(rdmaBuffer); err != nil {
		return err
	}
	s.pair, err = s.dev.Pair()
	return err
}

// connect opens the Rdma stream and swaps endpoints with the node, within
// handshakeLimit.
func (s *rdmaSession) connect(rpc pb.StrataClient) error {
	local, err := s.pair.Local(nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	limit := time.AfterFunc(handshakeLimit, cancel)
	defer limit.Stop()
	if s.stream, err = rpc.Rdma(ctx); err != nil {
		return fromRPC("rdma", err)
	}
	// Send says io.EOF when the node ended the stream first: Recv says why.
	if err := s.stream.Send(&pb.RdmaRequest{Connect: pbconv.RdmaEndpointProto(local)}); err != nil && err != io.EOF {
		return fromRPC("rdma connect", err)
	}
	resp, err := s.stream.Recv()
	if err != nil {
		return fromRPC("rdma connect", err)
	}
	remote, err := pbconv.RdmaEndpoint(resp.GetConnect())
	if err != nil || remote.Size == 0 {
		return fmt.Errorf("rdma connect: the node exposes no memory (%v): %w", err, ErrProtocol)
	}
	if !limit.Stop() {
		return fmt.Errorf("rdma connect: no answer within %v", handshakeLimit)
	}
	return s.pair.Connect(remote)
}

// close ends the stream and releases the pair, the buffer and the device,
// once no call uses them.
func (s *rdmaSession) close() error {
	s.broken.Store(true)
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.pair != nil {
		errs = append(errs, s.pair.Close())
	}
	if s.buf != nil {
		errs = append(errs, s.buf.Deregister())
	}
	if s.dev != nil {
		errs = append(errs, s.dev.Close())
	}
	s.pair, s.buf, s.dev = nil, nil, nil
	return errors.Join(errs...)
}

// fail marks the session broken after err: the call goes to the next
// plane, a later one starts a new session.
func (s *rdmaSession) fail(err error) {
	if !s.broken.Swap(true) {
		s.broke(err)
	}
}

// lookup is not served here: lookups carry no page bytes.
func (s *rdmaSession) lookup(context.Context, *nodeNS, []namespace.Key, bool, time.Duration) (lookupAnswer, bool, error) {
	return lookupAnswer{}, false, nil
}

// put is not served here: puts go on the next plane.
func (s *rdmaSession) put(context.Context, *nodeNS, []Page) ([]PutResult, bool, error) {
	return nil, false, nil
}

// get locates keys on the node and reads those in its arena with RDMA
// READ; the others (another tier, a reclaimed page, a page larger than
// the buffer) are read on the next plane. ok false: the session is
// unusable, or broke before anything reached bufs.
func (s *rdmaSession) get(ctx context.Context, n *nodeNS, keys []namespace.Key, bufs [][]byte, lease *nodeLease) (found []bool, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken.Load() || s.pair == nil {
		return nil, false, nil
	}
	pages, ok, err := s.locate(ctx, n, keys, lease)
	if !ok || err != nil {
		return nil, ok, err
	}
	found = make([]bool, len(keys))
	var others []int
	if others, ok = s.read(ctx, n, pages, bufs, found); !ok {
		return nil, false, nil
	}
	if len(others) == 0 {
		return found, true, nil
	}
	if err = n.getOthers(ctx, keys, bufs, lease, others, found); err != nil {
		err = fmt.Errorf("get pages the rdma plane did not read: %w", err)
	}
	return found, true, err
}

// locate asks the node where keys lie. A refusal (a lease, a namespace)
// ends the stream with the node's error: the call has its answer, the
// session is broken. ok false: the stream failed, or ctx ended first.
func (s *rdmaSession) locate(ctx context.Context, n *nodeNS, keys []namespace.Key, lease *nodeLease) ([]*pb.RdmaPage, bool, error) {
	req := &pb.RdmaRequest{NamespaceId: n.id[:], Keys: wireKeys(keys)}
	if lease != nil {
		req.LeaseId = lease.ID
	}
	stop := context.AfterFunc(ctx, s.cancel) // the stream cannot wait past the call
	defer stop()
	err := s.stream.Send(req)
	var resp *pb.RdmaResponse
	if err == nil || err == io.EOF { // io.EOF: the node ended the stream, and Recv says why
		resp, err = s.stream.Recv()
	}
	if err != nil {
		switch {
		case ctx.Err() != nil: // the call ended, and the stream with it
			s.broken.Store(true)
		case pb.ReasonOf(err) != "": // the node refused the request and ended the stream
			s.broken.Store(true)
			return nil, true, fromRPC("get", err)
		default:
			s.fail(err)
		}
		return nil, false, nil
	}
	if len(resp.GetPages()) != len(keys) {
		s.fail(ErrProtocol)
		return nil, true, fmt.Errorf("get: %d pages located for %d keys: %w", len(resp.GetPages()), len(keys), ErrProtocol)
	}
	return resp.GetPages(), true, nil
}

// read reads the mapped pages into the buffer, as many at a time as it
// holds, checks each against its checksum and copies it to its bufs
// entry. It returns the pages to read on the next plane; ok false: the
// queue pair failed (nothing was copied to bufs that found reports).
func (s *rdmaSession) read(ctx context.Context, n *nodeNS, pages []*pb.RdmaPage, bufs [][]byte, found []bool) (others []int, ok bool) {
	mem := s.buf.Bytes()
	var ops []rdma.Op
	var idx []int
	flush := func() bool {
		if len(ops) == 0 {
			return true
		}
		if err := s.pair.Read(ctx, s.buf, ops); err != nil {
			if ctx.Err() == nil {
				s.fail(err)
			}
			s.broken.Store(true) // reads may still be in flight: the pair is not used again
			return false
		}
		for j, op := range ops {
			i := idx[j]
			if string(n.desc.Checksum.Sum(op.Buf)) != string(pages[i].GetChecksum()) {
				others = append(others, i) // reclaimed while read
				continue
			}
			copy(bufs[i], op.Buf)
			found[i] = true
			s.pages.Add(1)
		}
		ops, idx = ops[:0], idx[:0]
		return true
	}
	used := 0
	for i, p := range pages {
		size := int(p.GetLength())
		switch {
		case !p.GetFound():
			continue
		case !p.GetMapped() || size == 0 || size > len(bufs[i]) || size > len(mem):
			others = append(others, i)
			continue
		case used+size > len(mem):
			if !flush() {
				return nil, false
			}
			used = 0
		}
		ops = append(ops, rdma.Op{Off: int64(p.GetOffset()), Buf: mem[used : used+size]})
		idx = append(idx, i)
		used += size
	}
	if !flush() {
		return nil, false
	}
	return others, true
}
