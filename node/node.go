// Package node assembles one strata node: tiers, store, gRPC services,
// health and reflection, and the registry (an embedded etcd when no
// endpoints are given, or, when an external etcd is unreachable at start,
// a degraded mode from the node's local copy of the registry: degraded.go).
// cmd/stratad is a thin main over Run; tests start real nodes in-process
// with Start. Close drains requests and demotes the volatile tiers' pages
// to the SSD tier before it stops.
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
	"strconv"
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
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// Version is reported by NodeInfo and registrations.
const Version = "0.1.0-dev"

// DefaultReserveShare is Config.ReserveShare's default, the store's
// (store.DefaultReserveShare says why a half).
const DefaultReserveShare = store.DefaultReserveShare

// Config configures a node. Zero fields take their defaults.
type Config struct {
	// Listen is the gRPC listen address. Default "127.0.0.1:7070".
	Listen string
	// DataDir holds the node id and the embedded etcd. Default "strata-data".
	DataDir string
	// Tiers is the tier order, fastest first, from gpu, host and ssd.
	// Default gpu,host,ssd, leaving out gpu and ssd when their capacity is
	// zero and gpu when no GPU is usable.
	Tiers []string
	// HostBytes is the host tier's capacity; memory is committed as pages
	// arrive, or at start with HostPrefault. Default 1 GiB.
	HostBytes int64
	// HostPrefault commits the host tier's memory at start
	// (tiers.HostConfig.Prefault). Default off.
	HostPrefault bool
	// SSDBytes is the SSD tier's capacity. Default 0: no SSD tier.
	SSDBytes int64
	// SSDDir holds the SSD tier's slot files. Default DataDir/ssd.
	SSDDir string
	// SSDSync is the SSD tier's durability mode. Default every-page.
	SSDSync tiers.SyncMode
	// GPUBytes is the GPU tier's capacity. Default 0: no GPU tier.
	GPUBytes int64
	// GPUDevice is the CUDA device of the GPU tier. Default 0.
	GPUDevice int
	// EtcdEndpoints of a shared etcd cluster. Default none: an embedded
	// single-member etcd runs in DataDir/etcd.
	EtcdEndpoints []string
	// EmbeddedEtcdURL is the embedded etcd's client URL (loopback only).
	// Default "http://127.0.0.1:2379"; port 0 picks a free port.
	EmbeddedEtcdURL string
	// LeaseTTL is the default read-lease length. Default 10s.
	LeaseTTL time.Duration
	// MaxLeaseTTL caps read leases. Default 60s.
	MaxLeaseTTL time.Duration
	// ReserveTTL is the default reservation deadline. Default 30s, or
	// MaxReserveTTL when that is shorter.
	ReserveTTL time.Duration
	// TenantTokens maps tenant tokens to tenants ("tenant=token" pairs on
	// the command line). Default none: the node is open.
	TenantTokens map[string]string
	// AdminToken may see and use every namespace. Default none.
	AdminToken string
	// TLSCert and TLSKey are the node's certificate chain and key (PEM,
	// re-read when they change, internal/certs): with them gRPC and the raw
	// data plane serve TLS only, refusing plaintext, and the node presents
	// them to the peers it dials (hints). Default none: plaintext.
	TLSCert, TLSKey string
	// TLSCA is the CA bundle (PEM) peers' certificates are checked against
	// when the node dials them, and clients' with TLSClientAuth. Default:
	// the system roots for peers.
	TLSCA string
	// TLSClientAuth requires every client and peer to present a
	// certificate signed by TLSCA (mTLS). Default off.
	TLSClientAuth bool
	// GossipKeyFile names the gossip keys: base64, one per line (16, 24
	// or 32 bytes each), the first encrypting, all decrypting; the file is
	// re-read every few seconds, so keys rotate without a restart
	// (node/keys.go). Default none: gossip in clear.
	GossipKeyFile string
	// NoReflection turns gRPC server reflection off. Default on.
	NoReflection bool
	// AdminListen is the admin HTTP address (/metrics, /healthz,
	// /debug/pprof). Default "127.0.0.1:0" (a free port, logged and
	// registered in etcd).
	AdminListen string
	// Pprof serves /debug/pprof on the admin address. Default off.
	Pprof bool
	// Advertise is the gRPC address other nodes and clients are told to
	// dial. Default: the listen address, its host replaced, when
	// unspecified (":7070", "0.0.0.0:7070"), by the gossip address's host
	// or else the machine's hostname.
	Advertise string
	// GossipAddr is the memberlist bind address. Default "127.0.0.1:0"
	// (a free port).
	GossipAddr string
	// Join lists gossip addresses of members to join. Default: the nodes
	// registered in etcd; none means this node starts the cluster.
	Join []string
	// Partition, if set, drops gossip to and from the peers it blocks: a
	// fault-injection seam for tests. Default nil.
	Partition *membership.Partition
	// MaxBatch caps keys or pages per request. Default 16384.
	MaxBatch int
	// DrainTimeout bounds the wait for in-flight requests on shutdown.
	// Default 10s.
	DrainTimeout time.Duration
	// ShmSocket is the Unix socket same-host clients map the host arena
	// through (node/shm.go). Default DataDir/strata.sock; "off" disables.
	ShmSocket string
	// AuditLog names a file the audit log is appended to, as JSON lines
	// (server/audit.go: who, what, when for admin actions and tenant
	// changes). Default none: the records go to Logger.
	AuditLog string
	// TenantPoll is how often tenants (tokens, roles, quotas) are re-read
	// from etcd (node/tenants.go). Default 1s.
	TenantPoll time.Duration
	// MaxReserveTTL caps the deadline a reservation may ask for
	// (store.Config.MaxReserveTTL). Default 5m; below an explicit
	// ReserveTTL is an error.
	MaxReserveTTL time.Duration
	// ReserveShare is the most of each tier that one tenant's open
	// reservations may hold, for every tenant alike: from the flags, from
	// etcd with a quota or without, or named by an open node's
	// descriptors (store.Config.ReserveShare). Default
	// DefaultReserveShare; outside (0, 1] is an error, refused before
	// anything is opened.
	ReserveShare float64
	// StallTimeout is how long a gRPC Get may take to send one page (a Put
	// or Write stream to send its next message) before its client's
	// connection is cut, releasing the page (server.Config.StallTimeout),
	// and how long writing one answer may
	// take on the raw data plane (server.RawConfig.WriteTimeout). Default
	// 30s; negative: never on gRPC, the default on the raw plane.
	StallTimeout time.Duration
	// RawIdleTimeout closes raw data-plane connections that send no
	// request for that long (server.RawConfig.IdleTimeout). Default 2
	// minutes; negative: never.
	RawIdleTimeout time.Duration
	// ShmTenants are the tenants whose same-host clients may map the host
	// arena over ShmSocket (server.ShmConfig.Tenants: it holds every
	// tenant's pages). Default none: with tokens, only the admin's
	// clients use shm, tenants' the raw plane.
	ShmTenants []string
	// RawListen is the TCP address of the raw data plane for clients on
	// other hosts (node/shm.go, server/raw.go), advertised to clients in
	// the OpenNamespace answer. Default: a free port on the gRPC host (not
	// the gRPC port + 1, which collides with the next node of a local
	// cluster on consecutive ports); "off" disables (clients use gRPC).
	RawListen string
	// CoordRound is how often the node gossips its value summaries and,
	// when elected coordinator, publishes cluster-wide eviction cutoffs.
	// Default 2s.
	CoordRound time.Duration
	// CoordStaleRounds is how many rounds published cutoffs stay in force
	// without a newer publication before the node falls back to local
	// cutoffs. Default 3.
	CoordStaleRounds int
	// CoordinatorTTL is how long after the coordinator's node dies (or
	// loses etcd) another takes over. Default 3s.
	CoordinatorTTL time.Duration
	// NoCutoffFloor keeps the cluster's eviction cutoffs out of admission
	// (coord.Config.NoFloor). Default false.
	NoCutoffFloor bool
	// OrphanGrace is how long after its commit a page whose parent was
	// dropped elsewhere is only marked as an orphan instead of dropped
	// (store.Config.OrphanGrace). Default 1s; negative: none.
	OrphanGrace time.Duration
	// LookupBookkeeping is the most of the node's CPU time that lookups'
	// eviction bookkeeping may take before lookups shed it
	// (store.Config.LookupBookkeeping). Default 0.25; negative: no limit.
	LookupBookkeeping float64
	// Handoff tunes the hinted handoff (eviction/peer.Handoff): pages
	// this node holds whose owner is another alive member go back to it.
	// Handoff.Every negative turns it off.
	Handoff peer.HandoffConfig
	// EtcdDialTimeout bounds the first round trip to etcd at start (and
	// each attempt to reach it again while degraded). Default 5s.
	EtcdDialTimeout time.Duration
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7070"
	}
	if c.DataDir == "" {
		c.DataDir = "strata-data"
	}
	if c.TenantPoll <= 0 {
		c.TenantPoll = time.Second
	}
	if c.HostBytes <= 0 {
		c.HostBytes = 1 << 30
	}
	if c.EmbeddedEtcdURL == "" {
		c.EmbeddedEtcdURL = registry.DefaultEmbeddedClientURL
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.MaxLeaseTTL <= 0 {
		c.MaxLeaseTTL = time.Minute
	}
	if c.AdminListen == "" {
		c.AdminListen = "127.0.0.1:0"
	}
	if c.GossipAddr == "" {
		c.GossipAddr = "127.0.0.1:0"
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

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
	handoff  *peer.Handoff          // nil when off
	shm      *server.ShmListener    // nil without a host tier or with ShmSocket "off"
	raw      *server.RawListener    // nil with RawListen "off" or when it could not bind
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
	if n.tls, err = n.serverTLS(); err != nil {
		return err
	}
	if n.store, err = store.New(store.Config{Tiers: n.tiers, DefaultLeaseTTL: cfg.LeaseTTL,
		MaxLeaseTTL: cfg.MaxLeaseTTL, ReserveTTL: cfg.ReserveTTL, MaxReserveTTL: cfg.MaxReserveTTL, ReserveShare: cfg.ReserveShare,
		OnRemoteParent: n.hints.Add, OrphanGrace: cfg.OrphanGrace,
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
	if reg := n.reg.Load(); reg != nil {
		if err := n.startCoord(reg); err != nil {
			return err
		}
	}
	srv, err := server.New(server.Config{NodeID: n.id, Address: n.addr, Version: Version,
		Store: n.store, Registry: registryAdapter{n}, Membership: n.members, Coordination: coordView{n},
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
	n.grpc = grpc.NewServer(n.grpcOptions(srv)...)
	srv.Register(n.grpc)
	srv.Metrics().ReadStore(storeMetrics{n.store})
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
	n.log.Info("strata node serving", "node", n.id, "addr", n.lis.Addr().String(),
		"admin", n.AdminAddr(), "gossip", n.members.GossipAddress(), "etcd", strings.Join(n.endpoints(), ","), "host_bytes", cfg.HostBytes,
		"open", len(cfg.TenantTokens) == 0 && cfg.AdminToken == "", "degraded", n.degraded.Load())
	return nil
}

// register records the node in etcd and refreshes the local copy from it.
func (n *Node) register(ctx context.Context, reg *registry.Registry) error {
	self := n.registration()
	if err := reg.RegisterNode(ctx, self); err != nil {
		return fmt.Errorf("registering node: %w", err)
	}
	n.refreshCopy(ctx, reg, self)
	return nil
}

// registration is the node's record in etcd.
func (n *Node) registration() registry.Node {
	return registry.Node{ID: n.id, GRPCAddress: n.addr,
		GossipAddress: n.members.GossipAddress(), AdminAddress: n.AdminAddr(),
		StartedUnixMs: time.Now().UnixMilli(), Version: Version, Tiers: n.tierInfo()}
}

// openRegistry opens the registry: on the embedded etcd it starts when
// there are no endpoints (failing to start it is an error), or on the
// external one. An external etcd that cannot be reached leaves the node
// degraded (reg nil) rather than failing the start.
func (n *Node) openRegistry(ctx context.Context) error {
	endpoints := n.cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		var err error
		n.etcd, err = registry.StartEmbedded(ctx, registry.EmbeddedConfig{Dir: filepath.Join(n.cfg.DataDir, "etcd"),
			ClientURL: n.cfg.EmbeddedEtcdURL, Logger: n.log})
		if err != nil {
			return err
		}
		endpoints = n.etcd.Endpoints()
	}
	reg, err := registry.Open(ctx, n.registryConfig(endpoints))
	if err != nil && n.etcd == nil && errors.Is(err, registry.ErrUnavailable) {
		n.degraded.Store(true)
		n.log.Warn("etcd unreachable: starting degraded from the local copy of the registry; will register when it answers",
			"etcd", strings.Join(endpoints, ","), "namespaces", len(n.copy.namespaces()), "peers", len(n.copy.peers()), "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	n.reg.Store(reg)
	return nil
}

func (n *Node) registryConfig(endpoints []string) registry.Config {
	return registry.Config{Endpoints: endpoints, DialTimeout: n.cfg.EtcdDialTimeout, Logger: n.log}
}

func (n *Node) endpoints() []string {
	if n.etcd != nil {
		return n.etcd.Endpoints()
	}
	return n.cfg.EtcdEndpoints
}

// startMembership joins the gossip cluster: through Join, or the nodes
// registered in etcd, or alone when there are none.
func (n *Node) startMembership(ctx context.Context) error {
	host, portStr, err := net.SplitHostPort(n.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip address %q: %w", n.cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	seeds := n.cfg.Join
	if len(seeds) == 0 {
		if reg := n.reg.Load(); reg != nil {
			if seeds, err = n.peers(ctx, reg); err != nil {
				return err
			}
		} else {
			seeds = n.copy.peers()
		}
	}
	keys, err := n.cfg.gossipKeys()
	if err != nil {
		return err
	}
	n.members, err = membership.Start(ctx, membership.Config{NodeID: n.id, BindAddr: host, BindPort: port,
		Seeds: seeds, AllowAlone: len(n.cfg.Join) == 0, Meta: n.meta, Keys: keys, Partition: n.cfg.Partition, Logger: n.log})
	if err != nil {
		return fmt.Errorf("joining the cluster: %w", err)
	}
	n.keys = keys
	return nil
}

// peers returns the gossip addresses of the other nodes registered in etcd.
func (n *Node) peers(ctx context.Context, reg *registry.Registry) ([]string, error) {
	nodes, err := reg.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding cluster members in etcd: %w", err)
	}
	var seeds []string
	for _, r := range nodes {
		if r.ID != n.id && r.GossipAddress != "" {
			seeds = append(seeds, r.GossipAddress)
		}
	}
	return seeds, nil
}

// meta is what this node advertises in gossip.
func (n *Node) meta() membership.Meta {
	m := membership.Meta{NodeID: n.id, GRPCAddress: n.addr}
	if a := n.rawAdv.Load(); a != nil {
		m.RawAddress = *a
	}
	for _, t := range n.tiers {
		st := t.Stats()
		m.Tiers = append(m.Tiers, membership.TierMeta{Kind: st.Kind.String(), Capacity: st.Capacity, Used: st.Used})
	}
	return n.withSummaries(m)
}

// advertise re-broadcasts the node's metadata (tier usage) every few
// seconds until Close.
func (n *Node) advertise() {
	n.every(advertiseEvery, func() {
		ctx, cancel := context.WithTimeout(context.Background(), advertiseEvery)
		if err := n.members.UpdateMeta(ctx); err != nil {
			n.log.Debug("advertising metadata", "err", err)
		}
		cancel()
	})
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

// advertiseEvery is how often tier usage is re-gossiped.
const advertiseEvery = 5 * time.Second

// restoreNamespaces makes the namespaces in the registry (or, degraded,
// in the local copy) known again, so a restarted node answers for them
// before any client re-opens them.
func (n *Node) restoreNamespaces(ctx context.Context, srv *server.Server) error {
	recs := n.copy.namespaces()
	if reg := n.reg.Load(); reg != nil {
		var err error
		if recs, err = reg.Namespaces(ctx, ""); err != nil {
			return fmt.Errorf("loading namespaces: %w", err)
		}
	}
	n.restore(srv, recs)
	return nil
}

func (n *Node) restore(srv *server.Server, recs []registry.NamespaceRecord) {
	for _, r := range recs {
		d, err := namespace.Decode(r.Canonical)
		if err == nil {
			err = srv.Restore(d)
		}
		if err != nil {
			n.log.Warn("skipping registered namespace", "ns", r.ID, "err", err)
		}
	}
}

func (n *Node) tierInfo() []registry.TierInfo {
	var out []registry.TierInfo
	for _, t := range n.tiers {
		st := t.Stats()
		out = append(out, registry.TierInfo{Kind: st.Kind.String(), Capacity: st.Capacity, Used: st.Used})
	}
	return out
}

func durableTiers(ts []tiers.Tier) []tiers.Tier {
	var out []tiers.Tier
	for _, t := range ts {
		if _, ok := t.(tiers.Durable); ok {
			out = append(out, t)
		}
	}
	return out
}

// grpcOptions are the gRPC server's: the server's options first (its codec
// sends page bytes by reference from the arena and keeps received ones in
// gRPC's buffers), TLS when configured, keepalive, windows.
func (n *Node) grpcOptions(srv *server.Server) []grpc.ServerOption {
	opts := append(srv.GRPCOptions(),
		grpc.ChainUnaryInterceptor(srv.UnaryInterceptor, n.raw.Advertise),
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

// Close drains in-flight requests, demotes the pages of the volatile tiers
// to the SSD tier (most valuable first; both within DrainTimeout of the
// call), then releases every reservation and lease, deregisters and stops
// etcd.
func (n *Node) Close() error {
	began := time.Now()
	n.health.Shutdown()
	close(n.stop)
	n.cancel()
	if n.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = n.admin.Shutdown(ctx)
		cancel()
	}
	n.wg.Wait()
	n.closeCoord() // resign first: another node takes over at once
	if err := n.members.Leave(2 * time.Second); err != nil {
		n.log.Warn("leaving the cluster", "err", err)
	}
	n.srv.Stop()
	done := make(chan struct{})
	go func() {
		n.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(n.cfg.DrainTimeout):
		n.log.Warn("drain timeout passed; closing remaining requests")
		n.grpc.Stop()
		<-done
	}
	err := <-n.served
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	n.demoteVolatile(began.Add(n.cfg.DrainTimeout))
	return errors.Join(err, n.closeParts())
}

// demoteVolatile moves what the volatile tiers hold to the durable one
// (store.DemoteAll), most valuable first, until deadline: a planned
// restart keeps those pages.
func (n *Node) demoteVolatile(deadline time.Time) {
	if len(durableTiers(n.tiers)) == 0 || len(durableTiers(n.tiers)) == len(n.tiers) {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	began := time.Now()
	moved, err := n.store.DemoteAll(ctx)
	if err != nil {
		n.log.Warn("shutdown: drain timeout passed before every volatile page was demoted", "moved", moved,
			"took", time.Since(began).Round(time.Millisecond))
		return
	}
	n.log.Info("shutdown: volatile pages demoted to the durable tier", "moved", moved,
		"took", time.Since(began).Round(time.Millisecond))
}

// closeCoord stops coordination and the hint sender; it is idempotent.
func (n *Node) closeCoord() {
	if c := n.coord.Load(); c != nil {
		c.Close()
	}
	if n.hints != nil {
		n.hints.Close()
	}
	if n.handoff != nil {
		n.handoff.Close()
	}
}

func (n *Node) closeParts() error {
	var errs []error
	n.closeCoord()
	if n.shm != nil {
		errs = append(errs, n.shm.Close())
	}
	if n.raw != nil {
		errs = append(errs, n.raw.Close())
	}
	if n.members != nil {
		errs = append(errs, n.members.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if reg := n.reg.Load(); reg != nil {
		errs = append(errs, reg.Close())
	}
	if n.etcd != nil {
		n.etcd.Close()
	}
	if n.auditF != nil {
		errs = append(errs, n.auditF.Close())
	}
	for _, t := range n.tiers {
		errs = append(errs, t.Close())
	}
	if n.lis != nil && n.grpc == nil {
		errs = append(errs, n.lis.Close())
	}
	return errors.Join(errs...)
}

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

func hashTokens(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for tok, tenant := range m {
		out[server.HashToken(tok)] = tenant
	}
	return out
}

func hashOptional(tok string) string {
	if tok == "" {
		return ""
	}
	return server.HashToken(tok)
}

// registryAdapter records namespaces in the registry for the server, and
// in the node's local copy; while the node is degraded (no registry) it
// fails with registry.ErrUnavailable.
type registryAdapter struct{ n *Node }

// errDegraded says why a registry call fails while the node is degraded.
var errDegraded = fmt.Errorf("degraded: etcd was unreachable at start; serving the namespaces known locally: %w",
	registry.ErrUnavailable)

func (a registryAdapter) reg() (*registry.Registry, error) {
	if r := a.n.reg.Load(); r != nil {
		return r, nil
	}
	return nil, errDegraded
}

func (a registryAdapter) Health(ctx context.Context) error {
	r, err := a.reg()
	if err != nil {
		return err
	}
	return r.Health(ctx)
}

// DeleteNamespace removes a namespace's registration (strata ns rm).
func (a registryAdapter) DeleteNamespace(ctx context.Context, id namespace.ID) error {
	r, err := a.reg()
	if err != nil {
		return err
	}
	if err := r.DeleteNamespace(ctx, id.String()); err != nil && !errors.Is(err, registry.ErrNotFound) {
		return err
	}
	return nil
}

func (a registryAdapter) Lookup(ctx context.Context, id namespace.ID) (namespace.Descriptor, error) {
	r, err := a.reg()
	if err != nil {
		return namespace.Descriptor{}, err
	}
	rec, err := r.Namespace(ctx, id.String())
	if err != nil {
		return namespace.Descriptor{}, err
	}
	d, err := namespace.Decode(rec.Canonical)
	if err == nil {
		a.n.keep(rec)
	}
	return d, err
}

func (a registryAdapter) Endpoints() []string { return a.n.endpoints() }

func (a registryAdapter) RegisterNamespace(ctx context.Context, d namespace.Descriptor) error {
	r, err := a.reg()
	if err != nil {
		return err
	}
	rec := registry.NamespaceRecord{ID: d.ID().String(), Tenant: d.Tenant,
		Canonical: d.Canonical(), CreatedUnixMs: time.Now().UnixMilli()}
	if _, err := r.PutNamespace(ctx, rec); err != nil {
		return err
	}
	a.n.keep(rec)
	return nil
}
