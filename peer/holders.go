package peer

import (
	"context"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// # Who holds a parent's children
//
// A child or value hint about a parent reaches the parent's first two
// placement candidates from the node that holds the child: that node is
// where a parent-gone notice must go when the parent leaves. Holders
// remembers, per parent, the nodes that sent such hints, so that a notice
// reaches those nodes alone, whatever the cluster's size, instead of every
// member (issue 45: a thousand members made each evicted parent cost 999
// messages).
//
// Bounds (hints are advisory, so a bound drops knowledge, never safety):
//   - at most MaxHolders nodes per parent; a further one replaces the
//     longest-known (a parent with children on more nodes than that, a
//     system prompt's first page, say, reaches the most recent ones; the
//     others find their orphans by lookups past the miss, or evict them
//     first, as before notices existed);
//   - at most maxParents parents, in two generations: when the newer
//     fills, the older is forgotten and the newer becomes the older, so a
//     parent recorded or looked up within the last maxParents/2 new
//     parents is kept. The candidate that does not hold a parent records
//     its senders too and never takes them: they age out this way.
//
// A withdrawal (a child hint with Added false) forgets nothing: the node
// may hold other children of the parent, and a notice to a node without
// any costs one map lookup there.
//
// A parent with no holders recorded (aged out, or recorded before this
// node restarted) still gets its notice, on the parent's first two
// placement candidates but this node (RouteKnown): bounded, never every
// member.

// MaxHolders is the most nodes remembered as holding children of one
// parent.
const MaxHolders = 8

// maxParents bounds the parents remembered, both generations together.
const maxParents = 1 << 16

// parentID names a parent page cluster-wide.
type parentID struct {
	ns  namespace.ID
	key namespace.Key
}

// Holders remembers which nodes sent child hints about each parent. It is
// safe for concurrent use; the zero value is ready.
type Holders struct {
	mu       sync.Mutex            // guards the fields below
	cur, old map[parentID][]string // node IDs, oldest first
	names    map[string]string     // interned node IDs: one copy each
}

// Record notes that node from sent hints: for each child or value hint
// (not withdrawals, not gone notices), that from holds a child of its
// parent.
func (h *Holders) Record(from string, hints []store.ChildHint) {
	if from == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	from = h.internLocked(from)
	for _, c := range hints {
		if c.Gone || (!c.Added && c.Worth <= 0) {
			continue
		}
		h.addLocked(parentID{c.NS, c.Parent}, from)
	}
}

// Take returns the nodes recorded as holding children of parent in ns,
// and forgets them: the parent has left this node, and its notice goes to
// them now. It returns nil when none are recorded.
func (h *Holders) Take(ns namespace.ID, parent namespace.Key) []string {
	p := parentID{ns, parent}
	h.mu.Lock()
	defer h.mu.Unlock()
	got, ok := h.cur[p]
	if ok {
		delete(h.cur, p)
	} else if got, ok = h.old[p]; ok {
		delete(h.old, p)
	}
	return got
}

// Len is how many parents have holders recorded.
func (h *Holders) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cur) + len(h.old)
}

// addLocked records from as a holder of p's children, in the newer
// generation.
func (h *Holders) addLocked(p parentID, from string) {
	if h.cur == nil {
		h.cur = make(map[parentID][]string)
	}
	got, ok := h.cur[p]
	if !ok {
		if got, ok = h.old[p]; ok {
			delete(h.old, p)
		}
		if len(h.cur) >= maxParents/2 {
			h.old, h.cur = h.cur, make(map[parentID][]string)
		}
	}
	if i := slices.Index(got, from); i >= 0 {
		got = append(slices.Delete(got, i, i+1), from) // the most recent last
	} else if len(got) >= MaxHolders {
		got = append(got[1:], from)
	} else {
		got = append(got, from)
	}
	h.cur[p] = got
}

// internLocked is the one copy of node id kept, so that a parent's list
// holds references, not copies. Node IDs are a cluster's members': the
// table is cleared should it pass maxParents entries (IDs of nodes long
// gone).
func (h *Holders) internLocked(id string) string {
	if s, ok := h.names[id]; ok {
		return s
	}
	if h.names == nil || len(h.names) >= maxParents {
		h.names = make(map[string]string)
	}
	id = strings.Clone(id) // not a piece of the request it came in
	h.names[id] = id
	return id
}

// Received is a gRPC unary interceptor for the node's server: after the
// Cluster Hints handler applied a batch (so only from a caller the server
// accepted), it records the batch's sender as a holder of the children it
// reports (Record). Other calls pass through.
func (h *Holders) Received(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil || info.FullMethod != pb.Cluster_Hints_FullMethodName {
		return resp, err
	}
	r, ok := req.(*pb.HintsRequest)
	if !ok {
		return resp, err
	}
	hints := make([]store.ChildHint, 0, len(r.GetHints()))
	for _, c := range r.GetHints() {
		if len(c.GetNamespaceId()) != namespace.IDSize || len(c.GetParentKey()) != namespace.KeySize {
			continue
		}
		hints = append(hints, store.ChildHint{NS: namespace.ID(c.GetNamespaceId()), Parent: namespace.Key(c.GetParentKey()),
			Added: c.GetAdded(), Worth: c.GetWorth(), Gone: c.GetGone()})
	}
	h.Record(r.GetFromNode(), hints)
	return resp, err
}
