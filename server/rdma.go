package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/rdma"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// The rdma plane (rpc Rdma, strata.proto): a client on another host reads
// pages of the host arena with RDMA READ, the node's CPU only locating
// them. Each Rdma stream is one client queue pair: its first message
// swaps endpoints (the node's carries the arena's region), each later one
// locates pages through the request layer (locate) as the shm get does.
//
// The node's side of the bytes is passive: its queue pair answers the
// client's reads in the device. What keeps a reader from using reclaimed
// bytes is the lease it reads under (pinned pages never move) or, without
// one, the checksum it checks the bytes against (client/rdma.go): a
// remote reader has no generation words to re-check.

// RDMAConfig configures the rdma plane.
type RDMAConfig struct {
	// Device is the open RDMA device queue pairs are made on. Required.
	Device *rdma.Device
	// Host is the tier whose arena Arena registers. Required.
	Host *tiers.Host
	// Arena is Host's arena, registered on Device. Required.
	Arena *rdma.Region
	// Tenants may connect besides the admin (everyone, on an open node):
	// a connected client can read the whole arena, every tenant's pages,
	// as with ShmConfig.Tenants. Default none.
	Tenants []string
}

// RDMAPlane serves Rdma streams until Close.
type RDMAPlane struct {
	s   *Server
	cfg RDMAConfig
	// mu guards closed; streams counts the streams being served, each
	// with a queue pair to close, and their receiving goroutines.
	mu      sync.Mutex
	closed  bool
	streams sync.WaitGroup
}

// ServeRDMA starts serving the rdma plane: Rdma streams, and the
// advertisement in OpenNamespace answers (Advertise).
func (s *Server) ServeRDMA(cfg RDMAConfig) (*RDMAPlane, error) {
	if cfg.Device == nil || cfg.Host == nil || cfg.Arena == nil {
		return nil, errors.New("rdma: Device, Host and Arena are required")
	}
	p := &RDMAPlane{s: s, cfg: cfg}
	if !s.rdma.CompareAndSwap(nil, p) {
		return nil, errors.New("rdma: the plane is served already")
	}
	return p, nil
}

// Close stops serving new streams and waits for those being served to end
// and close their queue pairs: call it after the gRPC server stopped,
// which ends them. The device and the arena's region are the caller's.
func (p *RDMAPlane) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.s.rdma.CompareAndSwap(p, nil)
	p.streams.Wait()
	return nil
}

// Advertise is a gRPC unary interceptor that sets the rdma field of
// OpenNamespace answers to callers that may connect. A nil plane
// advertises nothing, so a node can install it unconditionally.
func (p *RDMAPlane) Advertise(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if p == nil || err != nil || info.FullMethod != pb.Strata_OpenNamespace_FullMethodName {
		return resp, err
	}
	if c, cerr := p.s.callerOf(ctx); cerr == nil && p.may(c) == nil {
		if r, ok := resp.(*pb.OpenNamespaceResponse); ok {
			r.Rdma = &pb.RdmaPlane{Device: p.cfg.Device.Name()}
		}
	}
	return resp, nil
}

// may refuses a caller that may not read the whole arena.
func (p *RDMAPlane) may(c caller) error {
	if c.admin || slices.Contains(p.cfg.Tenants, c.tenant) {
		return nil
	}
	return fmt.Errorf("tenant %q may not read the host arena over rdma, which holds other tenants' pages (not in the node's shm tenants); use the raw plane: %w",
		c.tenant, errDenied)
}

// begin counts a stream in, unless the plane is closed.
func (p *RDMAPlane) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.streams.Add(1)
	return true
}

// Rdma serves one client queue pair (strata.proto, rpc Rdma); a node
// without the plane answers as one that predates it.
func (s *Server) Rdma(stream pb.Strata_RdmaServer) error {
	p := s.rdma.Load()
	if p == nil || !p.begin() {
		return s.UnimplementedStrataServer.Rdma(stream)
	}
	defer p.streams.Done()
	return p.serve(stream)
}

// serve connects the stream's queue pair, then answers locates until the
// client ends the stream, a request is refused or the server stops.
func (p *RDMAPlane) serve(stream pb.Strata_RdmaServer) error {
	ctx := stream.Context()
	c, err := p.s.callerOf(ctx)
	if err != nil {
		return err
	}
	if err := p.may(c); err != nil {
		return err
	}
	next := p.receive(stream)
	req, err := next()
	if err != nil {
		return err
	}
	pair, err := p.connect(stream, req)
	if err != nil {
		return err
	}
	defer pair.Close()
	for {
		req, err := next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := p.locate(ctx, req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// receive reads the stream's requests on a goroutine of the plane's (Close
// waits for it), so that the handler can return when the server stops
// (Server.Stop) while a client is between requests: the stream ends, and
// the goroutine's Recv with it. next returns the next request, io.EOF when
// the client ended the stream, or why it cannot.
func (p *RDMAPlane) receive(stream pb.Strata_RdmaServer) (next func() (*pb.RdmaRequest, error)) {
	ctx := stream.Context()
	reqs, failed := make(chan *pb.RdmaRequest), make(chan error, 1)
	p.streams.Go(func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				failed <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	})
	return func() (*pb.RdmaRequest, error) {
		select {
		case req := <-reqs:
			return req, nil
		case err := <-failed:
			return nil, err
		case <-p.s.stopping:
			return nil, fmt.Errorf("rdma: the node is stopping: %w", store.ErrClosed)
		}
	}
}

// connect makes the stream's queue pair, connects it to the client's
// endpoint (req, the stream's first message) and answers the node's,
// which exposes the arena.
func (p *RDMAPlane) connect(stream pb.Strata_RdmaServer, req *pb.RdmaRequest) (*rdma.Pair, error) {
	if req.GetConnect() == nil {
		return nil, badRequest("rdma: the stream's first message connects")
	}
	remote, err := pbconv.RdmaEndpoint(req.GetConnect())
	if err != nil {
		return nil, badRequest("%v", err)
	}
	pair, err := p.cfg.Device.Pair()
	if err != nil {
		return nil, fmt.Errorf("rdma: %w", err)
	}
	local, err := pair.Local(p.cfg.Arena)
	if err == nil {
		err = pair.Connect(remote)
	}
	if err == nil {
		err = stream.Send(&pb.RdmaResponse{Connect: pbconv.RdmaEndpointProto(local)})
	}
	if err != nil {
		pair.Close()
		return nil, fmt.Errorf("rdma: connecting a client's queue pair: %w", err)
	}
	return pair, nil
}

// locate answers where each page of a locate request lies.
func (p *RDMAPlane) locate(ctx context.Context, req *pb.RdmaRequest) (*pb.RdmaResponse, error) {
	if req.GetConnect() != nil {
		return nil, badRequest("rdma: the stream is connected already")
	}
	n, keys, err := p.s.namespaceKeys(ctx, req.GetNamespaceId(), req.GetKeys())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	pages, err := p.s.locate(n, req.GetLeaseId(), keys, p.cfg.Host)
	if err != nil {
		return nil, err
	}
	resp := &pb.RdmaResponse{Pages: make([]*pb.RdmaPage, len(pages))}
	bytes := 0
	for i, pg := range pages {
		out := &pb.RdmaPage{Found: pg.Found}
		if pg.Found {
			out.Checksum = pg.Checksum
		}
		if pg.Found && pg.Mapped {
			out.Mapped, out.Offset, out.Length = true, uint64(pg.Ext.Off), uint64(pg.Ext.Len)
			bytes += int(pg.Ext.Len)
		}
		resp.Pages[i] = out
	}
	p.s.located(n, bytes, start)
	return resp, nil
}
