package server

import (
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// putPage is the page a one-call Put stream is currently sending.
type putPage struct {
	spec     store.PageSpec
	sum      []byte
	writeID  uint64 // non-zero while a reservation is open
	received int64
	result   *pb.CommitResult // decided early: exists, rejected, size mismatch
	start    time.Time
}

// Put is the one-call put: per page a header, then its bytes. Each page is
// reserved, written and committed exactly as the two-phase calls would; a
// page whose bytes stop short (next header or end of stream) is INCOMPLETE
// and its space returned. A broken stream aborts the open reservation.
func (s *Server) Put(stream pb.Strata_PutServer) error {
	return toStatus(s.put(stream))
}

func (s *Server) put(stream pb.Strata_PutServer) (err error) {
	var (
		n       store.Namespace
		open    bool
		cur     *putPage
		results []*pb.CommitResult
	)
	defer func() {
		if err != nil && cur != nil && cur.writeID != 0 {
			_, _ = s.cfg.Store.Abort(n.ID, []uint64{cur.writeID})
		}
	}()
	finish := func(res *pb.CommitResult) {
		results = append(results, res)
		cur = nil
	}
	truncate := func() {
		if cur.writeID != 0 {
			_, _ = s.cfg.Store.Abort(n.ID, []uint64{cur.writeID})
			cur.writeID = 0
		}
		if cur.result == nil {
			cur.result = &pb.CommitResult{Status: pb.CommitStatus_COMMIT_STATUS_INCOMPLETE,
				Reason: "stream ended before the page's bytes"}
		}
		finish(cur.result)
	}
	in := s.newDataIn(&pb.PutRequest{}, 3)
	defer in.free()
	for {
		err := s.recvData(stream, in)
		if errors.Is(err, io.EOF) {
			if cur != nil {
				truncate()
			}
			return stream.SendAndClose(&pb.PutResponse{Results: results})
		}
		if err != nil {
			return err
		}
		msg := in.msg.(*pb.PutRequest)
		if !open {
			if n, err = s.namespaceOf(stream.Context(), msg.GetNamespaceId()); err != nil {
				return err
			}
			open = true
		}
		if h := msg.GetHeader(); h != nil {
			if cur != nil {
				truncate()
			}
			if len(results) >= s.cfg.MaxBatch {
				return errorf(errBatchTooLarge, "more than %d pages in one put", s.cfg.MaxBatch)
			}
			if cur, err = s.startPut(n, h); err != nil {
				return err
			}
		}
		if in.size == 0 {
			continue
		}
		if cur == nil {
			return badRequest("put data without a page header")
		}
		if in.size > s.cfg.MaxChunk {
			return badRequest("chunk of %d bytes, the limit is %d", in.size, s.cfg.MaxChunk)
		}
		if err := s.putData(n, cur, in); err != nil {
			return err
		}
		if cur.received == cur.spec.Size {
			if cur.result == nil {
				st, err := s.cfg.Store.Commit(n.ID, cur.writeID, cur.spec.Size, cur.sum)
				if err != nil {
					return err
				}
				cur.writeID = 0
				cur.result = commitResult(st)
				s.metrics.PageTime("in", time.Since(cur.start))
			}
			finish(cur.result)
		}
	}
}

// startPut validates a header and reserves its page.
func (s *Server) startPut(n store.Namespace, h *pb.PutHeader) (*putPage, error) {
	if h.GetPage() == nil {
		return nil, badRequest("put header without a page")
	}
	spec, err := specOf(h.GetPage())
	if err != nil {
		return nil, err
	}
	p := &putPage{spec: spec, sum: h.GetChecksum(), start: time.Now()}
	res, err := s.cfg.Store.Reserve(n.ID, []store.PageSpec{spec}, 0)
	if err != nil {
		return nil, err
	}
	switch r := res[0]; r.Status {
	case store.Reserved:
		p.writeID = r.WriteID
	case store.Exists:
		p.result = &pb.CommitResult{Status: pb.CommitStatus_COMMIT_STATUS_EXISTS, Reason: "already published"}
	default:
		p.result = &pb.CommitResult{Status: pb.CommitStatus_COMMIT_STATUS_REJECTED, Reason: r.Err.Error()}
	}
	return p, nil
}

// putData writes a chunk of the current page, or skips it when the page's
// outcome is already decided. Bytes past the declared size fail the page
// with SIZE_MISMATCH.
func (s *Server) putData(n store.Namespace, p *putPage, in *dataIn) error {
	if p.received+int64(in.size) > p.spec.Size {
		return badRequest("page %x: more than its declared %d bytes", p.spec.Key[:6], p.spec.Size)
	}
	if p.writeID != 0 {
		if err := s.writePieces(n, p.writeID, p.received, in.data); err != nil {
			return err
		}
	}
	p.received += int64(in.size)
	s.metrics.Transfer(n.ID, "in", in.size)
	return nil
}

// writePieces writes the pieces of one chunk at off, one after another.
func (s *Server) writePieces(n store.Namespace, writeID uint64, off int64, pieces [][]byte) error {
	for _, d := range pieces {
		if err := s.cfg.Store.Write(n.ID, writeID, off, d); err != nil {
			return err
		}
		off += int64(len(d))
	}
	return nil
}

// newDataIn prepares the receiving of msg's messages (a PutRequest or a
// WriteRequest), whose field dataField holds page bytes.
func (s *Server) newDataIn(msg proto.Message, dataField protowire.Number) *dataIn {
	return &dataIn{msg: msg, dataField: dataField}
}

// recvData receives the next message of a Put or Write stream into in:
// with the data codec (GRPCOptions) its data stays in gRPC's receive
// buffers until the next recvData or in.free; without it protobuf decodes
// a copy.
func (s *Server) recvData(stream grpc.ServerStream, in *dataIn) error {
	in.free()
	if s.rawData.Load() {
		return stream.RecvMsg(in)
	}
	if err := stream.RecvMsg(in.msg); err != nil {
		return err
	}
	if data := in.msg.(interface{ GetData() []byte }).GetData(); len(data) > 0 {
		in.data, in.size = append(in.data, data), len(data)
	}
	return nil
}
