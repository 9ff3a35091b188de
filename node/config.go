package node

import (
	"log/slog"
	"time"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
	"github.com/stratakv/strata/transfer"
)

// The node's configuration: every field, its default, and setDefaults,
// which fills the zero fields in once, at Start.

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
	// (node/security.go). Default none: gossip in clear.
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
	// registered in etcd; none means this node starts the cluster. A join
	// exchanges state with three of them at random
	// (membership.Config.JoinFanout).
	Join []string
	// GossipProfile is memberlist's set of defaults: membership.ProfileLocal
	// (clusters of up to about fifty), ProfileLAN (fifty and more in one
	// datacenter; simulated to 1,000, docs/design.md §6.7) or ProfileWAN
	// (across sites); the fields below
	// override it one by one. Default local.
	GossipProfile membership.Profile
	// GossipProbeInterval, GossipInterval, GossipNodes and
	// GossipPushPullInterval override the profile's (membership.Config has
	// their meaning). Default 0: the profile's.
	GossipProbeInterval, GossipInterval, GossipPushPullInterval time.Duration
	GossipNodes                                                 int
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
	// RDMADevice is the RDMA device (as ibv_devices names it) the node
	// serves the rdma plane on: clients on other hosts read the host
	// arena's pages with RDMA READ (node/rdma.go, server/rdma.go), the
	// admin's and ShmTenants' clients only, since the arena holds every
	// tenant's pages. Registering the arena commits its memory. It needs a
	// build with the rdma tag; a node that cannot serve the plane logs why
	// and runs without it. Default "": off.
	RDMADevice string
	// RDMAGIDIndex is the GID index the rdma plane addresses peers by
	// (RoCE, soft-RoCE included, needs the right one). Default 0.
	RDMAGIDIndex int
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
	// Handoff tunes the hinted handoff (peer.Handoff): pages
	// this node holds whose owner is another alive member go back to it.
	// Handoff.Every negative turns it off.
	Handoff peer.HandoffConfig
	// Transfer tunes the transfer rooms (transfer.Config; its Pinner is
	// the node's). MaxPinnedBytes 0 takes a quarter of HostBytes; a nil
	// TenantPinnedBytes gives each tenant half of MaxPinnedBytes.
	Transfer transfer.Config
	// Events turns the KV event stream on (node/events.go). Default off.
	Events EventsConfig
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
