// Package server serves a store to clients: strata's gRPC services
// (strata.v1.Strata, Admin and Cluster) and the frame protocol's data
// plane over raw tcp and a same-host Unix socket (shm). One transport-
// neutral request layer (requests*.go, auth.go) authenticates, checks
// tenants, validates requests and runs the operations, and is the only
// code that calls the store; the gRPC handlers
// (grpc_*.go, admin.go, ops.go, cluster.go) and the frame handlers
// (frame_*.go) only decode, call it and encode; page specs are decoded from
// either wire and validated in specs.go. Errors become gRPC status
// codes and reasons and frame error codes in one table (errors.go), the
// store's per-page outcomes wire statuses in another (statuses.go).
package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/metrics"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/transfer"
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
	// Rooms serves the Transfer service (requests_transfer.go). Default
	// nil: the node refuses transfer calls.
	Rooms *transfer.Rooms
	// Events gives the node's KV event streams, reported by NodeInfo.
	// Default nil: none.
	Events metrics.EventsSource
	// Snapshots takes the dumps SnapshotKeys serves (snapshot.go).
	// Default nil: SnapshotKeys fails with ErrNoEventStream.
	Snapshots Snapshots
	// Peers asks the other members a cluster prefix query (query.go).
	// Default nil: a cluster query reports every other member as not
	// answering.
	Peers PrefixPeers
	// Recovery is what start-up recovery found, reported by NodeInfo.
	Recovery []*pb.TierRecovery
	// StallTimeout is how long a gRPC Get may take to send one page, or a
	// Put or Write stream to send its next message, before the client's
	// connection is cut (stall.go; it needs the listener wrapped by
	// Track). Default 30s; negative: never.
	StallTimeout time.Duration
	// Audit receives the audit log (audit.go): one record per admin
	// action. Default: Logger.
	Audit *slog.Logger
	// Logger receives request logs. Default: discard.
	Logger *slog.Logger
}

// Server implements pb.StrataServer and pb.AdminServer.
type Server struct {
	pb.UnimplementedStrataServer
	pb.UnimplementedAdminServer
	pb.UnimplementedClusterServer
	pb.UnimplementedTransferServer

	cfg      Config
	log      *slog.Logger
	started  time.Time
	stopping chan struct{} // closed by Stop: ends watch streams
	stopOnce sync.Once

	metrics *metrics.Registry
	conns   connSet // the gRPC connections accepted through Track
	// tokenMap is the tenant tokens in force (Config.Tokens, then
	// SetTokens).
	tokenMap atomic.Pointer[tokenSet]
	// rawData is set once GRPCOptions handed out the data codec: the data
	// handlers then send and receive page bytes by reference.
	rawData atomic.Bool
	// rdma is the rdma plane being served (ServeRDMA, rdma.go); nil: none.
	rdma atomic.Pointer[RDMAPlane]

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
	if cfg.Audit == nil {
		cfg.Audit = cfg.Logger
	}
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), stopping: make(chan struct{}),
		descriptors: make(map[namespace.ID]namespace.Descriptor), unknown: make(map[namespace.ID]time.Time)}
	s.SetTokens(cfg.Tokens, nil)
	s.metrics = metrics.New(s.describe)
	return s, nil
}

// SetRecovery records what start-up recovery found, for NodeInfo. Call it
// before serving.
func (s *Server) SetRecovery(r []*pb.TierRecovery) { s.cfg.Recovery = r }

// Register adds the services to g (a *grpc.Server).
// Their handlers' errors become gRPC statuses (toStatus) on the way out,
// before any interceptor sees them.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	for _, d := range []*grpc.ServiceDesc{&pb.Strata_ServiceDesc, &pb.Admin_ServiceDesc, &pb.Cluster_ServiceDesc, &pb.Transfer_ServiceDesc} {
		g.RegisterService(withStatus(d), s)
	}
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

// OpenNamespace is the handshake: validate, authorise, register, answer.
func (s *Server) OpenNamespace(ctx context.Context, req *pb.OpenNamespaceRequest) (*pb.OpenNamespaceResponse, error) {
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

// namespaceOf authenticates a gRPC request and resolves its namespace.
func (s *Server) namespaceOf(ctx context.Context, raw []byte) (store.Namespace, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		return store.Namespace{}, err
	}
	id, err := namespace.IDFromBytes(raw)
	if err != nil {
		return store.Namespace{}, err
	}
	return s.resolve(ctx, c, id)
}

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

// keysOf decodes a batch of wire keys.
func (s *Server) keysOf(raw [][]byte) ([]namespace.Key, error) {
	if err := s.checkBatch(len(raw), "keys"); err != nil {
		return nil, err
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
