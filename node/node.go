// Package node assembles one strata node: tiers, store, gRPC services,
// health and reflection, and the registry (an embedded etcd when no
// endpoints are given, or, when an external etcd is unreachable at start,
// a degraded mode from the node's local copy of the registry: degraded.go).
// cmd/stratad is a thin main over Run; tests start real nodes in-process
// with Start. Close drains requests and demotes the volatile tiers' pages
// to the SSD tier before it stops.
//
// One file per concern: node.go starts the parts in order (Start) and
// holds the Node; config.go the Config and its defaults; tiers.go opens
// the tiers; registry.go the registry, the node's registration and the
// server's view of namespaces; degraded.go and localcopy.go a start
// without etcd; membership.go gossip and what the node advertises;
// security.go TLS, peer dialling and the gossip keys; tenants.go tenants
// and the audit log; coord.go coordinated eviction and the peer work;
// shm.go the shm and raw data planes; admin.go the admin HTTP server and
// metrics.go what it exports; shutdown.go Close.
package node

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/stratakv/strata/eviction/coord"
	"github.com/stratakv/strata/internal/grpcbuf"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
	"github.com/stratakv/strata/transfer"
)

// Version is reported by NodeInfo and registrations.
const Version = "0.1.0-dev"

// Node is a running node.
type Node struct {
	cfg    Config
	log    *slog.Logger
	id     string
	lis    net.Listener
	addr   string // the gRPC address others are told (Config.Advertise)
	grpc   *grpc.Server
	health *health.Server
	store  *store.Store
	tiers  []tiers.Tier
	// reg is nil while the node runs degraded: its etcd was unreachable
	// at start and rejoinRegistry has not reached it yet (degraded.go).
	reg      atomic.Pointer[registry.Registry]
	etcd     *registry.Embedded // nil with external endpoints
	copy     *localCopy         // what the node needs from etcd, kept in DataDir
	degraded atomic.Bool        // reg is nil
	members  *membership.Membership
	srv      *server.Server
	coord    atomic.Pointer[coord.Coord] // nil until startCoord
	hints    *peer.Sender
	events   *nodeEvents            // nil without Config.Events.Tenants (events.go)
	queries  peerQueries            // the cluster prefix query's connections (query.go)
	handoff  *peer.Handoff          // nil when off
	rooms    *transfer.Rooms        // the transfer rooms (transfer.go)
	pins     *peer.Pinner           // pins the rooms' pages where they live
	shm      *server.ShmListener    // nil without a host tier or with ShmSocket "off"
	raw      *server.RawListener    // nil with RawListen "off" or when it could not bind
	rdma     *rdmaPlane             // nil without RDMADevice or when it could not serve (rdma.go)
	rawAdv   atomic.Pointer[string] // the raw address gossiped (meta reads it from memberlist's goroutines)
	tls      *tls.Config            // the listeners' TLS; nil: plaintext
	keys     [][]byte               // the gossip keys at start; nil: gossip in clear
	audit    *slog.Logger           // the audit log (Config.AuditLog)
	auditF   *os.File               // nil without Config.AuditLog
	tenants  map[string]string      // the etcd tenants last read, name to token hash and role; the poll's own
	admin    *http.Server
	adminLis net.Listener
	served   chan error
	stop     chan struct{}   // closed by Close: stops advertise and rejoinRegistry
	ctx      context.Context // cancelled by Close and a failed Start
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// Start brings a node up and serves until Close. It installs strata's gRPC
// buffer pool as the process's default (grpcbuf.Install) first. On error
// every part it had started is closed again. When the external etcd
// (Config.EtcdEndpoints) cannot be reached, the node starts degraded from
// its local copy of the registry (degraded.go) instead of failing.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	grpcbuf.Install() // before the node's first gRPC use (the embedded etcd is the first)
	cfg.setDefaults()
	n := &Node{cfg: cfg, log: cfg.Logger, served: make(chan error, 1), stop: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.start(ctx); err != nil {
		n.cancel()
		if cerr := n.closeParts(); cerr != nil {
			n.log.Warn("closing the parts of a node that failed to start", "err", cerr)
		}
		return nil, err
	}
	return n, nil
}

// start does Start's work; on error the caller closes what it started.
func (n *Node) start(ctx context.Context) error {
	cfg := n.cfg
	if s := cfg.ReserveShare; s != 0 && !(s > 0 && s <= 1) { // NaN too
		return fmt.Errorf("reserve share %v: want a share of each tier in (0, 1]", s)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	var err error
	if n.id, err = nodeID(cfg.DataDir); err != nil {
		return err
	}
	if n.copy, err = loadLocalCopy(cfg.DataDir); err != nil {
		n.log.Warn("ignoring the local copy of the registry", "err", err)
	}
	if err := n.openTiers(); err != nil {
		return err
	}
	if err := n.openAudit(); err != nil {
		return err
	}
	n.hints = peer.New(n.id, cfg.peerDial(), n.log)
	n.queries.opts = cfg.peerDial()
	if n.tls, err = n.serverTLS(); err != nil {
		return err
	}
	if err := n.startEvents(); err != nil {
		return err
	}
	if n.store, err = store.New(store.Config{Tiers: n.tiers, DefaultLeaseTTL: cfg.LeaseTTL,
		MaxLeaseTTL: cfg.MaxLeaseTTL, ReserveTTL: cfg.ReserveTTL, MaxReserveTTL: cfg.MaxReserveTTL, ReserveShare: cfg.ReserveShare,
		OnRemoteParent: n.hints.Add, OnEvent: n.eventHook(), OrphanGrace: cfg.OrphanGrace,
		LookupBookkeeping: cfg.LookupBookkeeping, Logger: n.log}); err != nil {
		return err
	}
	if err := n.openRegistry(ctx); err != nil {
		return err
	}
	if n.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	n.addr = advertised(n.lis.Addr().String(), cfg.Advertise, cfg.GossipAddr)
	if err := n.startMembership(ctx); err != nil {
		return err
	}
	n.hints.Start(n.members)
	if cfg.Handoff.Every >= 0 {
		n.handoff = peer.NewHandoff(n.id, n.store, cfg.peerDial(), cfg.Handoff, n.log)
		n.handoff.Start(n.members)
	}
	n.startTransfer()
	if reg := n.reg.Load(); reg != nil {
		if err := n.startCoord(reg); err != nil {
			return err
		}
	}
	srv, err := server.New(server.Config{NodeID: n.id, Address: n.addr, Version: Version,
		Store: n.store, Registry: registryAdapter{n}, Membership: n.members, Coordination: coordView{n}, Rooms: n.rooms,
		Events: eventStreams{n.events}, Snapshots: n, Peers: &n.queries,
		Tokens: hashTokens(cfg.TenantTokens), AdminTokenHash: hashOptional(cfg.AdminToken), MaxBatch: cfg.MaxBatch,
		DefaultLeaseTTL: cfg.LeaseTTL, MaxLeaseTTL: cfg.MaxLeaseTTL, StallTimeout: cfg.StallTimeout, Audit: n.audit, Logger: n.log})
	if err != nil {
		return err
	}
	n.srv = srv
	if err := n.loadTenants(ctx); err != nil {
		return fmt.Errorf("loading tenants: %w", err)
	}
	if err := n.restoreNamespaces(ctx, srv); err != nil {
		return err
	}
	n.clearPreviousIncarnation()
	rec, err := n.store.Recover()
	if err != nil {
		return err
	}
	srv.SetRecovery(recoveryProto(durableTiers(n.tiers), rec))
	n.startRaw(srv)
	if n.raw != nil {
		a := n.raw.Addr()
		n.rawAdv.Store(&a)
		if err := n.members.UpdateMeta(ctx); err != nil {
			n.log.Warn("gossiping the raw data plane's address", "err", err)
		}
	}
	n.startRDMA(srv)
	n.grpc = grpc.NewServer(n.grpcOptions(srv)...)
	srv.Register(n.grpc)
	srv.Metrics().ReadStore(storeMetrics{n.store})
	srv.Metrics().ReadRooms(roomMetrics{n.rooms})
	srv.Metrics().ReadEvents(eventStreams{n.events})
	if err := n.startAdmin(); err != nil {
		return err
	}
	n.health = health.NewServer()
	healthpb.RegisterHealthServer(n.grpc, n.health)
	if !cfg.NoReflection {
		reflection.Register(n.grpc)
	}
	if reg := n.reg.Load(); reg != nil {
		if err := n.register(ctx, reg); err != nil {
			return err
		}
	}
	n.startShm(srv)
	go func() { n.served <- n.grpc.Serve(srv.Track(n.lis)) }()
	n.wg.Add(1)
	go n.advertise()
	n.sweepRooms()
	if n.degraded.Load() {
		n.health.SetServingStatus(RegistryHealthService, healthpb.HealthCheckResponse_NOT_SERVING)
		n.wg.Add(1)
		go n.rejoinRegistry()
	} else {
		n.health.SetServingStatus(RegistryHealthService, healthpb.HealthCheckResponse_SERVING)
	}
	if len(n.keys) > 0 {
		n.wg.Add(1)
		go n.watchGossipKeys(n.keys)
	}
	n.wg.Add(1)
	go n.watchTenants()
	n.watchLostStreams()
	n.log.Info("strata node serving", "node", n.id, "addr", n.lis.Addr().String(),
		"admin", n.AdminAddr(), "gossip", n.members.GossipAddress(), "etcd", strings.Join(n.endpoints(), ","), "host_bytes", cfg.HostBytes,
		"open", len(cfg.TenantTokens) == 0 && cfg.AdminToken == "", "degraded", n.degraded.Load())
	return nil
}

// every runs f every d until Close, on a goroutine of n.wg (counted by the
// caller).
func (n *Node) every(d time.Duration, f func()) {
	defer n.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			f()
		}
	}
}

// grpcOptions are the gRPC server's: the server's options first (its codec
// sends page bytes by reference from the arena and keeps received ones in
// gRPC's buffers), TLS when configured, keepalive, windows; the hint
// sender sees the child hints the server accepts (who holds a parent's
// children: its gone notice goes to them, peer.Holders).
func (n *Node) grpcOptions(srv *server.Server) []grpc.ServerOption {
	opts := append(srv.GRPCOptions(),
		grpc.ChainUnaryInterceptor(srv.UnaryInterceptor, n.raw.Advertise, n.rdma.server().Advertise, n.hints.Received),
		grpc.ChainStreamInterceptor(srv.StreamInterceptor),
		grpc.MaxRecvMsgSize(srv.MaxRecvMsgSize()),
		grpc.InitialWindowSize(8<<20),
		grpc.InitialConnWindowSize(32<<20),
		grpc.ReadBufferSize(256<<10),
		grpc.WriteBufferSize(256<<10),
	)
	if n.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(n.tls)))
	}
	// Dead peers are found by pings (a connection silent for a minute is
	// pinged, and closed if the ping is not answered in 20s); clients may
	// ping every 10s.
	opts = append(opts,
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	return opts
}

// Addr is the address the node serves gRPC on.
func (n *Node) Addr() string { return n.addr }

// advertised is the address to tell others (see Config.Advertise): listen
// is the bound address, gossip the gossip bind address.
func advertised(listen, advertise, gossip string) string {
	if advertise != "" {
		return advertise
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return listen
	}
	if g, _, err := net.SplitHostPort(gossip); err == nil && g != "" {
		if ip := net.ParseIP(g); ip == nil || !ip.IsUnspecified() {
			return net.JoinHostPort(g, port)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return net.JoinHostPort(h, port)
	}
	return listen
}

// ID is the node's id, kept in DataDir across restarts.
func (n *Node) ID() string { return n.id }

// GossipAddress is the node's memberlist endpoint.
func (n *Node) GossipAddress() string { return n.members.GossipAddress() }

// EtcdEndpoints are the etcd endpoints the node uses.
func (n *Node) EtcdEndpoints() []string { return n.endpoints() }

// Run starts a node and serves until ctx is done, then drains and stops.
func Run(ctx context.Context, cfg Config) error {
	n, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	n.log.Info("shutting down: draining requests")
	return n.Close()
}

// nodeID reads the node's id from dir, creating it on first start.
func nodeID(dir string) (string, error) {
	p := filepath.Join(dir, "node-id")
	if b, err := os.ReadFile(p); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading node id: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := "node-" + hex.EncodeToString(b[:])
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing node id: %w", err)
	}
	return id, nil
}
