// Package client is the Go client of strata. One Dial, given the address
// of any node (and optionally more, Options.Seeds), learns the cluster's
// membership view and returns a Client for the whole cluster; a single
// node is a cluster of one. A Client opens namespaces, computes page keys,
// looks up hit prefixes with optional read leases, reads pages into caller
// buffers verifying their checksums, publishes pages and deletes them,
// routing every key to the node that owns it.
//
// Every call takes a context; its deadline bounds the call.
//
// Routing (docs/design.md §6.4, §8.2).
//
// A Client learns the membership view from any node (Client.Members) and
// keeps it current with a WatchMembers stream. Keys are placed by
// capacity-weighted rendezvous hashing (package placement) over the ALIVE
// members, weighted by Member.Weight; every client and node that sees the
// same view computes the same owners. A call groups its keys by node and
// fans out in parallel, one request (or one per batch) per node, each
// under min(the caller's deadline, NodeTimeout).
//
// Planes. Each node is reached over one of three planes (plane.go): shared
// memory when the node is on this host and its session works, the raw tcp
// data plane when the node advertises it, gRPC otherwise (and for the
// control calls). Options.NoShm and Options.NoRaw turn the first two off.
//
// Failure model. A node that fails a call (unreachable, reset, past
// NodeTimeout, shutting down) is quarantined locally for Quarantine: calls
// route its keys to their next placement candidate instead (where a Put
// during the quarantine will have written them), without waiting for
// gossip to declare it dead. Quarantine is local and does not change
// placement, so clients need not agree on it. Its keys are misses in the
// meantime; a miss is always safe, because the engine recomputes.
//
// Partial failure. Calls return complete per-key results even when some
// nodes failed: a failed node's keys are absent (Lookup), not found (Get)
// or carry a failed PutResult (Put). The error is non-nil only for what
// the caller must know: its own context ended, every node the call needed
// failed (ErrUnavailable: with one node, whenever it fails), a lease
// expired (ErrLeaseExpired), bytes failed their checksum (ErrChecksum), or
// the request itself was refused (ErrInvalid, ErrTenantDenied, ...). The
// results are valid alongside such an error.
//
// Location cache. See cache.go: with more than one node in the view, it
// remembers on which node a page was last seen and is only ever used to
// ask that node too; a stale entry costs a miss, never an error or wrong
// bytes (Get verifies every page against its checksum).
package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/internal/grpcbuf"
	"github.com/stratakv/strata/placement"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/rdma"
	"github.com/stratakv/strata/transport"
)

// Options configures a Client. Zero fields take their defaults.
type Options struct {
	// Token is the tenant token sent with every call, on every plane.
	// Default none.
	Token string
	// CA, Cert and Key are PEM files (re-read when they change): with any
	// of them, gRPC and the raw data plane are TLS, each node's
	// certificate verified against CA (default the system roots) and
	// ServerName (default the host dialed), and Cert and Key offered to a
	// node that verifies client certificates (mTLS). Default none:
	// plaintext, which a TLS node refuses. Shared memory (same host, a
	// Unix socket checked for the user) needs none.
	CA, Cert, Key, ServerName string
	// MaxMessageBytes bounds a received gRPC message. Default 8 MiB.
	MaxMessageBytes int
	// DialOptions are appended to the client's own gRPC dial options.
	DialOptions []grpc.DialOption
	// InstallBufferPool makes strata's gRPC buffer pool (internal/grpcbuf:
	// a tier per power of two, so a received message's buffer is at most
	// twice its size and costs that much to clear) the process's default,
	// at Dial, for every gRPC connection of the process. gRPC wants that
	// done before its first use: set it on the first Dial of a program that
	// makes no other gRPC connection first. Default off: the client changes
	// no process-wide state.
	InstallBufferPool bool

	// Seeds are more node addresses to learn the view from, tried after
	// the address given to Dial, and again whenever the watch stream
	// fails. Default none.
	Seeds []string
	// NodeTimeout bounds each node's part of a call (and each attempt to
	// learn the view): a dead or hung node costs a call at most this, as it
	// is quarantined before any second round. It must cover the largest
	// transfer a call makes to one node. Default 2s.
	NodeTimeout time.Duration
	// Quarantine is how long a node that failed a call is routed around.
	// Default 3s.
	Quarantine time.Duration
	// CacheEntries sizes the location cache, in pages. Default 1<<16;
	// negative disables the cache.
	CacheEntries int64
	// CacheTTL is how long a cached location is trusted. Default 10s.
	CacheTTL time.Duration
	// FallbackWindow is how long after a member joins this client's view
	// (a fresh client's whole first view; a node back after it left it) a
	// page its owner does not have is also asked of the key's next
	// placement candidate, in the same call: pages put there while the
	// owner was away stay there until the holder hands them back (the
	// owner alive 5 s, then up to 256 pages a second), and a client without
	// their locations cached would miss them meanwhile. It costs one more
	// round to the next candidates on a lookup or get that misses on a
	// young owner, and nothing otherwise. Default 30s; negative: never.
	FallbackWindow time.Duration
	// Logger receives the client's logs. Default: discard.
	Logger *slog.Logger

	// Same-host shared memory (shm.go). ShmSocket is the node's shm
	// socket; default: for a node on this host, transport.SocketLink of its
	// port. NoShm keeps every call off shared memory; default off (shm is
	// used when it works, the other planes silently otherwise).
	// ShmVerifyChecksums verifies pages read through shm against their
	// checksums too; default off (the generation re-check already rejects
	// a copy that raced a reclaim).
	ShmSocket          string
	NoShm              bool
	ShmVerifyChecksums bool

	// NoRaw keeps page bytes on gRPC, off the nodes' raw tcp data plane
	// (raw.go); default off: calls use the raw plane of a node that
	// advertises it, gRPC otherwise. NoShm and NoRaw together force gRPC
	// for everything. RawAddr is the raw data-plane address (host:port)
	// to use instead of the one a node advertises (tests, proxies);
	// default: the advertised one. RawSkipVerify skips checking pages read
	// over the raw plane against their checksums (the node sends them from
	// the pinned page; TCP's own checksums remain); default off: every page
	// is verified, as over gRPC.
	NoRaw         bool
	RawAddr       string
	RawSkipVerify bool
	// RawPoll is how long a get waiting for its pages on the raw plane
	// polls the socket before it sleeps (transport.ReadPoll): the answer
	// to a lone get usually comes within it, and the thread that finds it
	// awake is not woken by the kernel, which on a VM costs a one-worker
	// 256 KiB get about a tenth of its rate. It spends CPU the get would
	// have left idle, so only a get that is the client's only read
	// waiting polls, and the client polls less often while windows run
	// out. Puts and lookups, whose answers come later, lost throughput
	// polling (benchmarks/README.md, "Polling for the answer") and never
	// poll. Default 50µs; negative: never poll.
	RawPoll time.Duration

	// RDMA lets gets read pages over the rdma plane (rdma.go) from nodes
	// that advertise it, in builds with the rdma tag and with an RDMA
	// device; calls use the next plane otherwise, and Client.RDMAFallbacks
	// counts why. Default off. RDMAConfig is this client's device (its
	// zero fields take rdma.Config's defaults: the first device).
	RDMA       bool
	RDMAConfig rdma.Config

	// readPoll is the raw plane's ReadPoll, one for the client (Dial).
	readPoll *transport.ReadPoll
	// rdmaCounts is the client's RDMAFallbacks (Dial).
	rdmaCounts *rdmaCounts
}

func (o *Options) setDefaults() {
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 2 * time.Second
	}
	if o.Quarantine <= 0 {
		o.Quarantine = 3 * time.Second
	}
	if o.CacheEntries == 0 {
		o.CacheEntries = 1 << 16
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 10 * time.Second
	}
	if o.FallbackWindow == 0 {
		o.FallbackWindow = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RawPoll == 0 {
		o.RawPoll = defaultRawPoll
	}
}

// defaultRawPoll is Options.RawPoll's default: about the round trip of a
// 256 KiB get on loopback (benchmarks/README.md, "Polling for the answer").
const defaultRawPoll = 50 * time.Microsecond

// MemberState is a member's liveness as the cluster's gossip sees it.
type MemberState int

// Member states, as nodes report them.
const (
	MemberAlive   = MemberState(pb.MemberState_MEMBER_STATE_ALIVE)
	MemberSuspect = MemberState(pb.MemberState_MEMBER_STATE_SUSPECT)
	MemberDead    = MemberState(pb.MemberState_MEMBER_STATE_DEAD)
	MemberLeft    = MemberState(pb.MemberState_MEMBER_STATE_LEFT)
)

// String names the state.
func (s MemberState) String() string { return pb.MemberState(s).String() }

// Member is one node of the view.
type Member struct {
	ID            string
	Address       string // gRPC host:port
	GossipAddress string
	State         MemberState
	// Weight is the node's placement weight (its capacity in bytes). A
	// member that reports no valid weight (<= 0, NaN, Inf) is placed with
	// weight 1: next to nothing beside members that report capacities.
	Weight float64
	// RawAddress is the node's raw tcp data plane as it advertises it
	// ("" when none, or from nodes that predate it).
	RawAddress string
}

// Client is a client of a strata cluster (of one node or many): it routes
// each key to its node. It is safe for concurrent use.
type Client struct {
	opts  Options
	log   *slog.Logger
	taker string     // names this client to the transfer rooms (AwaitRoom)
	cache *locations // nil when disabled
	// sources are the addresses to learn the view from: the dialed one,
	// then the seeds. Set once by Dial.
	sources []string

	view      atomic.Pointer[clusterView]
	allFailed atomic.Int64 // calls whose every node failed (lookup.go)
	// checksumFailures counts pages a get received whose bytes did not
	// verify, on any plane (get.go).
	checksumFailures atomic.Int64

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	bg     sync.WaitGroup // the watcher and background lease releases

	// mu guards the fields below.
	mu         sync.Mutex
	closed     bool
	calls      sync.WaitGroup         // calls in flight; Add under mu while !closed
	cuts       map[uint64]func()      // cancel funcs of node calls in flight, by number
	cutSeq     uint64                 // the last number given to a cuts entry
	conns      map[string]*nodeClient // by node ID, created lazily
	quarantine map[string]time.Time   // node ID → end of its quarantine
	aliveSince map[string]time.Time   // node ID → when this client's view last gained it alive
	watchNode  string                 // node the watch stream is on
	watchKick  context.CancelFunc     // ends the current watch stream
}

// clusterView is an immutable membership snapshot with its placement.
type clusterView struct {
	members []Member        // as reported, sorted by ID
	place   *placement.View // the alive members
	ids     []string        // ids[i] is place.Node(i).ID
	addrs   []string        // addrs[i] is that node's gRPC address
	index   map[string]int  // node ID → placement index
	from    string          // the node that reported it
	since   []time.Time     // by placement index: when the client's view last gained the member alive
	changed chan struct{}   // closed when a newer view replaces this one
	clear   *routing        // the routing of a call while no node is in quarantine
}

// Dial learns the membership view from the node at addr (host:port), or
// failing that from opts.Seeds, and keeps it current until Close: addr may
// be a lone node (a cluster of one) or any member of a cluster.
// Connections to the members are made lazily. ctx bounds the initial
// attempts.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	if opts.InstallBufferPool {
		grpcbuf.Install()
	}
	opts.setDefaults()
	opts.readPoll = transport.NewReadPoll(opts.RawPoll)
	opts.rdmaCounts = &rdmaCounts{}
	c := &Client{opts: opts, log: opts.Logger, taker: rand.Text(), conns: map[string]*nodeClient{}, quarantine: map[string]time.Time{},
		aliveSince: map[string]time.Time{}, cuts: map[uint64]func(){}}
	c.sources = dedupe(append([]string{addr}, opts.Seeds...))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if opts.CacheEntries > 0 {
		var err error
		if c.cache, err = newLocations(opts.CacheEntries, opts.CacheTTL); err != nil {
			c.cancel()
			return nil, fmt.Errorf("dial: %w", err)
		}
	}
	var errs []error
	for _, a := range c.sources {
		cl, err := dialNode(a, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := c.fetchView(ctx, cl)
		if err == nil {
			err = c.apply(resp, a)
		}
		if err == nil {
			c.bg.Add(1)
			go c.watch(a, cl)
			return c, nil
		}
		cl.Close()
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if ctx.Err() != nil {
			break
		}
	}
	c.cancel()
	c.cache.close()
	return nil, fmt.Errorf("dial: no node gave a view: %w", errors.Join(append([]error{ErrUnavailable}, errs...)...))
}

// fetchView asks one node for the view.
func (c *Client) fetchView(ctx context.Context, cl *nodeClient) (*pb.MembersResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
	defer cancel()
	resp, err := pb.NewClusterClient(cl.conn).Members(ctx, &pb.MembersRequest{})
	return resp, fromRPC("members", err)
}

// Close stops the watcher, cuts calls in flight short and waits for them,
// waits for background releases of unneeded leases (each bounded by
// NodeTimeout), and closes every connection. Calls after Close fail with
// ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cancel() // before the cuts: a call cut short sees the client closed
	for _, cut := range c.cuts {
		cut()
	}
	for _, nc := range c.conns {
		nc.interruptRaw() // the raw plane's calls hold no cut (nodeCtx)
	}
	c.mu.Unlock()
	c.calls.Wait()
	c.bg.Wait()
	c.mu.Lock()
	var errs []error
	for id, nc := range c.conns {
		errs = append(errs, nc.Close())
		delete(c.conns, id)
	}
	c.mu.Unlock()
	c.cache.close()
	return errors.Join(errs...)
}

// begin registers a call, so Close waits for it; end ends it.
func (c *Client) begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.calls.Add(1)
	return nil
}

func (c *Client) end() { c.calls.Done() }

// cutOnClose registers the cancel func of a node call, so that Close cuts
// the call short (at once if it is closed already); uncut(id) forgets it.
// (A registry, not context.AfterFunc: it costs a call no allocation.)
func (c *Client) cutOnClose(cancel func()) (id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cancel()
		return 0
	}
	c.cutSeq++
	c.cuts[c.cutSeq] = cancel
	return c.cutSeq
}

func (c *Client) uncut(id uint64) {
	c.mu.Lock()
	delete(c.cuts, id)
	c.mu.Unlock()
}

// RawActive reports whether the client has connections to nodes and each
// one's raw tcp data plane is in use: advertised, and the last attempt to
// connect to it did not fail (calls use it unless shared memory serves
// them).
func (c *Client) RawActive() bool { return c.everyNode((*nodeClient).rawActive) }

// ShmActive reports whether the client has connections to nodes and reads
// and writes each one's pages through shared memory (a node's session
// starts with the first Open on it).
func (c *Client) ShmActive() bool { return c.everyNode((*nodeClient).usingShm) }

// everyNode reports whether the client has node connections and f holds
// for each.
func (c *Client) everyNode(f func(*nodeClient) bool) bool {
	c.mu.Lock()
	conns := slices.Collect(maps.Values(c.conns))
	c.mu.Unlock()
	for _, nc := range conns {
		if !f(nc) {
			return false
		}
	}
	return len(conns) > 0
}

// Members returns the current view, sorted by node ID.
func (c *Client) Members() []Member { return slices.Clone(c.view.Load().members) }

// apply installs a view reported by the node at addr.
func (c *Client) apply(resp *pb.MembersResponse, addr string) error {
	v, err := newClusterView(resp, addr)
	if err != nil {
		return err
	}
	if len(v.ids) > 1 { // with one node, it owns every key: nothing to remember
		v.clear.cache = c.cache
	}
	now := time.Now()
	c.mu.Lock()
	since := make(map[string]time.Time, len(v.ids))
	for i, id := range v.ids {
		t, ok := c.aliveSince[id]
		if !ok {
			t = now
		}
		v.since[i], since[id] = t, t
	}
	c.aliveSince = since // a member not alive in this view is new again when it returns
	c.mu.Unlock()
	old := c.view.Swap(v)
	if old != nil {
		close(old.changed)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, nc := range c.conns {
		if i, ok := v.index[id]; !ok || v.addrs[i] != nc.addr {
			delete(c.conns, id) // left the view, or moved: calls in flight on it fail as misses
			if err := nc.Close(); err != nil {
				c.log.Debug("closing connection", "node", id, "err", err)
			}
			continue
		}
		nc.relearnRaw(v.member(id))
	}
	c.log.Debug("cluster view", "from", v.from, "members", len(v.members), "alive", len(v.ids))
	return nil
}

// newClusterView builds the view a node at addr reported. A member that
// reports no gRPC address (a node serving without membership) is reached,
// when it is the reporting node, at addr.
func newClusterView(resp *pb.MembersResponse, addr string) (*clusterView, error) {
	v := &clusterView{index: map[string]int{}, from: resp.GetNodeId(), changed: make(chan struct{})}
	var nodes []placement.Node
	addrs := map[string]string{}
	for _, m := range resp.GetMembers() {
		mem := Member{ID: m.GetNodeId(), Address: m.GetGrpcAddress(), GossipAddress: m.GetGossipAddress(),
			State: MemberState(m.GetState()), Weight: m.GetWeight(), RawAddress: m.GetRawAddress()}
		if mem.Address == "" && mem.ID == v.from {
			mem.Address = addr
		}
		v.members = append(v.members, mem)
		if mem.State != MemberAlive {
			continue
		}
		w := mem.Weight
		if !(w > 0) || math.IsInf(w, 1) {
			w = 1
		}
		nodes = append(nodes, placement.Node{ID: mem.ID, Weight: w})
		addrs[mem.ID] = mem.Address
	}
	slices.SortFunc(v.members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	if len(nodes) == 0 {
		return nil, fmt.Errorf("view from %q has no alive member: %w", v.from, ErrUnavailable)
	}
	var err error
	if v.place, err = placement.NewView(nodes); err != nil {
		return nil, fmt.Errorf("view from %q: %w: %w", v.from, ErrProtocol, err)
	}
	for i, n := range v.place.Nodes() {
		v.ids = append(v.ids, n.ID)
		v.addrs = append(v.addrs, addrs[n.ID])
		v.index[n.ID] = i
	}
	v.since = make([]time.Time, len(v.ids))
	v.clear = &routing{view: v, down: make([]bool, len(v.ids))}
	return v, nil
}

// client returns the connection to the node with placement index i in v,
// dialing it if needed.
func (c *Client) client(v *clusterView, i int) (*nodeClient, error) {
	id, addr := v.ids[i], v.addrs[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if nc := c.conns[id]; nc != nil {
		if nc.addr == addr {
			return nc, nil
		}
		nc.Close() // the node moved
		delete(c.conns, id)
	}
	// apply swaps the view before it takes mu to close connections: a node
	// that left or moved since v was taken must not get a connection that
	// apply will never close.
	if cur := c.view.Load(); cur != v {
		if j, ok := cur.index[id]; !ok || cur.addrs[j] != addr {
			return nil, fmt.Errorf("node %s left the view or moved: %w", id, ErrUnavailable)
		}
	}
	cl, err := dialNode(addr, c.opts)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w: %w", id, ErrUnavailable, err)
	}
	c.conns[id] = cl
	return cl, nil
}

// suspect quarantines a node after a failed call, and moves the watch
// stream off it if it is the node being watched.
func (c *Client) suspect(id string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quarantine[id] = time.Now().Add(c.opts.Quarantine)
	if c.watchNode == id && c.watchKick != nil {
		c.watchKick()
	}
	c.log.Debug("node quarantined", "node", id, "for", c.opts.Quarantine, "err", err)
}

// routing snapshots the view and the nodes in quarantine for one call.
func (c *Client) routing() *routing {
	v := c.view.Load()
	c.mu.Lock()
	if len(c.quarantine) == 0 {
		c.mu.Unlock()
		return v.clear // the common case: shared, read-only
	}
	r := &routing{view: v, down: make([]bool, len(v.ids)), cache: v.clear.cache}
	now := time.Now()
	for id, until := range c.quarantine {
		if now.After(until) {
			delete(c.quarantine, id)
			continue
		}
		if i, ok := v.index[id]; ok {
			r.down[i] = true
			r.ndown++
		}
	}
	c.mu.Unlock()
	return r
}

func dedupe(s []string) []string {
	var out []string
	for _, a := range s {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
