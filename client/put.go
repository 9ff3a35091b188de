package client

import (
	"context"
	"fmt"
	"slices"
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

// Page is one page to publish.
type Page struct {
	Key       namespace.Key
	Parent    namespace.Key // meaningful when HasParent
	HasParent bool
	Depth     uint32 // page index within its token sequence
	Data      []byte
	// ChainDepth is the depth of the deepest page of this page's sequence
	// published by the same put, on any node. Put fills it in from the
	// batch's parent links (a caller that splits one sequence over several
	// puts may set it). Nodes admit and keep a prefix page at least as they
	// would the deepest page it makes reachable: judged alone, shallow
	// pages are worth less, and a full cluster would keep the deep pages
	// of a sequence while refusing the prefix they need.
	ChainDepth uint32
}

// chained reports whether every page after the first is the child of the
// one before it.
func chained(pages []Page) bool {
	for i := 1; i < len(pages); i++ {
		if !pages[i].HasParent || pages[i].Parent != pages[i-1].Key {
			return false
		}
	}
	return true
}

// withChainDepths returns pages with each ChainDepth raised to the depth of
// its deepest descendant in pages (by parent links; a parent must come
// before its children, as ChainPages orders them), copying pages only if
// something changes.
func withChainDepths(pages []Page) []Page {
	if len(pages) < 2 {
		return pages
	}
	parent := func(i int) (int, bool) { return i - 1, true } // one sequence in order (ChainPages)
	if !chained(pages) {
		at := make(map[namespace.Key]int, len(pages))
		for i, p := range pages {
			at[p.Key] = i
		}
		parent = func(i int) (int, bool) {
			j, ok := at[pages[i].Parent]
			return j, ok && pages[i].HasParent && j < i
		}
	}
	out := pages
	for i := len(pages) - 1; i > 0; i-- {
		j, ok := parent(i)
		if !ok {
			continue
		}
		d := max(out[i].ChainDepth, out[i].Depth)
		if d <= max(out[j].ChainDepth, out[j].Depth) {
			continue
		}
		if &out[0] == &pages[0] {
			out = slices.Clone(pages)
		}
		out[j].ChainDepth = d
	}
	return out
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

// oneCallMaxPages is the largest batch Put sends through the one-call Put
// stream. A larger batch uses the two-phase protocol, whose Reserve answer
// spares the bytes of pages already published and whose extra round trips
// are then spread over many pages.
const oneCallMaxPages = 16

// Put publishes pages. A batch of up to oneCallMaxPages pages goes through
// the node's one-call Put stream (one RPC: per page a header with its
// checksum, then its bytes; the node reserves, writes and commits each page
// as the two-phase calls would). A larger batch uses the two-phase protocol:
// reserve them all, stream the bytes of the reserved ones, then commit each
// with its checksum; there pages already published come back Exists without
// sending their bytes. If the call fails part way, the reservations it holds
// are aborted.
func (n *Namespace) Put(ctx context.Context, pages []Page) ([]PutResult, error) {
	pages = withChainDepths(pages)
	if res, ok, err := n.putShm(ctx, pages); ok { // same host: shared memory
		return res, err
	}
	if res, ok, err := n.putRaw(ctx, pages); ok { // the raw tcp data plane
		return res, err
	}
	for i, p := range pages {
		if len(p.Data) != n.pageBytes {
			return nil, fmt.Errorf("put page %d: %d bytes, namespace pages are %d: %w", i, len(p.Data), n.pageBytes, ErrInvalid)
		}
	}
	if len(pages) <= oneCallMaxPages {
		return n.putOneCall(ctx, pages)
	}
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

// putOneCall publishes pages through one Put stream. The page's first chunk
// travels in the message that carries its header. Page bytes are not
// copied into messages: the transport reads them from the caller's slices
// (putOut), and putOneCall returns only once it holds no reference to them.
func (n *Namespace) putOneCall(ctx context.Context, pages []Page) (res []PutResult, err error) {
	if len(pages) == 0 {
		return nil, nil
	}
	chunks := 0
	for _, p := range pages {
		chunks += (len(p.Data) + n.maxChunk - 1) / n.maxChunk
	}
	out := &putOut{nsID: n.id[:], released: make(chan struct{}, chunks)} // never full
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // a failed stream drops what the transport still holds
		out.wait(releaseWait)
	}()
	// No retry buffer: it would hold the page bytes past the call.
	stream, err := n.c.rpc.Put(ctx, grpc.ForceCodecV2(putCodec{}), grpc.MaxRetryRPCBufferSize(0))
	if err != nil {
		return nil, fromRPC("put", err)
	}
	for _, p := range pages {
		spec := &pb.PageSpec{Key: p.Key[:], Depth: p.Depth, Size: uint64(len(p.Data)), ChainDepth: p.ChainDepth}
		if p.HasParent {
			spec.ParentKey = p.Parent[:]
		}
		out.header = &pb.PutHeader{Page: spec, Checksum: n.desc.Checksum.Sum(p.Data)}
		for data := p.Data; out.header != nil || len(data) > 0; {
			out.data = data[:min(len(data), n.maxChunk)]
			data = data[len(out.data):]
			if err := stream.SendMsg(out); err != nil {
				_, err = stream.CloseAndRecv() // the node's reason
				return nil, fromRPC("put", err)
			}
			out.header, out.nsID = nil, nil
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, fromRPC("put", err)
	}
	if len(resp.GetResults()) != len(pages) {
		return nil, fmt.Errorf("put: %d answers for %d pages: %w", len(resp.GetResults()), len(pages), ErrProtocol)
	}
	res = make([]PutResult, len(pages))
	for i, r := range resp.GetResults() {
		res[i] = PutResult{Status: PutStatus(r.GetStatus()), Reason: r.GetReason()}
	}
	return res, nil
}

// releaseWait bounds how long a Put waits, after its stream ended, for the
// transport to drop its references to the page bytes. They are dropped as
// soon as the bytes are written or the stream is cleaned up, so the bound
// only matters if the connection died mid-write; the bytes then go nowhere.
const releaseWait = 2 * time.Second

// putCodec is protobuf for the Put call, except that a *putOut is marshalled
// as a PutRequest whose data field references the caller's page bytes.
type putCodec struct{}

func (putCodec) Name() string { return grpcproto.Name }

func (putCodec) Marshal(v any) (mem.BufferSlice, error) {
	if out, ok := v.(*putOut); ok {
		return out.marshal()
	}
	return encoding.GetCodecV2(grpcproto.Name).Marshal(v)
}

func (putCodec) Unmarshal(b mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(grpcproto.Name).Unmarshal(b, v)
}

// putOut is one PutRequest: the namespace (first message only), an optional
// header and a chunk of page bytes. A chunk of more than a kilobyte is
// referenced; released receives one value when the transport drops it.
type putOut struct {
	nsID     []byte
	header   *pb.PutHeader
	data     []byte
	released chan struct{}
	pending  int // references handed out and not yet released
}

func (o *putOut) marshal() (mem.BufferSlice, error) {
	var prefix []byte
	if len(o.nsID) > 0 {
		prefix = protowire.AppendTag(prefix, 1, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, o.nsID)
	}
	if o.header != nil {
		h, err := proto.Marshal(o.header)
		if err != nil {
			return nil, err
		}
		prefix = protowire.AppendTag(prefix, 2, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, h)
	}
	b, referenced := pb.AppendData(prefix, 3, o.data, o.released)
	if referenced {
		o.pending++
	}
	return b, nil
}

// wait waits up to d for every referenced chunk to be released.
func (o *putOut) wait(d time.Duration) {
	if o.pending == 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for ; o.pending > 0; o.pending-- {
		select {
		case <-o.released:
		case <-t.C:
			return
		}
	}
}

func (n *Namespace) putBatch(ctx context.Context, pages []Page) (results []PutResult, err error) {
	specs := make([]*pb.PageSpec, len(pages))
	for i, p := range pages {
		specs[i] = &pb.PageSpec{Key: p.Key[:], Depth: p.Depth, Size: uint64(len(p.Data)), ChainDepth: p.ChainDepth}
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
