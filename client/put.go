package client

import (
	"context"
	"fmt"
	"time"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Page is one page to publish.
type Page struct {
	Key       namespace.Key
	Parent    namespace.Key // meaningful when HasParent
	HasParent bool
	Depth     uint32 // page index within its token sequence
	Data      []byte
}

// ChainPages pairs the keys of one token sequence, from its first page, with
// their bytes, filling in parents and depths.
func ChainPages(keys []namespace.Key, data [][]byte) []Page {
	pages := make([]Page, min(len(keys), len(data)))
	for i := range pages {
		pages[i] = Page{Key: keys[i], Depth: uint32(i), Data: data[i]}
		if i > 0 {
			pages[i].Parent, pages[i].HasParent = keys[i-1], true
		}
	}
	return pages
}

// PutStatus is the outcome of publishing one page.
type PutStatus int

// Put outcomes, as the node reports them.
const (
	Committed        PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_COMMITTED)
	Exists           PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_EXISTS)
	ChecksumMismatch PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_CHECKSUM_MISMATCH)
	SizeMismatch     PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_SIZE_MISMATCH)
	Incomplete       PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_INCOMPLETE)
	UnknownWrite     PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE)
	Expired          PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_EXPIRED)
	Aborted          PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_ABORTED)
	Rejected         PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_REJECTED)
	Failed           PutStatus = PutStatus(pb.CommitStatus_COMMIT_STATUS_FAILED)
)

// String names the outcome.
func (s PutStatus) String() string { return pb.CommitStatus(s).String() }

// Stored reports whether the page is published after the put (by this
// writer or an earlier one).
func (s PutStatus) Stored() bool { return s == Committed || s == Exists }

// PutResult is the outcome of one page.
type PutResult struct {
	Status PutStatus
	Reason string
}

// Put publishes pages with the two-phase protocol: reserve them all, stream
// the bytes of the reserved ones, then commit each with its checksum. Pages
// already published come back Exists without sending their bytes. If the
// call fails part way, the reservations it holds are aborted.
func (n *Namespace) Put(ctx context.Context, pages []Page) ([]PutResult, error) {
	out := make([]PutResult, 0, len(pages))
	for start := 0; start < len(pages); start += n.maxBatch {
		res, err := n.putBatch(ctx, pages[start:min(len(pages), start+n.maxBatch)])
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

func (n *Namespace) putBatch(ctx context.Context, pages []Page) (results []PutResult, err error) {
	specs := make([]*pb.PageSpec, len(pages))
	for i, p := range pages {
		if len(p.Data) != n.pageBytes {
			return nil, fmt.Errorf("put page %d: %d bytes, namespace pages are %d: %w", i, len(p.Data), n.pageBytes, ErrInvalid)
		}
		specs[i] = &pb.PageSpec{Key: p.Key[:], Depth: p.Depth, Size: uint64(len(p.Data))}
		if p.HasParent {
			specs[i].ParentKey = p.Parent[:]
		}
	}
	rr, err := n.c.rpc.Reserve(ctx, &pb.ReserveRequest{NamespaceId: n.id[:], Pages: specs})
	if err != nil {
		return nil, fromRPC("reserve", err)
	}
	if len(rr.GetReservations()) != len(pages) {
		return nil, fmt.Errorf("reserve: %d answers for %d pages: %w", len(rr.GetReservations()), len(pages), ErrProtocol)
	}
	results = make([]PutResult, len(pages))
	var open []int // indexes of reserved pages
	for i, r := range rr.GetReservations() {
		switch r.GetStatus() {
		case pb.ReserveStatus_RESERVE_STATUS_RESERVED:
			open = append(open, i)
		case pb.ReserveStatus_RESERVE_STATUS_EXISTS:
			results[i] = PutResult{Status: Exists}
		default:
			results[i] = PutResult{Status: Rejected, Reason: r.GetReason()}
		}
	}
	if len(open) == 0 {
		return results, nil
	}
	wid := func(i int) uint64 { return rr.GetReservations()[i].GetWriteId() }
	defer func() {
		if err != nil {
			n.abort(open, wid)
		}
	}()
	if err := n.write(ctx, pages, open, wid); err != nil {
		return nil, err
	}
	items := make([]*pb.CommitItem, len(open))
	for j, i := range open {
		items[j] = &pb.CommitItem{WriteId: wid(i), Size: uint64(len(pages[i].Data)), Checksum: n.desc.Checksum.Sum(pages[i].Data)}
	}
	cr, err := n.c.rpc.Commit(ctx, &pb.CommitRequest{NamespaceId: n.id[:], Items: items})
	if err != nil {
		return nil, fromRPC("commit", err)
	}
	if len(cr.GetResults()) != len(open) {
		return nil, fmt.Errorf("commit: %d answers for %d pages: %w", len(cr.GetResults()), len(open), ErrProtocol)
	}
	for j, i := range open {
		results[i] = PutResult{Status: PutStatus(cr.GetResults()[j].GetStatus()), Reason: cr.GetResults()[j].GetReason()}
	}
	return results, nil
}

// write streams the bytes of the reserved pages in chunks.
func (n *Namespace) write(ctx context.Context, pages []Page, open []int, wid func(int) uint64) error {
	stream, err := n.c.rpc.Write(ctx)
	if err != nil {
		return fromRPC("write", err)
	}
	msg := &pb.WriteRequest{NamespaceId: n.id[:]}
	for _, i := range open {
		data := pages[i].Data
		for off := 0; off < len(data); off += n.maxChunk {
			msg.WriteId, msg.Offset, msg.Data = wid(i), uint64(off), data[off:min(len(data), off+n.maxChunk)]
			if err := stream.Send(msg); err != nil {
				_, err = stream.CloseAndRecv() // the node's reason
				return fromRPC("write", err)
			}
			msg.NamespaceId = nil
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return fromRPC("write", err)
	}
	return nil
}

// abort drops reservations after a failed put, in the background on a
// short context of its own (the caller's may be what failed), so a hung node
// does not hold the caller past its deadline. Reservations also expire on
// their own; Client.Close waits for the abort.
func (n *Namespace) abort(open []int, wid func(int) uint64) {
	ids := make([]uint64, len(open))
	for j, i := range open {
		ids[j] = wid(i)
	}
	n.c.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = n.c.rpc.Abort(ctx, &pb.AbortRequest{NamespaceId: n.id[:], WriteIds: ids})
	})
}
