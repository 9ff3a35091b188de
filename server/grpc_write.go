package server

import (
	"context"
	"errors"
	"io"
	"time"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// The gRPC handlers of the write side: decode, call the request layer
// (requests.go), encode.

// Reserve sets aside space for pages.
func (s *Server) Reserve(ctx context.Context, req *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	specs := make([]store.PageSpec, len(req.GetPages()))
	for i, p := range req.GetPages() {
		if specs[i], err = pageSpec(p); err != nil {
			return nil, badRequest("page %d: %v", i, err)
		}
	}
	res, err := s.reserve(n, specs, time.Duration(req.GetDeadlineMs())*time.Millisecond)
	if err != nil {
		return nil, err
	}
	resp := &pb.ReserveResponse{Reservations: make([]*pb.Reservation, len(res))}
	for i, r := range res {
		out := &pb.Reservation{Status: reserveProto(r.Status), WriteId: r.WriteID}
		if r.Status == store.Reserved {
			out.DeadlineUnixMs = r.Deadline.UnixMilli()
		}
		if r.Err != nil {
			out.Reason = r.Err.Error()
		}
		resp.Reservations[i] = out
	}
	return resp, nil
}

// Write receives bytes for reservations. The first message names the
// namespace; later ones may omit it.
func (s *Server) Write(stream pb.Strata_WriteServer) error {
	var (
		n     store.Namespace
		open  bool
		total uint64
	)
	in := &dataIn{msg: &pb.WriteRequest{}, dataField: 4}
	defer in.free()
	arm, stop := s.stallGuard(stream.Context())
	defer stop()
	for {
		arm() // a client that stops sending mid-stream is cut (stall.go)
		err := s.recvData(stream, in)
		stop()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&pb.WriteResponse{Bytes: total})
		}
		if err != nil {
			return err
		}
		msg := in.msg.(*pb.WriteRequest)
		if !open || len(msg.GetNamespaceId()) > 0 {
			if n, err = s.namespaceOf(stream.Context(), msg.GetNamespaceId()); err != nil {
				return err
			}
			open = true
		}
		if err := s.checkChunk(in.size); err != nil {
			return err
		}
		if err := s.write(n, msg.GetWriteId(), int64(min(msg.GetOffset(), 1<<62)), in.data...); err != nil {
			return err
		}
		total += uint64(in.size)
	}
}

// checkChunk refuses a data chunk over Config.MaxChunk.
func (s *Server) checkChunk(size int) error {
	if size > s.cfg.MaxChunk {
		return badRequest("chunk of %d bytes, the limit is %d", size, s.cfg.MaxChunk)
	}
	return nil
}

// Commit verifies and publishes reservations.
func (s *Server) Commit(ctx context.Context, req *pb.CommitRequest) (*pb.CommitResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	items := make([]commitItem, len(req.GetItems()))
	for i, it := range req.GetItems() {
		items[i] = commitItem{writeID: it.GetWriteId(), size: int64(min(it.GetSize(), maxPageSize+1)), sum: it.GetChecksum()}
	}
	sts, err := s.commit(n, items)
	if err != nil {
		return nil, err
	}
	resp := &pb.CommitResponse{Results: make([]*pb.CommitResult, len(sts))}
	for i, st := range sts {
		resp.Results[i] = commitResult(st)
	}
	return resp, nil
}

func commitResult(st store.CommitStatus) *pb.CommitResult {
	r := &pb.CommitResult{Status: commitProto(st)}
	if st != store.CommitCommitted {
		r.Reason = st.String()
	}
	return r
}

// Abort drops reservations.
func (s *Server) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	k, err := s.abort(n, req.GetWriteIds())
	if err != nil {
		return nil, err
	}
	return &pb.AbortResponse{Aborted: uint32(k)}, nil
}

// Put is the one-call put: per page a header, then its bytes, each page
// published by the request layer's put (store.Put) as its bytes arrive. A
// page whose bytes stop short (next header or end of stream) is
// INCOMPLETE and its space returned; a page the node has, or refuses, is
// answered so and its bytes skipped. A broken stream aborts the open
// reservation.
func (s *Server) Put(stream pb.Strata_PutServer) error {
	p := &putStream{s: s, stream: stream, in: &dataIn{msg: &pb.PutRequest{}, dataField: 3}}
	defer p.in.free()
	p.arm, p.stop = s.stallGuard(stream.Context())
	defer p.stop()
	return p.run()
}

// putStream is one Put call, its messages received one at a time into in.
type putStream struct {
	s       *Server
	stream  pb.Strata_PutServer
	in      *dataIn
	n       store.Namespace
	open    bool
	pending bool // in holds a message to handle before receiving again
	eof     bool // the stream ended
	results []*pb.CommitResult
	// arm and stop bound each receive by Config.StallTimeout: a client
	// that stops sending mid-stream has its connection cut (stall.go).
	arm, stop func()
}

func (p *putStream) run() error {
	for {
		eof, err := p.next()
		if eof {
			return p.stream.SendAndClose(&pb.PutResponse{Results: p.results})
		}
		if err != nil {
			return err
		}
		h := p.in.msg.(*pb.PutRequest).GetHeader()
		if h == nil {
			if p.in.size > 0 {
				return badRequest("put data without a page header")
			}
			continue
		}
		if len(p.results) >= p.s.cfg.MaxBatch {
			return errorf(errBatchTooLarge, "more than %d pages in one put", p.s.cfg.MaxBatch)
		}
		res, err := p.page(h)
		if err != nil {
			return err
		}
		p.results = append(p.results, res)
	}
}

// next receives the next message (or takes the pending one); it reports
// the end of the stream as eof.
func (p *putStream) next() (eof bool, err error) {
	if p.pending {
		p.pending = false
		return false, nil
	}
	if p.eof {
		return true, nil
	}
	p.arm()
	err = p.s.recvData(p.stream, p.in)
	p.stop()
	if errors.Is(err, io.EOF) {
		p.eof = true
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !p.open {
		if p.n, err = p.s.namespaceOf(p.stream.Context(), p.in.msg.(*pb.PutRequest).GetNamespaceId()); err != nil {
			return false, err
		}
		p.open = true
	}
	return false, p.s.checkChunk(p.in.size)
}

// page puts the page whose header p.in holds, with the bytes of that
// message and the next ones.
func (p *putStream) page(h *pb.PutHeader) (*pb.CommitResult, error) {
	if h.GetPage() == nil {
		return nil, badRequest("put header without a page")
	}
	spec, err := pageSpec(h.GetPage())
	if err != nil {
		return nil, err
	}
	truncated := false
	res, err := p.s.put(p.n, spec, h.GetChecksum(), 0, func(write func([]byte) error) error {
		var ferr error
		truncated, ferr = p.pageBytes(spec, write)
		return ferr
	})
	if err != nil {
		return nil, err
	}
	switch {
	case res.Reserve != store.Reserved:
		// Decided at once: the page's bytes are not needed.
		if _, err := p.pageBytes(spec, func([]byte) error { return nil }); err != nil {
			return nil, err
		}
		out := &pb.CommitResult{Status: putProto(res), Reason: "already published"}
		if res.Err != nil {
			out.Reason = res.Err.Error()
		}
		return out, nil
	case truncated && res.Commit == store.CommitIncomplete:
		return &pb.CommitResult{Status: commitProto(res.Commit), Reason: "stream ended before the page's bytes"}, nil
	}
	return commitResult(res.Commit), nil
}

// pageBytes hands take the bytes of one page, from the message in p.in on,
// until the page's declared size or take's first error; it reports
// truncated when the stream ends, or the next page's header comes, first
// (left pending).
func (p *putStream) pageBytes(spec store.PageSpec, take func([]byte) error) (truncated bool, err error) {
	var got int64
	for {
		if got+int64(p.in.size) > spec.Size {
			return false, badRequest("page %x: more than its declared %d bytes", spec.Key[:6], spec.Size)
		}
		for _, b := range p.in.data {
			if err := take(b); err != nil {
				return false, err
			}
		}
		if got += int64(p.in.size); got == spec.Size {
			return false, nil
		}
		eof, err := p.next()
		switch {
		case err != nil:
			return false, err
		case eof:
			return true, nil
		case p.in.msg.(*pb.PutRequest).GetHeader() != nil:
			p.pending = true
			return true, nil
		}
	}
}
