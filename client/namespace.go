package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Namespace is a namespace opened on a cluster. It is safe for
// concurrent use.
type Namespace struct {
	c         *Client
	desc      namespace.Descriptor
	id        namespace.ID
	pageBytes int

	// mu guards handles and opening.
	mu      sync.Mutex
	handles map[string]*nodeNS       // by node ID; valid while its Client is the node's connection
	opening map[string]chan struct{} // handshakes in flight, closed when done
}

// Open performs the namespace handshake with every alive node in parallel.
// A node that fails it is skipped and tried again when a call needs it (as
// is a node that joins later). Open fails only if no node accepts; the
// error then wraps each node's (ErrTenantDenied, ErrVersion, ...).
func (c *Client) Open(ctx context.Context, d namespace.Descriptor) (*Namespace, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.end()
	d = d.Normalize()
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("open namespace: %w: %w", ErrInvalid, err)
	}
	n := &Namespace{c: c, desc: d, id: d.ID(), pageBytes: int(d.PageSize()),
		handles: map[string]*nodeNS{}, opening: map[string]chan struct{}{}}
	r := c.routing()
	errs := make([]error, len(r.view.ids))
	var wg sync.WaitGroup
	for i := range r.view.ids {
		wg.Go(func() { errs[i] = n.call(ctx, r, i, func(context.Context, *nodeNS) error { return nil }) })
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			return n, nil
		}
		errs[i] = fmt.Errorf("node %s: %w", r.view.ids[i], err)
	}
	return nil, fmt.Errorf("open namespace on the cluster: %w", errors.Join(errs...))
}

// ID is the namespace ID.
func (n *Namespace) ID() namespace.ID { return n.id }

// Descriptor is the normalized descriptor the namespace was opened with.
func (n *Namespace) Descriptor() namespace.Descriptor { return n.desc }

// PageBytes is the size of every page of the namespace.
func (n *Namespace) PageBytes() int { return n.pageBytes }

// PageTokens is how many tokens one page holds.
func (n *Namespace) PageTokens() int { return int(n.desc.PageTokens) }

// PageKeys returns the keys of the full pages of a token sequence, from its
// start, in the namespace's key format. A trailing partial page has no key.
func (n *Namespace) PageKeys(tokens []uint32) []namespace.Key {
	return n.desc.PageKeys(n.id, tokens)
}

// call runs fn on node i of r's view with the namespace open there, under
// min(ctx's deadline, NodeTimeout), cut short by Close. A failure of the
// node itself quarantines it. fn runs again, once, after a fresh handshake
// if the node does not know the namespace.
func (n *Namespace) call(ctx context.Context, r *routing, i int, fn func(context.Context, *nodeNS) error) error {
	nctx := n.c.nodeContext(ctx)
	defer nctx.release()
	id := r.view.ids[i]
	var err error
	for try := 0; try < 2; try++ {
		var h *nodeNS
		if h, err = n.handle(nctx, r, i); err == nil {
			err = fn(nctx, h)
		}
		if h == nil || !errors.Is(err, ErrNamespaceNotFound) {
			break
		}
		n.forget(id, h) // the node lost the namespace (restarted afresh): handshake again
	}
	if err != nil && ctx.Err() == nil && n.c.ctx.Err() == nil && nodeFailed(err) {
		n.c.suspect(id, err)
	}
	return err
}

// handle returns the namespace opened on node i, performing the handshake
// if this connection has not.
func (n *Namespace) handle(ctx context.Context, r *routing, i int) (*nodeNS, error) {
	id := r.view.ids[i]
	for {
		cl, err := n.c.client(r.view, i)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		if h := n.handles[id]; h != nil && h.c == cl {
			n.mu.Unlock()
			return h, nil
		}
		if ch := n.opening[id]; ch != nil {
			n.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		n.opening[id] = ch
		n.mu.Unlock()
		h, err := cl.open(ctx, n.desc)
		n.mu.Lock()
		delete(n.opening, id)
		close(ch)
		if err == nil {
			n.handles[id] = h
		}
		n.mu.Unlock()
		return h, err
	}
}

func (n *Namespace) forget(id string, h *nodeNS) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handles[id] == h {
		delete(n.handles, id)
	}
}

// nodeFailed reports whether err means the node itself is unreachable or
// broken, rather than refusing the request.
func nodeFailed(err error) bool {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrProtocol) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	if reason := pb.ReasonOf(err); reason != "" {
		return reason == pb.ReasonShuttingDown
	}
	st, ok := status.FromError(err)
	if !ok { // not from the node: the client refused or checked something
		return false
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal, codes.Aborted:
		return true
	}
	return false
}

// routing is one call's snapshot of the view and of the nodes in
// quarantine.
type routing struct {
	view  *clusterView
	down  []bool // by placement index
	ndown int
	cache *locations // the location cache; nil with one node in the view
}

// primary is the node a key is read from and written to: its owner, or
// when that is in quarantine its best candidate that is not (the owner if
// all are).
func (r *routing) primary(k namespace.Key) int {
	o := r.view.place.Owner(k)
	if !r.down[o] {
		return o
	}
	var buf [4]int
	if cand := r.candidates(k, 1, buf[:0]); len(cand) > 0 {
		return cand[0]
	}
	return o
}

// young reports whether some member joined the view less than window ago
// (Options.FallbackWindow): whether any key may need a fallback.
func (r *routing) young(window time.Duration, now time.Time) bool {
	if window <= 0 || len(r.view.ids) < 2 {
		return false
	}
	for _, t := range r.view.since {
		if now.Sub(t) < window {
			return true
		}
	}
	return false
}

// fallback is where to ask for k, whose primary is p, when p does not
// have it: the next placement candidate not in quarantine, while p joined
// the view less than window ago (the handoff may not have brought the page
// back yet); -1 otherwise, or with one node.
func (r *routing) fallback(k namespace.Key, p int, window time.Duration, now time.Time) int {
	if window <= 0 || len(r.view.ids) < 2 || now.Sub(r.view.since[p]) >= window {
		return -1
	}
	var buf [4]int
	for _, c := range r.candidates(k, 2, buf[:0]) {
		if c != p {
			return c
		}
	}
	return -1
}

// candidates appends to dst up to want of the key's placement candidates
// that are not in quarantine, best first.
func (r *routing) candidates(k namespace.Key, want int, dst []int) []int {
	var buf [16]int
	top := buf[:0]
	if n := min(r.view.place.Len(), want+r.ndown); n <= len(buf) {
		top = buf[:n]
	} else {
		top = make([]int, n)
	}
	for _, i := range r.view.place.Candidates(k, top) {
		if !r.down[i] && want > 0 {
			dst = append(dst, i)
			want--
		}
	}
	return dst
}

// at returns the placement index of a node ID usable by this call.
func (r *routing) at(id string) (int, bool) {
	i, ok := r.view.index[id]
	if !ok || r.down[i] {
		return 0, false
	}
	return i, true
}

// cached returns the node the location cache names for key, when it is
// usable by this call.
func (n *Namespace) cached(r *routing, k namespace.Key) (int, bool) {
	id, ok := r.cache.get(n.id, k)
	if !ok {
		return 0, false
	}
	return r.at(id)
}

// fanOut runs fn for every node with work in parallel and waits for all.
// A call with work for one node only (always, in a cluster of one) runs
// it on the caller's goroutine.
func fanOut(groups [][]int, fn func(node int)) {
	only, busy := -1, 0
	for i, g := range groups {
		if len(g) > 0 {
			only, busy = i, busy+1
		}
	}
	if busy == 1 {
		fn(only)
		return
	}
	var wg sync.WaitGroup
	for i, g := range groups {
		if len(g) > 0 {
			wg.Go(func() { fn(i) })
		}
	}
	wg.Wait()
}
