package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// grpcPlane is the gRPC plane: Lookup, a Get stream whose page bytes go
// from gRPC's receive buffers straight into the caller's (getIn), and a
// Put of up to oneCallMaxPages pages as one Put stream that references the
// caller's bytes (putOut), else the two-phase Reserve, Write, Commit. It
// serves every call.
type grpcPlane struct{}

func (g grpcPlane) lookup(ctx context.Context, h *nodeNS, keys []namespace.Key, lease bool, ttl time.Duration) (lookupAnswer, bool, error) {
	return g.lookupAs(ctx, h, keys, lease, ttl, false)
}

// lookupAs is lookup, as a probe (LookupRequest.probe: the keys' owner was
// asked first and counted them) when probe is set.
func (grpcPlane) lookupAs(ctx context.Context, h *nodeNS, keys []namespace.Key, lease bool, ttl time.Duration,
	probe bool) (lookupAnswer, bool, error) {
	resp, err := h.c.rpc.Lookup(ctx, &pb.LookupRequest{NamespaceId: h.id[:], Keys: wireKeys(keys),
		Lease: lease, LeaseTtlMs: uint32(ttl.Milliseconds()), Probe: probe})
	if err != nil {
		return lookupAnswer{}, true, fromRPC("lookup", err)
	}
	if len(resp.GetPresent()) != len(keys) || int(resp.GetHitPrefix()) > len(keys) {
		return lookupAnswer{}, true, fmt.Errorf("lookup: %d answers for %d keys: %w", len(resp.GetPresent()), len(keys), ErrProtocol)
	}
	res := lookupAnswer{HitPrefix: int(resp.GetHitPrefix()), Present: resp.GetPresent()}
	if l := resp.GetLease(); l != nil {
		res.Lease = &nodeLease{ns: h, ID: l.GetId(), Expires: time.UnixMilli(l.GetExpiresUnixMs()), Pages: int(l.GetPages())}
	}
	return res, true, nil
}

func (grpcPlane) get(ctx context.Context, h *nodeNS, keys []namespace.Key, bufs [][]byte, lease *nodeLease) (found []bool, ok bool, err error) {
	req := &pb.GetRequest{NamespaceId: h.id[:], Keys: wireKeys(keys)}
	if lease != nil {
		req.LeaseId = lease.ID
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := h.c.rpc.Get(ctx, req, grpc.ForceCodecV2(pb.Codec{}))
	if err != nil {
		return nil, true, fromRPC("get", err)
	}
	found = make([]bool, len(keys))
	r := &pageReader{bufs: bufs, found: found}
	in := &getIn{r: r}
	for {
		err := stream.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, true, fromRPC("get", err)
		}
		if in.err != nil {
			return nil, true, fmt.Errorf("get: %w", in.err)
		}
	}
	if r.cur != nil {
		return nil, true, fmt.Errorf("get: stream ended inside page %d: %w", r.cur.GetIndex(), ErrProtocol)
	}
	return found, true, errors.Join(r.bad...)
}

// pageReader reassembles the pages of a Get stream.
type pageReader struct {
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

// getIn receives one GetResponse into a pageReader: decoded by itself
// (pb.BufferUnmarshaler), its data field goes from gRPC's receive buffers
// straight into the caller's page buffer (no joined message, no protobuf
// copy). A malformed message fails the RPC (the returned error); a
// well-formed one the reader rejects sets err.
type getIn struct {
	r    *pageReader
	msg  pb.GetResponse // the fields other than data
	data [][]byte
	size int
	err  error
}

// UnmarshalBuffers implements pb.BufferUnmarshaler.
func (in *getIn) UnmarshalBuffers(b mem.BufferSlice) error {
	in.data, in.size, in.err = in.data[:0], 0, nil
	rest, err := pb.SplitField(b, 2, func(p []byte, first bool) {
		if first { // named twice: the last one wins
			in.data, in.size = in.data[:0], 0
			return
		}
		in.data, in.size = append(in.data, p), in.size+len(p)
	})
	if err != nil {
		return err
	}
	in.msg.Reset()
	if err := proto.Unmarshal(rest, &in.msg); err != nil {
		return err
	}
	in.err = in.r.next(in.msg.GetHeader(), in.data, in.size)
	return nil
}

// oneCallMaxPages is the largest batch Put sends through the one-call Put
// stream. A larger batch uses the two-phase protocol, whose Reserve answer
// spares the bytes of pages already published and whose extra round trips
// are then spread over many pages.
const oneCallMaxPages = 16

func (grpcPlane) put(ctx context.Context, h *nodeNS, pages []Page) ([]PutResult, bool, error) {
	if len(pages) <= oneCallMaxPages {
		res, err := h.putOneCall(ctx, pages)
		return res, true, err
	}
	res, err := h.putTwoPhase(ctx, pages)
	return res, true, err
}

// putOneCall publishes pages through one Put stream. The page's first chunk
// travels in the message that carries its header. Page bytes are not
// copied into messages: the transport reads them from the caller's slices
// (putOut), and putOneCall returns only once it holds no reference to them.
func (n *nodeNS) putOneCall(ctx context.Context, pages []Page) (res []PutResult, err error) {
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
	stream, err := n.c.rpc.Put(ctx, grpc.ForceCodecV2(pb.Codec{}), grpc.MaxRetryRPCBufferSize(0))
	if err != nil {
		return nil, fromRPC("put", err)
	}
	for _, p := range pages {
		out.header = &pb.PutHeader{Page: pbSpec(p), Checksum: n.desc.Checksum.Sum(p.Data)}
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

// putOut is one PutRequest, encoded by itself (pb.BufferMarshaler): the
// namespace (first message only), an optional header and a chunk of page
// bytes. A chunk of more than a kilobyte is
// referenced; released receives one value when the transport drops it.
type putOut struct {
	nsID     []byte
	header   *pb.PutHeader
	data     []byte
	released chan struct{}
	pending  int // references handed out and not yet released
}

// MarshalBuffers implements pb.BufferMarshaler.
func (o *putOut) MarshalBuffers() (mem.BufferSlice, error) {
	var prefix []byte
	if len(o.nsID) > 0 {
		prefix = protowire.AppendTag(prefix, 1, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, o.nsID)
	}
	if o.header != nil {
		var err error
		if prefix, err = pb.AppendMessage(prefix, 2, o.header); err != nil {
			return nil, err
		}
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

// putTwoPhase reserves pages, streams the bytes of the reserved ones, then
// commits each with its checksum; pages already published come back Exists
// without sending their bytes. If the call fails part way, the
// reservations it holds are aborted.
func (n *nodeNS) putTwoPhase(ctx context.Context, pages []Page) (results []PutResult, err error) {
	specs := make([]*pb.PageSpec, len(pages))
	for i, p := range pages {
		specs[i] = pbSpec(p)
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
func (n *nodeNS) write(ctx context.Context, pages []Page, open []int, wid func(int) uint64) error {
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
func (n *nodeNS) abort(open []int, wid func(int) uint64) {
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
