// Package server implements strata's gRPC services (strata.v1.Strata and
// strata.v1.Admin) over a store: request validation, tenant checks, the
// namespace handshake, streaming of page bytes, and the mapping of errors to
// gRPC codes.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/metrics"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// Registry records namespaces cluster-wide (etcd). Implementations return
// an error when the record cannot be written.
type Registry interface {
	RegisterNamespace(ctx context.Context, d namespace.Descriptor) error
	// Lookup finds a namespace registered by any node; an error wrapping
	// ErrNotRegistered when there is none.
	Lookup(ctx context.Context, id namespace.ID) (namespace.Descriptor, error)
	// Health reports whether the registry answers.
	Health(ctx context.Context) error
	// Endpoints names where the registry lives, for operators.
	Endpoints() []string
}

// Config configures a Server. Zero fields take their defaults.
type Config struct {
	// NodeID names this node in answers. Required.
	NodeID string
	// Address is the gRPC address clients use, reported by NodeInfo.
	Address string
	// Version is the build version reported by NodeInfo.
	Version string
	// Store holds the pages. Required.
	Store *store.Store
	// Registry, if set, records every namespace opened. Default: none.
	Registry Registry
	// RegistryTimeout bounds one registry call, and at most four fifths of
	// what is left of the caller's deadline. Default 3s.
	RegistryTimeout time.Duration
	// Tokens maps SHA-256 hex of a tenant token (HashToken) to its tenant.
	// Empty (and no AdminTokenHash) runs the node open: any caller may use
	// any namespace. Default empty.
	Tokens map[string]string
	// AdminTokenHash is the SHA-256 hex of the token that may see and use
	// every namespace. Default none.
	AdminTokenHash string
	// MaxBatch caps keys or pages per request. Default 16384.
	MaxBatch int
	// MaxChunk is the largest data chunk sent or accepted. Default 1 MiB.
	MaxChunk int
	// DefaultLeaseTTL and MaxLeaseTTL are reported in the handshake; they
	// must match the store's. Defaults 10s and 60s.
	DefaultLeaseTTL, MaxLeaseTTL time.Duration
	// Membership is the cluster view served by the Cluster service. Default
	// nil: the node is a cluster of one.
	Membership *membership.Membership
	// Coordination, if set, reports the eviction cutoffs the node applies
	// and their coordinator (server/cluster.go). Default nil: none.
	Coordination Coordination
	// Recovery is what start-up recovery found, reported by NodeInfo.
	Recovery []*pb.TierRecovery
	// Logger receives request logs. Default: discard.
	Logger *slog.Logger
}

// Server implements pb.StrataServer and pb.AdminServer.
type Server struct {
	pb.UnimplementedStrataServer
	pb.UnimplementedAdminServer
	pb.UnimplementedClusterServer

	cfg      Config
	log      *slog.Logger
	started  time.Time
	stopping chan struct{} // closed by Stop: ends watch streams
	stopOnce sync.Once

	metrics *metrics.Registry
	// rawData is set once GRPCOptions handed out the data codec: the data
	// handlers then send and receive page bytes by reference.
	rawData atomic.Bool

	mu          sync.RWMutex
	descriptors map[namespace.ID]namespace.Descriptor // guarded by mu
	// unknown remembers, for unknownTTL, namespace IDs the registry did not
	// have, so that requests naming one do not each ask etcd. Guarded by mu.
	unknown map[namespace.ID]time.Time
}

// New validates cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.NodeID == "" {
		return nil, badRequest("server: Store and NodeID are required")
	}
	if cfg.RegistryTimeout <= 0 {
		cfg.RegistryTimeout = 3 * time.Second
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 16384
	}
	if cfg.MaxChunk <= 0 {
		cfg.MaxChunk = 1 << 20
	}
	if cfg.DefaultLeaseTTL <= 0 {
		cfg.DefaultLeaseTTL = 10 * time.Second
	}
	if cfg.MaxLeaseTTL <= 0 {
		cfg.MaxLeaseTTL = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), stopping: make(chan struct{}),
		descriptors: make(map[namespace.ID]namespace.Descriptor), unknown: make(map[namespace.ID]time.Time)}
	s.metrics = metrics.New(s.describe)
	return s, nil
}

// SetRecovery records what start-up recovery found, for NodeInfo. Call it
// before serving.
func (s *Server) SetRecovery(r []*pb.TierRecovery) { s.cfg.Recovery = r }

// Register adds the services to g.
func (s *Server) Register(g *grpc.Server) {
	pb.RegisterStrataServer(g, s)
	pb.RegisterAdminServer(g, s)
	pb.RegisterClusterServer(g, s)
}

// Stop ends long-lived streams (membership watches) so that a graceful
// stop need not wait for their clients.
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// MaxRecvMsgSize is the largest request message the server must accept:
// a full batch of keys or a data chunk, plus framing.
func (s *Server) MaxRecvMsgSize() int {
	return max(s.cfg.MaxChunk, s.cfg.MaxBatch*(namespace.KeySize+8)) + 64<<10
}

// Restore makes a namespace known without the handshake, for namespaces a
// node learns from the registry at start-up.
func (s *Server) Restore(d namespace.Descriptor) error {
	return s.addNamespace(d)
}

func (s *Server) addNamespace(d namespace.Descriptor) error {
	id := d.ID()
	lin, quad := d.PrefillCoefficients()
	if err := s.cfg.Store.AddNamespace(store.Namespace{ID: id, Tenant: d.Tenant,
		PageBytes: int64(d.PageSize()), Checksum: d.Checksum,
		PageTokens: d.PageTokens, FLOPsLinear: lin, FLOPsQuadratic: quad}); err != nil {
		return err
	}
	s.mu.Lock()
	s.descriptors[id] = d
	s.mu.Unlock()
	return nil
}

func (s *Server) descriptor(id namespace.ID) (namespace.Descriptor, bool) {
	s.mu.RLock()
	d, ok := s.descriptors[id]
	s.mu.RUnlock()
	return d, ok
}

// OpenNamespace is the handshake: validate, authorise, register, answer.
func (s *Server) OpenNamespace(ctx context.Context, req *pb.OpenNamespaceRequest) (*pb.OpenNamespaceResponse, error) {
	resp, err := s.openNamespace(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) openNamespace(ctx context.Context, req *pb.OpenNamespaceRequest) (*pb.OpenNamespaceResponse, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetProtocol() != pb.ProtocolVersion_PROTOCOL_VERSION_1 {
		return nil, errorf(errVersion, "protocol %v: this node speaks %v", req.GetProtocol(), pb.ProtocolVersion_PROTOCOL_VERSION_1)
	}
	if req.GetDescriptor_() == nil {
		return nil, badRequest("open namespace: no descriptor")
	}
	d := pbconv.Descriptor(req.GetDescriptor_()).Normalize()
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if err := c.mayUse(d.Tenant); err != nil {
		return nil, err
	}
	id := d.ID()
	if exp := req.GetExpectedId(); len(exp) > 0 && string(exp) != string(id[:]) {
		return nil, errorf(errVersion, "client computed namespace id %x, node computed %s: descriptor encodings differ", exp, id)
	}
	if _, known := s.descriptor(id); !known && s.cfg.Registry != nil {
		// Leave the caller time to hear why: a registry that does not answer
		// is reported before the caller's own deadline.
		timeout := s.cfg.RegistryTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(dl)*4/5)
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := s.cfg.Registry.RegisterNamespace(rctx, d)
		cancel()
		if err != nil {
			return nil, errorf(errRegistry, "registering namespace %s: %v", id.Short(), err)
		}
	}
	if err := s.addNamespace(d); err != nil {
		return nil, err
	}
	s.logger(ctx).Info("namespace opened", "ns", id.Short(), "tenant", d.Tenant, "model", d.Model)
	return &pb.OpenNamespaceResponse{
		NamespaceId:       id[:],
		PageBytes:         d.PageSize(),
		Checksum:          pb.ChecksumAlgorithm(d.Checksum),
		DefaultLeaseTtlMs: uint32(s.cfg.DefaultLeaseTTL.Milliseconds()),
		MaxLeaseTtlMs:     uint32(s.cfg.MaxLeaseTTL.Milliseconds()),
		MaxBatch:          uint32(s.cfg.MaxBatch),
		MaxChunkBytes:     uint32(s.cfg.MaxChunk),
		Protocol:          pb.ProtocolVersion_PROTOCOL_VERSION_1,
		NodeId:            s.cfg.NodeID,
	}, nil
}

// namespaceOf authenticates the caller and resolves a request's namespace.
func (s *Server) namespaceOf(ctx context.Context, raw []byte) (store.Namespace, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		return store.Namespace{}, err
	}
	id, err := namespace.IDFromBytes(raw)
	if err != nil {
		return store.Namespace{}, err
	}
	n, ok := s.cfg.Store.Namespace(id)
	if !ok {
		if n, ok = s.adopt(ctx, id); !ok {
			return store.Namespace{}, errorf(store.ErrNamespaceNotFound, "namespace %s is not registered (open it first)", id.Short())
		}
	}
	return n, c.mayUse(n.Tenant)
}

// adopt makes known a namespace that another node registered after this
// one started, so that its clients need not open it here first.
func (s *Server) adopt(ctx context.Context, id namespace.ID) (store.Namespace, bool) {
	if s.cfg.Registry == nil {
		return store.Namespace{}, false
	}
	now := time.Now()
	s.mu.RLock()
	until, known := s.unknown[id]
	s.mu.RUnlock()
	if known && now.Before(until) {
		return store.Namespace{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RegistryTimeout)
	defer cancel()
	d, err := s.cfg.Registry.Lookup(rctx, id)
	if err != nil || d.ID() != id || s.addNamespace(d) != nil {
		s.mu.Lock()
		if len(s.unknown) >= maxUnknown {
			clear(s.unknown)
		}
		s.unknown[id] = now.Add(unknownTTL)
		s.mu.Unlock()
		return store.Namespace{}, false
	}
	return s.cfg.Store.Namespace(id)
}

// unknownTTL is how long a namespace ID the registry did not have is
// answered as unknown without asking again: a namespace another node
// registers meanwhile is served here at most this much later.
const unknownTTL = time.Second

// maxUnknown bounds the unknown IDs remembered; past it they are forgotten
// at once.
const maxUnknown = 4096

// keysOf validates a batch of wire keys.
// namespaceKeys is namespaceOf and keysOf, for the calls that take a
// namespace and keys.
func (s *Server) namespaceKeys(ctx context.Context, rawNS []byte, rawKeys [][]byte) (store.Namespace, []namespace.Key, error) {
	n, err := s.namespaceOf(ctx, rawNS)
	if err != nil {
		return store.Namespace{}, nil, err
	}
	keys, err := s.keysOf(rawKeys)
	return n, keys, err
}

func (s *Server) keysOf(raw [][]byte) ([]namespace.Key, error) {
	if len(raw) == 0 {
		return nil, badRequest("no keys")
	}
	if len(raw) > s.cfg.MaxBatch {
		return nil, errorf(errBatchTooLarge, "%d keys, the limit is %d", len(raw), s.cfg.MaxBatch)
	}
	keys := make([]namespace.Key, len(raw))
	for i, b := range raw {
		k, err := namespace.KeyFromBytes(b)
		if err != nil {
			return nil, badRequest("key %d: %v", i, err)
		}
		keys[i] = k
	}
	return keys, nil
}

// GRPCOptions are the options of the gRPC server s is registered on: a
// codec that sends Get pages straight from the store's memory (no protobuf
// copy, no pooled message buffer) and hands Put and Write data to the store
// from gRPC's receive buffers (no protobuf copy). The codec speaks standard
// protobuf, so any client works; every other message goes through the
// protobuf codec. Calling GRPCOptions turns the zero-copy data path on: pass
// the options to the grpc.NewServer that s registers on, or do not call it.
func (s *Server) GRPCOptions() []grpc.ServerOption {
	s.rawData.Store(true)
	return []grpc.ServerOption{grpc.ForceServerCodecV2(dataCodec{})}
}

// dataCodec is protobuf, with fast paths for the data messages: it
// marshals *pageOut (a GetResponse whose data is sent by reference) and
// unmarshals into *dataIn (a PutRequest or WriteRequest whose data stays in
// the receive buffers).
type dataCodec struct{}

func protoCodec() encoding.CodecV2 { return encoding.GetCodecV2(grpcproto.Name) }

func (dataCodec) Name() string { return grpcproto.Name }

func (dataCodec) Marshal(v any) (mem.BufferSlice, error) {
	if p, ok := v.(*pageOut); ok {
		return p.marshal()
	}
	return protoCodec().Marshal(v)
}

func (dataCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(*dataIn); ok {
		return d.unmarshal(data)
	}
	return protoCodec().Unmarshal(data, v)
}

// pageOut is one GetResponse: an optional header and a chunk of page bytes
// that the transport reads in place. A chunk of more than a kilobyte is
// referenced, not copied: released receives once the transport is done
// with it, and the sender must keep the bytes unchanged (the page pinned)
// until then.
type pageOut struct {
	header   *pb.PageHeader
	data     []byte
	released chan struct{}
	// referenced is set by marshal when data is referenced: one value will
	// arrive on released.
	referenced bool
}

func (p *pageOut) marshal() (mem.BufferSlice, error) {
	var prefix []byte
	if p.header != nil {
		h, err := proto.Marshal(p.header)
		if err != nil {
			return nil, err
		}
		prefix = protowire.AppendTag(prefix, 1, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, h)
	}
	b, referenced := pb.AppendData(prefix, 2, p.data, p.released)
	p.referenced = p.referenced || referenced
	return b, nil
}

// dataIn is a PutRequest or WriteRequest whose data field is left in gRPC's
// receive buffers: msg receives every other field, data the pieces of the
// data field (views into bufs, which holds a reference until free).
type dataIn struct {
	msg       proto.Message
	dataField protowire.Number
	bufs      mem.BufferSlice
	data      [][]byte
	size      int
}

func (d *dataIn) unmarshal(b mem.BufferSlice) error {
	d.data, d.size = d.data[:0], 0
	rest, err := splitField(b, d.dataField, func(piece []byte, first bool) {
		if first { // a bytes field named twice: the last one wins
			d.data, d.size = d.data[:0], 0
			return
		}
		d.data = append(d.data, piece)
		d.size += len(piece)
	})
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(rest, d.msg); err != nil {
		return err
	}
	if d.size > 0 {
		b.Ref()
		d.bufs = b
	}
	return nil
}

// free drops the reference to the receive buffers.
func (d *dataIn) free() {
	if d.bufs != nil {
		d.bufs.Free()
		d.bufs = nil
	}
	d.data, d.size = d.data[:0], 0
}

// splitField walks a protobuf message held in pieces: the bytes of field
// num (a bytes field) go to piece in order, as views of b, first set on the
// first piece of each occurrence (protobuf keeps the last); every other
// field is copied into rest, a message of its own.
func splitField(b mem.BufferSlice, num protowire.Number, piece func(p []byte, first bool)) (rest []byte, err error) {
	r := pb.NewPieceReader(b)
	for !r.Done() {
		tag, err := r.Varint()
		if err != nil {
			return nil, err
		}
		n, typ := protowire.DecodeTag(tag)
		if n <= 0 {
			return nil, errors.New("bad field number")
		}
		switch typ {
		case protowire.VarintType:
			v, err := r.Varint()
			if err != nil {
				return nil, err
			}
			rest = protowire.AppendVarint(protowire.AppendTag(rest, n, typ), v)
		case protowire.Fixed32Type, protowire.Fixed64Type:
			size := 4
			if typ == protowire.Fixed64Type {
				size = 8
			}
			rest = protowire.AppendTag(rest, n, typ)
			if err := r.Take(size, func(p []byte) { rest = append(rest, p...) }); err != nil {
				return nil, err
			}
		case protowire.BytesType:
			size, err := r.Varint()
			if err != nil {
				return nil, err
			}
			if size > uint64(r.Left()) {
				return nil, io.ErrUnexpectedEOF
			}
			if n == num {
				piece(nil, true)
				if err := r.Take(int(size), func(p []byte) { piece(p, false) }); err != nil {
					return nil, err
				}
				continue
			}
			rest = protowire.AppendVarint(protowire.AppendTag(rest, n, typ), size)
			if err := r.Take(int(size), func(p []byte) { rest = append(rest, p...) }); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("field %d: unsupported wire type %d", n, typ)
		}
	}
	return rest, nil
}
