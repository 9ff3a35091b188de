package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/internal/dial"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/rdma"
	"github.com/stratakv/strata/transport"
)

// nodeClient is the connection to one node: its gRPC connection and the
// sessions of its data planes (plane.go). The Client makes one per node
// of the view, lazily.
type nodeClient struct {
	conn  *grpc.ClientConn
	rpc   pb.StrataClient
	bg    sync.WaitGroup // background aborts; close waits for them
	token string

	// shm (shm.go): shmMu serialises starting and replacing shm, and
	// guards shmTried.
	shmPath   string
	verifyShm bool
	shmMu     sync.Mutex
	shm       atomic.Pointer[shmSession]
	shmTried  time.Time

	// raw tcp data plane (raw.go): rawMu serialises replacing raw.
	addr, rawOverride    string
	dialOpts             dial.Options // TLS files for the raw plane
	noRaw, rawSkipVerify bool
	readPoll             *transport.ReadPoll // the client's, for raw-plane gets
	rawMu                sync.Mutex
	raw                  atomic.Pointer[rawSession]

	// rdma plane (rdma.go): rdmaMu serialises starting and replacing
	// rdma. rdmaAdvert is the node's last OpenNamespace advertisement (nil:
	// none, or the client may not use the plane); rdmaTried is when a
	// session was last started (unix nanoseconds).
	rdmaAllowed bool
	rdmaConfig  rdma.Config
	rdmaCounts  *rdmaCounts // the client's
	log         *slog.Logger
	rdmaMu      sync.Mutex
	rdma        atomic.Pointer[rdmaSession]
	rdmaAdvert  atomic.Pointer[pb.RdmaPlane]
	rdmaTried   atomic.Int64
}

// dialNode prepares the connection to the node at addr (host:port)
// through internal/dial. The connection is made lazily; the first call's
// context bounds it.
func dialNode(addr string, opts Options) (*nodeClient, error) {
	do := dial.Options{Token: opts.Token, MaxMessageBytes: opts.MaxMessageBytes, Bulk: true,
		CA: opts.CA, Cert: opts.Cert, Key: opts.Key, ServerName: opts.ServerName, Extra: opts.DialOptions}
	conn, err := dial.GRPC(addr, do)
	if err != nil {
		return nil, err
	}
	return &nodeClient{conn: conn, rpc: pb.NewStrataClient(conn),
		shmPath: shmPath(addr, opts), token: opts.Token, verifyShm: opts.ShmVerifyChecksums,
		addr: addr, dialOpts: do, noRaw: opts.NoRaw, rawOverride: opts.RawAddr, rawSkipVerify: opts.RawSkipVerify,
		readPoll: opts.readPoll, rdmaAllowed: opts.RDMA, rdmaConfig: opts.RDMAConfig, rdmaCounts: opts.rdmaCounts,
		log: opts.Logger}, nil
}

// Close closes the planes and the connection, after waiting for
// background aborts.
func (c *nodeClient) Close() error {
	shmErr := closeSession(&c.shmMu, &c.shm)
	c.closeRaw()
	rdmaErr := closeSession(&c.rdmaMu, &c.rdma)
	c.bg.Wait()
	return errors.Join(shmErr, rdmaErr, c.conn.Close())
}

// closeSession takes a plane's session out of cur, under mu (which
// serialises starting and replacing it), and closes it, if any.
func closeSession[S any, P interface {
	*S
	close() error
}](mu *sync.Mutex, cur *atomic.Pointer[S]) error {
	mu.Lock()
	s := P(cur.Swap(nil))
	mu.Unlock()
	if s == nil {
		return nil
	}
	return s.close()
}

// open performs the namespace handshake with the node: it validates and
// registers the descriptor (normalized and valid) and both sides agree on
// its ID and page size. It starts the node's data planes.
func (c *nodeClient) open(ctx context.Context, d namespace.Descriptor) (*nodeNS, error) {
	id := d.ID()
	var md metadata.MD // the node advertises its raw data plane here
	resp, err := c.rpc.OpenNamespace(ctx, &pb.OpenNamespaceRequest{
		Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1, Descriptor_: pbconv.DescriptorProto(d), ExpectedId: id[:]}, grpc.Header(&md))
	if err != nil {
		return nil, fromRPC("open namespace", err)
	}
	if string(resp.GetNamespaceId()) != string(id[:]) || resp.GetPageBytes() != d.PageSize() {
		return nil, fmt.Errorf("open namespace: node answered id %x, %d-byte pages; client has %s, %d: %w",
			resp.GetNamespaceId(), resp.GetPageBytes(), id, d.PageSize(), ErrVersion)
	}
	c.shmSession(resp.GetNodeId()) // start shared memory if the node is on this host
	c.startRaw(md.Get(frame.AddrHeader), resp.GetNodeId())
	c.startRDMA(resp.GetRdma(), resp.GetNodeId())
	return &nodeNS{c: c, desc: d, id: id, pageBytes: int(resp.GetPageBytes()),
		maxBatch: max(1, int(resp.GetMaxBatch())), maxChunk: max(4096, int(resp.GetMaxChunkBytes())),
		nodeID: resp.GetNodeId()}, nil
}

// nodeNS is a namespace opened on one node.
type nodeNS struct {
	c         *nodeClient
	desc      namespace.Descriptor
	id        namespace.ID
	pageBytes int
	maxBatch  int
	maxChunk  int
	nodeID    string
}

// lookupAnswer is one node's answer to a lookup of at most maxBatch keys.
type lookupAnswer struct {
	HitPrefix int
	Present   []bool
	Lease     *nodeLease // covers the hit prefix when one was asked for
}

// nodeLease is a lease one node granted.
type nodeLease struct {
	ns      *nodeNS
	ID      uint64
	Expires time.Time
	Pages   int
}

// lookup asks the node which of keys (at most maxBatch) are present, and
// with lease leases the hit prefix for ttl (0: the node's default).
func (h *nodeNS) lookup(ctx context.Context, keys []namespace.Key, lease bool, ttl time.Duration) (lookupAnswer, error) {
	var buf [4]plane
	for _, p := range h.planes(buf[:0], true) {
		if res, ok, err := p.lookup(ctx, h, keys, lease, ttl); ok {
			return res, err
		}
	}
	panic("client: no plane served a lookup") // gRPC always does
}

// probe is lookup asked of a node after the keys' owner lacked them
// (Options.FallbackWindow), over gRPC, which carries the probe mark: the
// node does not count it as a lookup again. Probes are rare (a young
// owner's misses), so the raw and shm planes are not asked.
func (h *nodeNS) probe(ctx context.Context, keys []namespace.Key, lease bool, ttl time.Duration) (lookupAnswer, error) {
	res, _, err := grpcPlane{}.lookupAs(ctx, h, keys, lease, ttl, true)
	return res, err
}

// get reads the pages of keys (at most maxBatch) into bufs, under lease
// (may be nil), verifying them; found reports which arrived intact. With
// shm false the shared-memory plane is skipped (pages it found elsewhere).
func (h *nodeNS) get(ctx context.Context, keys []namespace.Key, bufs [][]byte, lease *nodeLease, shm bool) ([]bool, error) {
	var buf [4]plane
	for _, p := range h.planes(buf[:0], shm) {
		if found, ok, err := p.get(ctx, h, keys, bufs, lease); ok {
			return found, err
		}
	}
	panic("client: no plane served a get")
}

// put publishes pages (each of the namespace's page size) in batches of
// the node's limit. A plane that cannot serve a batch leaves it to the
// next (pages it published answer Exists there).
func (h *nodeNS) put(ctx context.Context, pages []Page) ([]PutResult, error) {
	var buf [4]plane
	if len(pages) > 0 && len(pages) <= h.maxBatch { // one batch: its results are the answer
		for _, p := range h.planes(buf[:0], true) {
			if res, ok, err := putOn(ctx, p, h, pages); ok {
				if err != nil {
					return nil, err
				}
				return res, nil
			}
		}
		panic("client: no plane served a put")
	}
	out := make([]PutResult, 0, len(pages))
	err := eachBatch(len(pages), h.maxBatch, func(start, end int) error {
		for _, p := range h.planes(buf[:0], true) {
			if res, ok, err := putOn(ctx, p, h, pages[start:end]); ok {
				out = append(out, res...)
				return err
			}
		}
		panic("client: no plane served a put")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// putOn is p.put of pages. A page whose bytes are in pieces (Pieces) is
// gathered first for every plane but shared memory, which copies the
// pieces into the arena itself, and raw tcp, which writes them to its
// socket.
func putOn(ctx context.Context, p plane, h *nodeNS, pages []Page) ([]PutResult, bool, error) {
	switch p.(type) {
	case *shmSession, *rawSession:
	default:
		piecesOf(ctx).gather(pages, nil)
	}
	return p.put(ctx, h, pages)
}

// renew extends the lease to ttl from now (0: the node's default).
func (l *nodeLease) renew(ctx context.Context, ttl time.Duration) error {
	resp, err := l.ns.c.rpc.RenewLease(ctx, &pb.RenewLeaseRequest{NamespaceId: l.ns.id[:], LeaseId: l.ID,
		TtlMs: uint32(ttl.Milliseconds())})
	if err != nil {
		return fromRPC("renew lease", err)
	}
	l.Expires = time.UnixMilli(resp.GetLease().GetExpiresUnixMs())
	return nil
}

// release ends the lease. Releasing an expired lease is not an error.
func (l *nodeLease) release(ctx context.Context) error {
	_, err := l.ns.c.rpc.ReleaseLease(ctx, &pb.ReleaseLeaseRequest{NamespaceId: l.ns.id[:], LeaseId: l.ID})
	if err = fromRPC("release lease", err); errors.Is(err, ErrLeaseExpired) {
		return nil
	}
	return err
}

// delete removes pages and returns how many the node removed.
func (h *nodeNS) delete(ctx context.Context, keys []namespace.Key) (int, error) {
	h.forgetShm(keys) // shared memory: no cached location outlives this client's delete
	deleted := 0
	err := eachBatch(len(keys), h.maxBatch, func(start, end int) error {
		resp, err := h.c.rpc.Delete(ctx, &pb.DeleteRequest{NamespaceId: h.id[:], Keys: wireKeys(keys[start:end])})
		if err != nil {
			return fromRPC("delete", err)
		}
		deleted += int(resp.GetDeleted())
		return nil
	})
	return deleted, err
}

// markOrphans tells the node that its pages of keys lie past a missing
// page of their sequence (pb.OrphansRequest), the first counted of which
// its lookup counted as hits, and returns how many it newly marked.
func (h *nodeNS) markOrphans(ctx context.Context, keys []namespace.Key, counted int) (int, error) {
	marked := 0
	err := eachBatch(len(keys), h.maxBatch, func(start, end int) error {
		c := min(max(counted-start, 0), end-start)
		resp, err := h.c.rpc.Orphans(ctx, &pb.OrphansRequest{NamespaceId: h.id[:], Keys: wireKeys(keys[start:end]), Counted: uint32(c)})
		if err != nil {
			return fromRPC("orphans", err)
		}
		marked += int(resp.GetMarked())
		return nil
	})
	return marked, err
}

// eachBatch calls fn with the bounds of n items in batches of size, up to
// the first error.
func eachBatch(n, size int, fn func(start, end int) error) error {
	for start := 0; start < n; start += size {
		if err := fn(start, min(n, start+size)); err != nil {
			return err
		}
	}
	return nil
}

func wireKeys(keys []namespace.Key) [][]byte {
	out := make([][]byte, len(keys))
	for i := range keys {
		out[i] = keys[i][:]
	}
	return out
}
