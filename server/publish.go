package server

import (
	"context"
	"errors"
	"io"
	"math"
	"time"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// specOf validates one wire page spec.
func specOf(p *pb.PageSpec) (store.PageSpec, error) {
	k, err := namespace.KeyFromBytes(p.GetKey())
	if err != nil {
		return store.PageSpec{}, err
	}
	spec := store.PageSpec{Key: k, Depth: p.GetDepth(), Size: int64(p.GetSize()), CostHint: p.GetCostHint(),
		ChainDepth: p.GetChainDepth()}
	if par := p.GetParentKey(); len(par) > 0 {
		if spec.Parent, err = namespace.KeyFromBytes(par); err != nil {
			return store.PageSpec{}, badRequest("parent key: %v", err)
		}
		spec.HasParent = true
	}
	if p.GetSize() == 0 || p.GetSize() > 1<<40 {
		return store.PageSpec{}, badRequest("page %x: size %d", k[:6], p.GetSize())
	}
	if err := checkLinks(spec); err != nil {
		return store.PageSpec{}, err
	}
	if c := spec.CostHint; c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return store.PageSpec{}, badRequest("page %x: cost hint %g is not a finite number of FLOPs >= 0", k[:6], c)
	}
	return spec, nil
}

// maxChainAhead bounds how much deeper than a page its chain depth may
// say the sequence put with it goes: a chain depth prices the page as its
// deepest descendant, so an absurd one would make a page all but
// unevictable.
const maxChainAhead = 1 << 20

// checkLinks refuses a page named as its own parent (the store would
// treat it as parentless, but a writer that sends one has its chain wrong)
// and a chain depth more than maxChainAhead past the page's own depth.
func checkLinks(spec store.PageSpec) error {
	if spec.HasParent && spec.Parent == spec.Key {
		return badRequest("page %x is its own parent", spec.Key[:6])
	}
	if spec.ChainDepth > spec.Depth && spec.ChainDepth-spec.Depth > maxChainAhead {
		return badRequest("page %x: chain depth %d is more than %d past its depth %d",
			spec.Key[:6], spec.ChainDepth, maxChainAhead, spec.Depth)
	}
	return nil
}

// Reserve sets aside space for pages.
func (s *Server) Reserve(ctx context.Context, req *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	resp, err := s.reserve(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) reserve(ctx context.Context, req *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	if len(req.GetPages()) == 0 {
		return nil, badRequest("no pages")
	}
	if len(req.GetPages()) > s.cfg.MaxBatch {
		return nil, errorf(errBatchTooLarge, "%d pages, the limit is %d", len(req.GetPages()), s.cfg.MaxBatch)
	}
	specs := make([]store.PageSpec, len(req.GetPages()))
	for i, p := range req.GetPages() {
		if specs[i], err = specOf(p); err != nil {
			return nil, badRequest("page %d: %v", i, err)
		}
	}
	res, err := s.cfg.Store.Reserve(n.ID, specs, time.Duration(req.GetDeadlineMs())*time.Millisecond)
	if err != nil {
		return nil, err
	}
	resp := &pb.ReserveResponse{Reservations: make([]*pb.Reservation, len(res))}
	for i, r := range res {
		out := &pb.Reservation{Status: pb.ReserveStatus(r.Status), WriteId: r.WriteID}
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
	return toStatus(s.write(stream))
}

func (s *Server) write(stream pb.Strata_WriteServer) error {
	var (
		n     store.Namespace
		open  bool
		total uint64
	)
	in := s.newDataIn(&pb.WriteRequest{}, 4)
	defer in.free()
	for {
		err := s.recvData(stream, in)
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
		if in.size > s.cfg.MaxChunk {
			return badRequest("chunk of %d bytes, the limit is %d", in.size, s.cfg.MaxChunk)
		}
		if in.size == 0 {
			// An empty write still names its reservation: let the store judge it.
			if err := s.cfg.Store.Write(n.ID, msg.GetWriteId(), int64(msg.GetOffset()), nil); err != nil {
				return err
			}
			continue
		}
		if err := s.writePieces(n, msg.GetWriteId(), int64(msg.GetOffset()), in.data); err != nil {
			return err
		}
		s.metrics.Transfer(n.ID, "in", in.size)
		total += uint64(in.size)
	}
}

// Commit verifies and publishes reservations.
func (s *Server) Commit(ctx context.Context, req *pb.CommitRequest) (*pb.CommitResponse, error) {
	resp, err := s.commit(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) commit(ctx context.Context, req *pb.CommitRequest) (*pb.CommitResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	if len(req.GetItems()) == 0 {
		return nil, badRequest("no items")
	}
	if len(req.GetItems()) > s.cfg.MaxBatch {
		return nil, errorf(errBatchTooLarge, "%d items, the limit is %d", len(req.GetItems()), s.cfg.MaxBatch)
	}
	resp := &pb.CommitResponse{Results: make([]*pb.CommitResult, len(req.GetItems()))}
	for i, it := range req.GetItems() {
		st, err := s.cfg.Store.Commit(n.ID, it.GetWriteId(), int64(it.GetSize()), it.GetChecksum())
		if err != nil {
			return nil, err
		}
		resp.Results[i] = commitResult(st)
	}
	return resp, nil
}

func commitResult(st store.CommitStatus) *pb.CommitResult {
	r := &pb.CommitResult{Status: pb.CommitStatus(st)}
	if st != store.CommitCommitted {
		r.Reason = st.String()
	}
	return r
}

// Abort drops reservations.
func (s *Server) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, toStatus(err)
	}
	if len(req.GetWriteIds()) > s.cfg.MaxBatch {
		return nil, toStatus(errorf(errBatchTooLarge, "%d write ids, the limit is %d", len(req.GetWriteIds()), s.cfg.MaxBatch))
	}
	k, err := s.cfg.Store.Abort(n.ID, req.GetWriteIds())
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AbortResponse{Aborted: uint32(k)}, nil
}
