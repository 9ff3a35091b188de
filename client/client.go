// Package client is the Go client of strata: it opens namespaces, computes
// page keys, looks up hit prefixes with optional read leases, reads pages
// into caller buffers verifying their checksums, and publishes pages with the
// two-phase protocol.
//
// Every call takes a context; its deadline bounds the call.
package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/internal/dial"
	_ "github.com/stratakv/strata/internal/grpcbuf" // gRPC's buffer pool
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Options configures a Client. Zero fields take their defaults.
type Options struct {
	// Token is the tenant token sent with every call. Default none.
	Token string
	// MaxMessageBytes bounds a received message. Default 8 MiB.
	MaxMessageBytes int
	// DialOptions are appended to the client's own.
	DialOptions []grpc.DialOption

	// Same-host shared memory (client/shm.go). ShmSocket is the node's shm
	// socket; default: for a node on this host, transport.SocketLink of its
	// port. NoShm keeps every call on tcp; default off (shm is used when
	// it works, tcp silently otherwise). ShmVerifyChecksums verifies pages
	// read through shm against their checksums too; default off (the
	// generation re-check already rejects a copy that raced a reclaim).
	ShmSocket          string
	NoShm              bool
	ShmVerifyChecksums bool

	// NoRaw keeps page bytes on gRPC, off the node's raw tcp data plane
	// (client/raw.go); default off: Get and Put use the raw plane when the
	// node advertises it, gRPC otherwise. NoShm and NoRaw together force
	// gRPC for everything. RawAddr is the node's raw data-plane address
	// (host:port); default: the address the node advertises.
	// RawSkipVerify skips checking pages read over the raw plane against
	// their checksums (the node sends them from the pinned page; TCP's own
	// checksums remain); default off: every page is verified, as over gRPC.
	NoRaw         bool
	RawAddr       string
	RawSkipVerify bool
}

// Client talks to one strata node. It is safe for concurrent use.
type Client struct {
	conn  *grpc.ClientConn
	rpc   pb.StrataClient
	admin pb.AdminClient
	bg    sync.WaitGroup // background aborts; Close waits for them

	// shm (client/shm.go): shmMu serialises starting and replacing shm,
	// and guards shmTried.
	shmPath, token string
	verifyShm      bool
	shmMu          sync.Mutex
	shm            atomic.Pointer[shmSession]
	shmTried       time.Time

	// raw tcp data plane (client/raw.go): rawMu serialises replacing raw.
	addr, rawOverride    string
	noRaw, rawSkipVerify bool
	rawMu                sync.Mutex
	raw                  atomic.Pointer[rawSession]
}

// Dial connects to the node at addr (host:port). The connection is made
// lazily; the first call's context bounds it.
func Dial(addr string, opts Options) (*Client, error) {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 8 << 20
	}
	conn, err := dial.GRPC(addr, dial.Options{Token: opts.Token, MaxMessageBytes: opts.MaxMessageBytes, Bulk: true,
		Extra: opts.DialOptions})
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, rpc: pb.NewStrataClient(conn), admin: pb.NewAdminClient(conn),
		shmPath: shmPath(addr, opts), token: opts.Token, verifyShm: opts.ShmVerifyChecksums,
		addr: addr, noRaw: opts.NoRaw, rawOverride: opts.RawAddr, rawSkipVerify: opts.RawSkipVerify}, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	shmErr := c.closeShm()
	c.closeRaw()
	c.bg.Wait()
	return errors.Join(shmErr, c.conn.Close())
}

// Open performs the namespace handshake: the node validates and registers
// the descriptor and both sides agree on its ID and page size.
func (c *Client) Open(ctx context.Context, d namespace.Descriptor) (*Namespace, error) {
	d = d.Normalize()
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("open namespace: %w: %w", ErrInvalid, err)
	}
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
	return &Namespace{c: c, desc: d, id: id, pageBytes: int(resp.GetPageBytes()),
		maxBatch: max(1, int(resp.GetMaxBatch())), maxChunk: max(4096, int(resp.GetMaxChunkBytes())),
		leaseTTL: time.Duration(resp.GetDefaultLeaseTtlMs()) * time.Millisecond,
		nodeID:   resp.GetNodeId()}, nil
}

// Namespace is an opened namespace on one node.
type Namespace struct {
	c         *Client
	desc      namespace.Descriptor
	id        namespace.ID
	pageBytes int
	maxBatch  int
	maxChunk  int
	leaseTTL  time.Duration
	nodeID    string
	tcpOnly   bool // never shm (the tcp backend of a shm call)
}

// ID is the namespace ID.
func (n *Namespace) ID() namespace.ID { return n.id }

// Descriptor is the normalized descriptor the namespace was opened with.
func (n *Namespace) Descriptor() namespace.Descriptor { return n.desc }

// PageBytes is the size of every page of the namespace.
func (n *Namespace) PageBytes() int { return n.pageBytes }

// PageTokens is how many tokens one page holds.
func (n *Namespace) PageTokens() int { return int(n.desc.PageTokens) }

// PageKeys returns the keys of the full pages of a token sequence, from its
// start. A trailing partial page has no key.
func (n *Namespace) PageKeys(tokens []uint32) []namespace.Key {
	return namespace.PageKeys(n.id, tokens, int(n.desc.PageTokens))
}

// Delete removes pages and returns how many the node removed.
func (n *Namespace) Delete(ctx context.Context, keys []namespace.Key) (int, error) {
	n.forgetShm(keys) // shared memory: no cached location outlives this client's delete
	deleted := 0
	err := n.eachBatch(keys, func(batch []namespace.Key) error {
		resp, err := n.c.rpc.Delete(ctx, &pb.DeleteRequest{NamespaceId: n.id[:], Keys: wireKeys(batch)})
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
func (n *Namespace) markOrphans(ctx context.Context, keys []namespace.Key, counted int) (int, error) {
	marked, start := 0, 0
	err := n.eachBatch(keys, func(batch []namespace.Key) error {
		c := min(max(counted-start, 0), len(batch))
		start += len(batch)
		resp, err := n.c.rpc.Orphans(ctx, &pb.OrphansRequest{NamespaceId: n.id[:], Keys: wireKeys(batch), Counted: uint32(c)})
		if err != nil {
			return fromRPC("orphans", err)
		}
		marked += int(resp.GetMarked())
		return nil
	})
	return marked, err
}

// eachBatch calls fn with keys in batches of the node's limit, up to the
// first error.
func (n *Namespace) eachBatch(keys []namespace.Key, fn func([]namespace.Key) error) error {
	for start := 0; start < len(keys); start += n.maxBatch {
		if err := fn(keys[start:min(len(keys), start+n.maxBatch)]); err != nil {
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
