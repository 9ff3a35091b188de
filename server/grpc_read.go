package server

import (
	"context"
	"errors"
	"time"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// The gRPC handlers of the read side: decode, call the request layer
// (requests.go), encode.

// Lookup answers the hit prefix and presence of keys, optionally leasing
// the hit prefix.
func (s *Server) Lookup(ctx context.Context, req *pb.LookupRequest) (*pb.LookupResponse, error) {
	n, keys, err := s.namespaceKeys(ctx, req.GetNamespaceId(), req.GetKeys())
	if err != nil {
		return nil, err
	}
	res, err := s.lookup(n, keys, req.GetLease(), time.Duration(req.GetLeaseTtlMs())*time.Millisecond)
	if err != nil {
		return nil, err
	}
	if req.GetProbe() { // the owner counted this lookup (LookupRequest.probe)
		s.probed(n, len(keys))
	}
	// Every page of a namespace is its page size: the store answers no
	// sizes, the gRPC answer spells them out.
	resp := &pb.LookupResponse{HitPrefix: uint32(res.HitPrefix), Present: res.Present,
		Sizes: make([]uint64, len(res.Present))}
	for i, ok := range res.Present {
		if ok {
			resp.Sizes[i] = uint64(n.PageBytes)
		}
	}
	if res.Lease != nil {
		resp.Lease = leaseProto(*res.Lease)
	}
	return resp, nil
}

func leaseProto(l store.Lease) *pb.Lease {
	return &pb.Lease{Id: l.ID, ExpiresUnixMs: l.Expires.UnixMilli(), Pages: uint32(l.Pages)}
}

// Get streams pages in request order: a header per page, then its bytes in
// chunks. Each page stays pinned while its bytes are sent; a page not sent
// within Config.StallTimeout cuts the client's connection (stall.go).
func (s *Server) Get(req *pb.GetRequest, stream pb.Strata_GetServer) error {
	ctx := stream.Context()
	n, keys, err := s.namespaceKeys(ctx, req.GetNamespaceId(), req.GetKeys())
	if err != nil {
		return err
	}
	chunk := s.cfg.MaxChunk
	if c := int(req.GetMaxChunkBytes()); c > 0 && c < chunk {
		chunk = c
	}
	alg := pb.ChecksumAlgorithm(n.Checksum)
	send := s.sendCopy(stream, chunk)
	if s.rawData.Load() {
		send = sendByReference(ctx, stream, chunk)
	}
	arm, done := s.stallGuard(ctx)
	defer done()
	return s.read(n, req.GetLeaseId(), keys, func(i int, p store.PageView) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		arm()
		return send(&pb.PageHeader{Index: uint32(i), Found: p.Found, Size: uint64(p.Size),
			Checksum: p.Checksum, ChecksumAlgorithm: alg}, p.Data)
	})
}

// sendCopy sends a page as GetResponse messages marshalled by protobuf (a
// copy of every chunk), for a server built without GRPCOptions.
func (s *Server) sendCopy(stream pb.Strata_GetServer, chunk int) func(*pb.PageHeader, []byte) error {
	msg := &pb.GetResponse{}
	return func(h *pb.PageHeader, data []byte) error {
		msg.Header = h
		for {
			msg.Data = data[:min(chunk, len(data))]
			data = data[len(msg.Data):]
			if err := stream.Send(msg); err != nil {
				return err
			}
			msg.Header = nil
			if len(data) == 0 {
				return nil
			}
		}
	}
}

// sendByReference sends a page as GetResponse messages whose data the
// transport reads straight from the page (dataCodec), and returns once the
// transport holds no reference to it, so the caller may unpin the page. If
// the stream ends first (ctx done: the client went away or the server is
// stopping), it returns without waiting: whatever the transport still
// writes of a page reclaimed meanwhile goes to a stream nobody reads, and a
// reader verifies every page's checksum in any case.
func sendByReference(ctx context.Context, stream pb.Strata_GetServer, chunk int) func(*pb.PageHeader, []byte) error {
	var released chan struct{}
	return func(h *pb.PageHeader, data []byte) error {
		if n := len(data)/chunk + 1; cap(released) < n {
			released = make(chan struct{}, n) // never full: the transport must not block on it
		}
		pending := 0
		var err error
		for first := true; first || len(data) > 0; first = false {
			msg := &pageOut{header: h, data: data[:min(chunk, len(data))], released: released}
			data = data[len(msg.data):]
			err = stream.SendMsg(msg)
			if msg.referenced {
				pending++
			}
			if err != nil {
				break
			}
			h = nil
		}
		for ; pending > 0; pending-- {
			select {
			case <-released:
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			}
		}
		return err
	}
}

// RenewLease extends a lease.
func (s *Server) RenewLease(ctx context.Context, req *pb.RenewLeaseRequest) (*pb.RenewLeaseResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	l, err := s.renewLease(n, req.GetLeaseId(), time.Duration(req.GetTtlMs())*time.Millisecond)
	if err != nil {
		return nil, err
	}
	return &pb.RenewLeaseResponse{Lease: leaseProto(l)}, nil
}

// ReleaseLease ends a lease.
func (s *Server) ReleaseLease(ctx context.Context, req *pb.ReleaseLeaseRequest) (*pb.ReleaseLeaseResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	if err := s.releaseLease(n, req.GetLeaseId()); err != nil {
		return nil, err
	}
	return &pb.ReleaseLeaseResponse{}, nil
}

// Orphans marks pages a cluster lookup found past a missing page of their
// sequence (store.MarkOrphans), and takes back what this node's part of
// the lookup counted for the first Counted of them (store.Uncount).
func (s *Server) Orphans(ctx context.Context, req *pb.OrphansRequest) (*pb.OrphansResponse, error) {
	n, keys, err := s.namespaceKeys(ctx, req.GetNamespaceId(), req.GetKeys())
	if err != nil {
		return nil, err
	}
	marked, err := s.orphans(n, keys, int(req.GetCounted()))
	if err != nil {
		return nil, err
	}
	return &pb.OrphansResponse{Marked: uint32(marked)}, nil
}

// Delete removes pages.
func (s *Server) Delete(ctx context.Context, req *pb.DeleteRequest) (_ *pb.DeleteResponse, err error) {
	deleted := 0
	defer func() {
		s.audit(ctx, "delete keys", err, "ns", shortHex(req.GetNamespaceId()), "keys", len(req.GetKeys()), "deleted", deleted)
	}()
	n, keys, err := s.namespaceKeys(ctx, req.GetNamespaceId(), req.GetKeys())
	if err != nil {
		return nil, err
	}
	deleted, err = s.remove(n, keys)
	if err != nil {
		return nil, err
	}
	return &pb.DeleteResponse{Deleted: uint32(deleted)}, nil
}
