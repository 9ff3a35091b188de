// Package peer carries the cross-node half of leaf-first eviction
// (docs/design.md §5.3): it sends the child, value and parent-gone hints a store
// reports (store.Config.OnRemoteParent) to the nodes that need them, over
// the Cluster Hints RPC. The node wires it up; the receiving side is
// server's Cluster service, which applies hints with store.ApplyHints.
package peer

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/internal/dial"
	"github.com/stratakv/strata/membership"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// The store reports committed and evicted pages whose parent is not
// resident on its node (store.Config.OnRemoteParent); the Sender queues them and sends
// each, in RPCs of at most batchMax, to the owner of its parent key
// (capacity-weighted rendezvous placement over the alive members, as
// clients place keys) through the Cluster Hints RPC; the owner applies
// them to its store. A flush starts as soon as hints are queued; those
// that arrive while it sends go in the next one, which is the only
// batching (a timed flush let parents be evicted as childless before
// their children's hints came). Hints are advisory: a full queue, an
// unreachable owner or a parent owned by this node (so absent everywhere
// it would be looked for) drops them, counted in Stats.
//
// Parent-gone notices (store.ChildHint.Gone: a page with remote children
// left this node's store) travel the same queue, to the nodes that sent
// child or value hints about that parent here (Holders: the Sender's
// Received interceptor records them as the node's server accepts the
// hints), or, for a parent none are known for, to its first two
// placement candidates but this node (RouteKnown). A notice costs at most
// MaxHolders messages however many members there are; before issue 45 it
// went to every other member.

const (
	flushEvery = 20 * time.Millisecond // a flush without a wake-up
	batchMax   = 1000
	queueMax   = 64 << 10
	rpcTimeout = 2 * time.Second
)

// Stats counts the hints a Sender handled. A parent-gone notice counts
// once per member it is sent to.
type Stats struct {
	Sent, Dropped int64
}

// Members is the gossip view hints are placed over: the alive members,
// this node included.
type Members interface {
	Alive() []membership.Member
}

// Sender sends hints to parent owners. Its goroutine is started by Start
// and stopped by Close.
type Sender struct {
	self    string
	log     *slog.Logger
	members Members // set by Start, before the loop runs

	sent, dropped atomic.Int64

	mu      sync.Mutex // guards pending
	pending []store.ChildHint

	wake   chan struct{}   // hints are queued
	ctx    context.Context // cancelled by close: stops the loop and its RPCs
	cancel context.CancelFunc
	wg     sync.WaitGroup

	peers peers // the flush goroutine's own

	known Holders // who sent child hints, by parent
}

// New returns a Sender for the node self that dials peers with o (the
// admin token as bearer token, the node's TLS files).
func New(self string, o dial.Options, log *slog.Logger) *Sender {
	h := &Sender{self: self, log: log.With("component", "hints"),
		wake: make(chan struct{}, 1), peers: newPeers(o)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Add queues hints (the store's OnRemoteParent); those beyond the queue's
// bound are dropped.
func (h *Sender) Add(hints []store.ChildHint) {
	h.mu.Lock()
	room := queueMax - len(h.pending)
	take := min(max(room, 0), len(hints))
	h.pending = append(h.pending, hints[:take]...)
	h.mu.Unlock()
	if drop := len(hints) - take; drop > 0 {
		h.dropped.Add(int64(drop))
	}
	if take > 0 {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// Start begins sending through members' view.
func (h *Sender) Start(m Members) {
	h.members = m
	h.wg.Add(1)
	go h.loop()
}

// Close stops the sender (pending hints are dropped) and waits for it.
func (h *Sender) Close() {
	h.cancel()
	h.wg.Wait()
}

// Received is a gRPC unary interceptor for the node's server: the Cluster
// Hints calls it accepts tell the Sender where a parent's children are
// (Holders.Received), so that the parent's gone notice goes there alone.
func (h *Sender) Received(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return h.known.Received(ctx, req, info, handler)
}

// Stats returns the hints sent and dropped so far.
func (h *Sender) Stats() Stats {
	return Stats{Sent: h.sent.Load(), Dropped: h.dropped.Load()}
}

func (h *Sender) loop() {
	defer h.wg.Done()
	defer h.peers.close()
	every(h.ctx, flushEvery, h.wake, h.flush)
}

// every runs fn each period and whenever wake has a value (a nil wake
// never does), until ctx ends.
func every(ctx context.Context, period time.Duration, wake <-chan struct{}, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		fn()
	}
}

// flush sends everything queued, a batch of at most batchMax per member
// and RPC: child and value hints to their parent's first two candidates,
// parent-gone notices to the nodes known to hold the parent's children.
func (h *Sender) flush() {
	h.mu.Lock()
	hints := h.pending
	h.pending = nil
	h.mu.Unlock()
	if len(hints) == 0 {
		return
	}
	hints = Coalesce(hints)
	view, addrs := placementOf(h.members.Alive())
	if view == nil {
		h.dropped.Add(int64(len(hints)))
		return
	}
	routed, dropped := routeView(view, h.self, &h.known, hints)
	h.dropped.Add(int64(dropped))
	groups := make([][]*pb.ChildHint, len(routed))
	for i, r := range routed {
		msgs := make([]pb.ChildHint, len(r))
		groups[i] = make([]*pb.ChildHint, len(r))
		for j, c := range r {
			msgs[j] = pb.ChildHint{NamespaceId: c.NS[:], ParentKey: c.Parent[:], Added: c.Added, Worth: c.Worth, Gone: c.Gone}
			groups[i][j] = &msgs[j]
		}
	}
	// Members are sent to at once, so that one that hangs (dead, not yet
	// out of the view) delays no other by its RPC timeout.
	var wg sync.WaitGroup
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		conn, err := h.peers.conn(addrs[i])
		if err != nil {
			h.dropped.Add(int64(len(g)))
			continue
		}
		wg.Go(func() {
			for len(g) > 0 {
				batch := g[:min(len(g), batchMax)]
				g = g[len(batch):]
				if err := h.send(conn, batch); err != nil {
					h.dropped.Add(int64(len(batch)))
					h.log.Debug("sending child hints", "to", view.Node(i).ID, "hints", len(batch), "err", err)
					continue
				}
				h.sent.Add(int64(len(batch)))
			}
		})
	}
	wg.Wait()
	h.peers.forget(addrs)
}

// Coalesce merges the value hints (Worth > 0, neither Added nor Gone) of
// one parent into one carrying the largest worth, where the last of them
// was; every other hint keeps its place. A receiver takes a value hint as
// the most its parent's child is worth (the larger of it and what it had),
// so the merged hint means what the many did. A hot prefix looked up again
// and again queues a value hint per remote parent per lookup: before this,
// each went out on its own (issue 43's three-node 1,000-key lookup
// allocated 4.9 MB, mostly hints). The cluster simulator (cmd/strata-sim)
// coalesces its nodes' hints alike.
func Coalesce(hints []store.ChildHint) []store.ChildHint {
	var last map[parentID]int // where each parent's value hint is kept
	keep := make([]bool, len(hints))
	for i := len(hints) - 1; i >= 0; i-- {
		c := &hints[i]
		keep[i] = true
		if c.Worth <= 0 || c.Added || c.Gone {
			continue
		}
		if last == nil {
			last = make(map[parentID]int)
		}
		p := parentID{c.NS, c.Parent}
		if j, ok := last[p]; ok {
			hints[j].Worth = max(hints[j].Worth, c.Worth)
			keep[i] = false
			continue
		}
		last[p] = i
	}
	out := hints[:0]
	for i, c := range hints {
		if keep[i] {
			out = append(out, c)
		}
	}
	return out
}

// peers are one goroutine's connections to other members, by address.
type peers struct {
	dial  dial.Options // the admin token, TLS
	conns map[string]*grpc.ClientConn
}

func newPeers(o dial.Options) peers { return peers{dial: o, conns: map[string]*grpc.ClientConn{}} }

// forget closes the connections to addresses no longer in the view once
// there are more connections than members: a node that left and came back
// at a new address does not leave its old connection open for good.
func (p *peers) forget(addrs []string) {
	if len(p.conns) <= len(addrs) {
		return
	}
	for addr, conn := range p.conns {
		if !slices.Contains(addrs, addr) {
			conn.Close()
			delete(p.conns, addr)
		}
	}
}

// conn is the connection to addr, dialed on first use.
func (p *peers) conn(addr string) (*grpc.ClientConn, error) {
	if conn, ok := p.conns[addr]; ok {
		return conn, nil
	}
	conn, err := dial.GRPC(addr, p.dial)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = conn
	return conn, nil
}

// close closes every connection.
func (p *peers) close() {
	for addr, c := range p.conns {
		c.Close()
		delete(p.conns, addr)
	}
}

func (h *Sender) send(conn *grpc.ClientConn, batch []*pb.ChildHint) error {
	ctx, cancel := context.WithTimeout(h.ctx, rpcTimeout)
	defer cancel()
	_, err := pb.NewClusterClient(conn).Hints(ctx, &pb.HintsRequest{FromNode: h.self, Hints: batch})
	return err
}
