package node

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/placement"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// Remote child hints (DESIGN 5, leaf first across nodes): the store reports
// committed and evicted pages whose parent is not resident here
// (store.Config.OnRemoteParent); the hint sender queues them and sends
// each, in RPCs of at most hintBatch, to the owner of its parent key
// (capacity-weighted rendezvous placement over the alive members, as
// clients place keys) through the Cluster Hints RPC; the owner applies
// them to its store. A flush starts as soon as hints are queued; those
// that arrive while it sends go in the next one, which is the only
// batching (a timed flush let parents be evicted as childless before
// their children's hints came). Hints are advisory: a full queue, an
// unreachable owner or a parent owned by this node (so absent everywhere
// it would be looked for) drops them, counted in HintStats.
//
// Parent-gone notices (store.ChildHint.Gone: a page with remote children
// left this node's store) travel the same queue, but this node does not
// know which nodes hold the children (each child's hint went to the
// parent's owner, not the other way), so each notice goes to every other
// alive member, in the same RPC as that member's hints. That costs one
// RPC per other member per flush that has notices (a flush carries every
// notice queued since the last), and every notice is looked up on every
// node (one map lookup where it has no children). It is acceptable now:
// notices are sent only for pages that had remote children, flushes
// batch them, and clusters are a few to a few dozen nodes, so the cost is
// small next to the puts that caused them; the precise alternative (the
// parent's node remembering which nodes sent child hints) would add state
// per parent. A cluster of hundreds of nodes would want that.

const (
	hintFlushEvery = 20 * time.Millisecond // a flush without a wake-up
	hintBatch      = 1000
	hintQueueMax   = 64 << 10
	hintRPCTimeout = 2 * time.Second
)

// HintStats counts the remote child hints a node handled. A parent-gone
// notice counts once per member it is sent to.
type HintStats struct {
	Sent, Dropped int64
}

// hintSender sends hints to parent owners. Its goroutine is started by
// start and stopped by close.
type hintSender struct {
	self    string
	token   string // bearer token for peers (the admin token), or ""
	log     *slog.Logger
	members atomic.Pointer[membership.Membership]

	sent, dropped atomic.Int64

	mu      sync.Mutex // guards pending
	pending []store.ChildHint

	wake   chan struct{}   // hints are queued
	ctx    context.Context // cancelled by close: stops the loop and its RPCs
	cancel context.CancelFunc
	wg     sync.WaitGroup

	conns map[string]*grpc.ClientConn // by address; the flush goroutine's own
}

func newHintSender(self, token string, log *slog.Logger) *hintSender {
	h := &hintSender{self: self, token: token, log: log.With("component", "hints"),
		wake: make(chan struct{}, 1), conns: map[string]*grpc.ClientConn{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// add queues hints (the store's OnRemoteParent); those beyond the queue's
// bound are dropped.
func (h *hintSender) add(hints []store.ChildHint) {
	h.mu.Lock()
	room := hintQueueMax - len(h.pending)
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

// start begins sending through members' view.
func (h *hintSender) start(m *membership.Membership) {
	h.members.Store(m)
	h.wg.Add(1)
	go h.loop()
}

// close stops the sender (pending hints are dropped) and waits for it.
func (h *hintSender) close() {
	h.cancel()
	h.wg.Wait()
}

func (h *hintSender) stats() HintStats {
	return HintStats{Sent: h.sent.Load(), Dropped: h.dropped.Load()}
}

func (h *hintSender) loop() {
	defer h.wg.Done()
	defer func() {
		for _, c := range h.conns {
			c.Close()
		}
	}()
	t := time.NewTicker(hintFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		case <-h.wake:
		}
		h.flush()
	}
}

// flush sends everything queued, a batch of at most hintBatch per member
// and RPC: child and value hints to their parent's owner, parent-gone
// notices to every member but this one.
func (h *hintSender) flush() {
	h.mu.Lock()
	hints := h.pending
	h.pending = nil
	h.mu.Unlock()
	if len(hints) == 0 {
		return
	}
	view, addrs := placementOf(h.members.Load().Alive())
	if view == nil {
		h.dropped.Add(int64(len(hints)))
		return
	}
	groups := make([][]*pb.ChildHint, view.Len())
	var gone []*pb.ChildHint
	for _, c := range hints {
		if c.Gone {
			gone = append(gone, &pb.ChildHint{NamespaceId: c.NS[:], ParentKey: c.Parent[:], Gone: true})
			continue
		}
		owner := view.Owner(c.Parent)
		if view.Node(owner).ID == h.self {
			h.dropped.Add(1) // the parent would be here: it is gone
			continue
		}
		groups[owner] = append(groups[owner], &pb.ChildHint{NamespaceId: c.NS[:], ParentKey: c.Parent[:], Added: c.Added, Worth: c.Worth})
	}
	for i := range groups {
		if len(gone) > 0 && view.Node(i).ID != h.self {
			groups[i] = append(groups[i], gone...)
		}
	}
	// Members are sent to at once, so that one that hangs (dead, not yet
	// out of the view) delays no other by its RPC timeout.
	var wg sync.WaitGroup
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		conn, err := h.conn(addrs[i])
		if err != nil {
			h.dropped.Add(int64(len(g)))
			continue
		}
		wg.Go(func() {
			for len(g) > 0 {
				batch := g[:min(len(g), hintBatch)]
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
	h.forget(addrs)
}

// forget closes the connections to addresses no longer in the view once
// there are more connections than members: a node that left and came back
// at a new address does not leave its old connection open for good.
func (h *hintSender) forget(addrs []string) {
	if len(h.conns) <= len(addrs) {
		return
	}
	for addr, conn := range h.conns {
		if !slices.Contains(addrs, addr) {
			conn.Close()
			delete(h.conns, addr)
		}
	}
}

// conn is the flush goroutine's connection to addr.
func (h *hintSender) conn(addr string) (*grpc.ClientConn, error) {
	if conn, ok := h.conns[addr]; ok {
		return conn, nil
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	h.conns[addr] = conn
	return conn, nil
}

func (h *hintSender) send(conn *grpc.ClientConn, batch []*pb.ChildHint) error {
	ctx, cancel := context.WithTimeout(h.ctx, hintRPCTimeout)
	defer cancel()
	if h.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+h.token)
	}
	_, err := pb.NewClusterClient(conn).Hints(ctx, &pb.HintsRequest{FromNode: h.self, Hints: batch})
	return err
}

// placementOf is the placement view over alive members, weighted by
// capacity as clients weigh it (a member without capacity weighs 1), and
// each node's gRPC address by view index.
func placementOf(members []membership.Member) (*placement.View, []string) {
	nodes := make([]placement.Node, 0, len(members))
	addr := make(map[string]string, len(members))
	for _, m := range members {
		var w float64
		for _, t := range m.Meta.Tiers {
			w += float64(t.Capacity)
		}
		if !(w > 0) || math.IsInf(w, 1) {
			w = 1
		}
		nodes = append(nodes, placement.Node{ID: m.NodeID, Weight: w})
		addr[m.NodeID] = m.GRPCAddress
	}
	v, err := placement.NewView(nodes)
	if err != nil || v.Len() == 0 {
		return nil, nil
	}
	addrs := make([]string, v.Len())
	for i := range addrs {
		addrs[i] = addr[v.Node(i).ID]
	}
	return v, addrs
}
