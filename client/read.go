package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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
	req := &pb.GetRequest{NamespaceId: n.id[:], Keys: wireKeys(keys)}
	if lease != nil {
		req.LeaseId = lease.ID
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := n.c.rpc.Get(ctx, req)
	if err != nil {
		return nil, fromRPC("get", err)
	}
	found = make([]bool, len(keys))
	r := pageReader{ns: n, bufs: bufs, found: found}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fromRPC("get", err)
		}
		if err := r.next(msg); err != nil {
			return nil, fmt.Errorf("get: %w", err)
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

func (r *pageReader) next(msg *pb.GetResponse) error {
	if h := msg.GetHeader(); h != nil {
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
		if len(msg.GetData()) > 0 {
			return fmt.Errorf("data outside a page: %w", ErrProtocol)
		}
		return nil
	}
	buf := r.bufs[r.cur.GetIndex()][:r.cur.GetSize()]
	if r.got+len(msg.GetData()) > len(buf) {
		return fmt.Errorf("page %d: more bytes than its size: %w", r.cur.GetIndex(), ErrProtocol)
	}
	r.got += copy(buf[r.got:], msg.GetData())
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
