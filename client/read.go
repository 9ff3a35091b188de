package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// LookupResult answers a Lookup.
type LookupResult struct {
	// HitPrefix is how many keys from the start are present: the pages an
	// engine can load instead of recomputing.
	HitPrefix int
	// Present says, per key, whether the page is published.
	Present []bool
	// Lease covers the hit prefix when one was asked for and HitPrefix > 0.
	Lease *Lease
}

// Lookup asks which keys are present. With lease true the node also leases
// the hit prefix for ttl (0: the node's default), so the pages cannot vanish
// before Get. More keys than the node's batch limit fail with
// ErrBatchTooLarge (Cluster splits batches itself).
func (n *Namespace) Lookup(ctx context.Context, keys []namespace.Key, lease bool, ttl time.Duration) (LookupResult, error) {
	if len(keys) > n.maxBatch {
		return LookupResult{}, fmt.Errorf("lookup of %d keys, the node's batch limit is %d: %w", len(keys), n.maxBatch, ErrBatchTooLarge)
	}
	if res, ok, err := n.lookupRaw(ctx, keys, lease, ttl); ok {
		return res, err
	}
	resp, err := n.c.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: n.id[:], Keys: wireKeys(keys),
		Lease: lease, LeaseTtlMs: uint32(ttl.Milliseconds())})
	if err != nil {
		return LookupResult{}, fromRPC("lookup", err)
	}
	if len(resp.GetPresent()) != len(keys) || int(resp.GetHitPrefix()) > len(keys) {
		return LookupResult{}, fmt.Errorf("lookup: %d answers for %d keys: %w", len(resp.GetPresent()), len(keys), ErrProtocol)
	}
	res := LookupResult{HitPrefix: int(resp.GetHitPrefix()), Present: resp.GetPresent()}
	if l := resp.GetLease(); l != nil {
		res.Lease = &Lease{ns: n, ID: l.GetId(), Expires: time.UnixMilli(l.GetExpiresUnixMs()), Pages: int(l.GetPages())}
	}
	return res, nil
}

// Lease keeps the pages of a hit prefix readable until Expires.
type Lease struct {
	ns      *Namespace
	ID      uint64
	Expires time.Time
	Pages   int
}

// Renew extends the lease to ttl from now (0: the node's default).
func (l *Lease) Renew(ctx context.Context, ttl time.Duration) error {
	resp, err := l.ns.c.rpc.RenewLease(ctx, &pb.RenewLeaseRequest{NamespaceId: l.ns.id[:], LeaseId: l.ID,
		TtlMs: uint32(ttl.Milliseconds())})
	if err != nil {
		return fromRPC("renew lease", err)
	}
	l.Expires = time.UnixMilli(resp.GetLease().GetExpiresUnixMs())
	return nil
}

// Release ends the lease. Releasing an expired lease is not an error.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.ns.c.rpc.ReleaseLease(ctx, &pb.ReleaseLeaseRequest{NamespaceId: l.ns.id[:], LeaseId: l.ID})
	if err = fromRPC("release lease", err); errors.Is(err, ErrLeaseExpired) {
		return nil
	}
	return err
}

// Get reads the pages of keys into bufs (bufs[i] receives keys[i]; each at
// least PageBytes long) and verifies every page against its checksum. found
// reports which pages arrived intact. With a lease (may be nil) the pages are
// guaranteed present unless it expired, which fails the call with
// ErrLeaseExpired. A page whose bytes do not verify is reported not found and
// the returned error wraps ErrChecksum.
func (n *Namespace) Get(ctx context.Context, keys []namespace.Key, bufs [][]byte, lease *Lease) (found []bool, err error) {
	if len(bufs) != len(keys) {
		return nil, fmt.Errorf("get: %d buffers for %d keys: %w", len(bufs), len(keys), ErrInvalid)
	}
	if len(keys) > n.maxBatch {
		return nil, fmt.Errorf("get of %d keys, the node's batch limit is %d: %w", len(keys), n.maxBatch, ErrBatchTooLarge)
	}
	if found, ok, err := n.getShm(ctx, keys, bufs, lease); ok { // same host: shared memory
		return found, err
	}
	if found, ok, err := n.getRaw(ctx, keys, bufs, lease); ok { // the raw tcp data plane
		return found, err
	}
	req := &pb.GetRequest{NamespaceId: n.id[:], Keys: wireKeys(keys)}
	if lease != nil {
		req.LeaseId = lease.ID
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := n.c.rpc.Get(ctx, req, grpc.ForceCodecV2(getCodec{}))
	if err != nil {
		return nil, fromRPC("get", err)
	}
	found = make([]bool, len(keys))
	r := &pageReader{ns: n, bufs: bufs, found: found}
	in := &getIn{r: r}
	for {
		err := stream.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fromRPC("get", err)
		}
		if in.err != nil {
			return nil, fmt.Errorf("get: %w", in.err)
		}
	}
	if r.cur != nil {
		return nil, fmt.Errorf("get: stream ended inside page %d: %w", r.cur.GetIndex(), ErrProtocol)
	}
	return found, errors.Join(r.bad...)
}

// pageReader reassembles the pages of a Get stream.
type pageReader struct {
	ns    *Namespace
	bufs  [][]byte
	found []bool
	cur   *pb.PageHeader // page being received
	got   int
	bad   []error
}

// next takes one GetResponse: its header (nil if none) and the pieces of
// its data field, copied straight into the page's buffer.
func (r *pageReader) next(h *pb.PageHeader, data [][]byte, size int) error {
	if h != nil {
		if r.cur != nil {
			return fmt.Errorf("page %d header inside page %d: %w", h.GetIndex(), r.cur.GetIndex(), ErrProtocol)
		}
		if int(h.GetIndex()) >= len(r.bufs) {
			return fmt.Errorf("page index %d of %d: %w", h.GetIndex(), len(r.bufs), ErrProtocol)
		}
		if !h.GetFound() {
			return nil
		}
		if int(h.GetSize()) > len(r.bufs[h.GetIndex()]) {
			return fmt.Errorf("page %d is %d bytes, buffer %d: %w", h.GetIndex(), h.GetSize(), len(r.bufs[h.GetIndex()]), ErrBufferTooSmall)
		}
		r.cur, r.got = h, 0
	}
	if r.cur == nil {
		if size > 0 {
			return fmt.Errorf("data outside a page: %w", ErrProtocol)
		}
		return nil
	}
	buf := r.bufs[r.cur.GetIndex()][:r.cur.GetSize()]
	if r.got+size > len(buf) {
		return fmt.Errorf("page %d: more bytes than its size: %w", r.cur.GetIndex(), ErrProtocol)
	}
	for _, d := range data {
		r.got += copy(buf[r.got:], d)
	}
	if r.got < len(buf) {
		return nil
	}
	i := r.cur.GetIndex()
	alg := namespace.Checksum(r.cur.GetChecksumAlgorithm())
	if bytes.Equal(alg.Sum(buf), r.cur.GetChecksum()) {
		r.found[i] = true
	} else {
		r.bad = append(r.bad, fmt.Errorf("page %d: %w", i, ErrChecksum))
	}
	r.cur = nil
	return nil
}

// getCodec is protobuf for the Get call, except that a GetResponse is
// decoded into a getIn: its data field goes from gRPC's receive buffers
// straight into the caller's page buffer (no joined message, no protobuf
// copy). The wire format is unchanged.
type getCodec struct{}

func (getCodec) Name() string { return grpcproto.Name }

func (getCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(grpcproto.Name).Marshal(v)
}

func (getCodec) Unmarshal(b mem.BufferSlice, v any) error {
	if in, ok := v.(*getIn); ok {
		return in.unmarshal(b)
	}
	return encoding.GetCodecV2(grpcproto.Name).Unmarshal(b, v)
}

// getIn receives one GetResponse into a pageReader. A malformed message
// fails the RPC (the returned error); a well-formed one the reader rejects
// sets err.
type getIn struct {
	r      *pageReader
	header []byte
	data   [][]byte
	err    error
}

func (in *getIn) unmarshal(b mem.BufferSlice) error {
	in.header, in.data, in.err = in.header[:0], in.data[:0], nil
	size, sawHeader := 0, false
	r := pb.NewPieceReader(b)
	for !r.Done() {
		tag, err := r.Varint()
		if err != nil {
			return err
		}
		num, typ := protowire.DecodeTag(tag)
		var n uint64
		switch typ {
		case protowire.VarintType:
			if _, err := r.Varint(); err != nil {
				return err
			}
			continue
		case protowire.Fixed32Type:
			n = 4
		case protowire.Fixed64Type:
			n = 8
		case protowire.BytesType:
			if n, err = r.Varint(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("get response field %d: wire type %d", num, typ)
		}
		if n > uint64(r.Left()) {
			return io.ErrUnexpectedEOF
		}
		take := func([]byte) {}
		switch {
		case num == 1 && typ == protowire.BytesType:
			sawHeader = true
			take = func(p []byte) { in.header = append(in.header, p...) }
		case num == 2 && typ == protowire.BytesType:
			in.data, size = in.data[:0], int(n) // named twice: the last one wins
			take = func(p []byte) { in.data = append(in.data, p) }
		}
		if err := r.Take(int(n), take); err != nil {
			return err
		}
	}
	var h *pb.PageHeader
	if sawHeader {
		h = &pb.PageHeader{}
		if err := proto.Unmarshal(in.header, h); err != nil {
			return err
		}
	}
	in.err = in.r.next(h, in.data, size)
	return nil
}
