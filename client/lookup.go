package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratakv/strata/namespace"
)

// Cluster lookups and leases.
//
// The hit prefix is global: key i counts only if keys 0..i are all present,
// on whichever nodes own them. Each node answers for the keys it was sent,
// in request order, and leases its own local hit prefix, so:
//
//   - Every key inside the global prefix that a node was asked about lies
//     inside that node's local prefix (its keys before it are inside the
//     global prefix too, hence present there), so the per-node leases cover
//     the global prefix, in the common case with no extra round trip.
//   - They may cover more: a node's local prefix can run past the global
//     one (its keys after the first global miss can all be present). That
//     over-leasing is accepted: it pins a few pages the engine will not
//     load until Release or the TTL, and avoids a second round trip to
//     lease exactly. A per-node lease that covers nothing inside the global
//     prefix is released at once, in the background.
//   - A key asked of two nodes (its owner and the node the location cache
//     names) may be present on one and absent on the other, which ends the
//     latter's local prefix early; keys after it inside the global prefix
//     may then be unleased. A second round leases exactly those, on nodes
//     that have them. This happens only after spills or view changes.
//
// Invariant: with a lease, every key in [0, HitPrefix) is covered by a live
// per-node lease on a node that reported it present, and Get reads it from
// that node.

// LookupResult answers a cluster Lookup.
type LookupResult struct {
	// HitPrefix is how many keys from the start are present: the pages an
	// engine can load instead of recomputing.
	HitPrefix int
	// Present says, per key, whether a node reported the page published.
	Present []bool
	// Lease covers the hit prefix when one was asked for and HitPrefix > 0.
	Lease *Lease
}

// Lease keeps the pages of a hit prefix readable on their nodes. It
// wraps one lease per node (per batch) taken by Lookup.
type Lease struct {
	// Pages is the hit prefix the lease covers.
	Pages int
	// Expires is the earliest expiry of its node leases.
	Expires time.Time

	ns     *Namespace
	r      *routing              // the view the lease was taken in
	leases []heldLease           // kept ones
	except map[namespace.Key]int // keys leased on another node than routing.primary
}

type heldLease struct {
	node int // placement index in r.view
	l    *nodeLease
}

// leaseSpan is a lease a node granted, with the positions (in the keys of
// the call) it covers.
type leaseSpan struct {
	node int
	l    *nodeLease
	pos  []int
}

// nodeLookup is one node's answer.
type nodeLookup struct {
	present []bool // by position in the node's group
	spans   []leaseSpan
	err     error
}

// Lookup asks the nodes that own keys which are present, in parallel, and
// merges their answers into the global hit prefix. A key its owner does not
// have, while the owner is young in the view (Options.FallbackWindow), is
// asked of its next placement candidate in one more round. With lease true each
// node also leases its part of the prefix for ttl (0: the nodes' default).
// A node that fails or passes NodeTimeout counts as having none of its keys
// (and is quarantined); the error is nil even when no node answered (every
// key a miss, counted by Client.AllFailed). The result is valid even when
// the error is not.
func (n *Namespace) Lookup(ctx context.Context, keys []namespace.Key, lease bool, ttl time.Duration) (LookupResult, error) {
	if err := n.c.begin(); err != nil {
		return LookupResult{}, err
	}
	defer n.c.end()
	res := LookupResult{Present: make([]bool, len(keys))}
	if len(keys) == 0 {
		return res, nil
	}
	r := n.c.routing()
	if len(r.view.ids) == 1 {
		return n.lookupOne(ctx, r, keys, lease, ttl, res)
	}
	pl := n.plan(r, keys, true)
	answers, out := n.lookupRound(ctx, r, keys, pl.groups, lease, ttl, false)
	holder, spans := n.merge(r, keys, pl, answers, res.Present)
	if more := n.fallbacks(r, keys, pl, answers, res.Present); more != nil {
		again := pl
		again.groups = more
		answers2, out2 := n.lookupRound(ctx, r, keys, more, lease, ttl, true)
		out.merge(out2)
		holder2, spans2 := n.merge(r, keys, again, answers2, res.Present)
		for p, h := range holder2 {
			if holder[p] < 0 {
				holder[p] = h
			}
		}
		spans = append(spans, spans2...)
	}
	res.HitPrefix = prefix(res.Present, nil)
	if lease {
		more, out2 := n.leaseGaps(ctx, r, keys, holder, spans, res.HitPrefix, ttl)
		out.merge(out2)
		spans = append(spans, more...)
		res.HitPrefix = prefix(res.Present, coverage(len(keys), spans))
	}
	var drop []*nodeLease
	res.Lease, drop = n.keepLeases(r, keys, pl.prim, spans, res.HitPrefix)
	n.c.releaseLater(drop)
	if out.failed == 0 && len(out.errs) == 0 { // a miss on a node that did not answer proves nothing
		n.orphansLater(r, keys, res.Present, holder, pl.groups, answers)
	}
	return res, out.err(ctx, n.c, "lookup")
}

// lookupOne is Lookup in a cluster of one, without the bookkeeping of
// several nodes: the node answers for every key, in batches, and its
// leases cover exactly the hit prefix (a batch is leased only while the
// ones before it were full hits), so there are no gaps to lease and no
// lease to place elsewhere. The orphan report is the same as with more
// nodes.
func (n *Namespace) lookupOne(ctx context.Context, r *routing, keys []namespace.Key, lease bool, ttl time.Duration,
	res LookupResult) (LookupResult, error) {
	var leases []*nodeLease
	err := n.call(ctx, r, 0, func(ctx context.Context, h *nodeNS) error {
		n.c.releaseLater(leases) // from a first try, if fn runs again
		leases = leases[:0]
		covered := 0
		return eachBatch(len(keys), h.maxBatch, func(start, end int) error {
			lr, err := h.lookup(ctx, keys[start:end], lease && covered == start, ttl)
			if err != nil {
				return err
			}
			copy(res.Present[start:], lr.Present)
			if lr.Lease != nil {
				leases = append(leases, lr.Lease)
				covered = start + lr.HitPrefix
			}
			return nil
		})
	})
	var out outcome
	out.add(r.view.ids[0], err)
	if err != nil {
		n.c.releaseLater(leases)
		clear(res.Present)
		return res, out.err(ctx, n.c, "lookup")
	}
	res.HitPrefix = prefix(res.Present, nil)
	var drop []*nodeLease
	for _, l := range leases {
		if res.HitPrefix == 0 || l.Pages == 0 {
			drop = append(drop, l) // covers nothing of the prefix
			continue
		}
		if res.Lease == nil {
			res.Lease = &Lease{Pages: res.HitPrefix, ns: n, r: r, Expires: l.Expires}
		}
		res.Lease.leases = append(res.Lease.leases, heldLease{node: 0, l: l})
		if l.Expires.Before(res.Lease.Expires) {
			res.Lease.Expires = l.Expires
		}
	}
	n.c.releaseLater(drop)
	if slices.Contains(res.Present[res.HitPrefix:], true) { // pages past the miss: orphans
		all := make([]int, len(keys))
		holder := make([]int32, len(keys))
		for p := range keys {
			all[p], holder[p] = p, -1
			if res.Present[p] {
				holder[p] = 0
			}
		}
		n.orphansLater(r, keys, res.Present, holder, [][]int{all}, []nodeLookup{{present: res.Present}})
	}
	return res, out.err(ctx, n.c, "lookup")
}

// orphansLater tells the nodes holding pages present past the first
// missing key that they are orphans (Namespace.markOrphans), in the
// background: the keys are one sequence, so every page after a miss has an
// absent ancestor, which its node cannot see when the miss is on another
// node. A node that cannot be told keeps the pages unmarked, to be evicted
// by value. The pages leave the location cache, so that the engine's next
// put of the sequence reaches their nodes (Exists clears the mark) rather
// than being answered from the cache.
//
// Each node also takes back what it counted for the pages past the miss
// that were in its own part's hit prefix (groups[i], answers[i]: it counts
// its leading present keys), which were not part of the engine's: its
// hit-prefix tokens and saved-FLOPs counters then add up to the prefixes
// engines were given.
func (n *Namespace) orphansLater(r *routing, keys []namespace.Key, present []bool, holder []int32,
	groups [][]int, answers []nodeLookup) {
	miss := prefix(present, nil)
	if miss >= len(keys) {
		return
	}
	tell := make([][]namespace.Key, len(groups)) // by node: counted keys first
	counted := make([]int, len(groups))
	countedAt := make([][]bool, len(groups)) // by node, by position; nil: none
	for i, g := range groups {
		if i >= len(answers) || answers[i].err != nil {
			continue
		}
		for j, p := range g {
			if j >= len(answers[i].present) || !answers[i].present[j] {
				break
			}
			if p > miss {
				if countedAt[i] == nil {
					countedAt[i] = make([]bool, len(keys))
				}
				countedAt[i][p] = true
				tell[i] = append(tell[i], keys[p])
				counted[i]++
			}
		}
	}
	for p := miss + 1; p < len(keys); p++ {
		if !present[p] || holder[p] < 0 {
			continue
		}
		i := holder[p]
		r.cache.gone(n.id, keys[p], r.view.ids[i])
		if countedAt[i] == nil || !countedAt[i][p] {
			tell[i] = append(tell[i], keys[p])
		}
	}
	for i, ks := range tell {
		if len(ks) == 0 {
			continue
		}
		c := counted[i]
		n.c.bg.Go(func() {
			err := n.call(context.Background(), r, i, func(ctx context.Context, h *nodeNS) error {
				_, err := h.markOrphans(ctx, ks, c)
				return err
			})
			if err != nil {
				n.c.log.Debug("marking orphans", "node", r.view.ids[i], "pages", len(ks), "err", err)
			}
		})
	}
}

// fallbacks groups, by node, the keys a lookup round found on no node whose
// primary answered without them while young (routing.fallback): the
// node to ask next, in one more round; nil when there is none. Keys whose
// primary failed are not asked again (the node is quarantined: the next
// call routes around it).
func (n *Namespace) fallbacks(r *routing, keys []namespace.Key, pl plan, answers []nodeLookup, present []bool) [][]int {
	now := time.Now()
	if !r.young(n.c.opts.FallbackWindow, now) {
		return nil
	}
	var more [][]int
	for p, k := range keys {
		prim := pl.prim[p]
		if present[p] || answers[prim].err != nil {
			continue
		}
		f := r.fallback(k, int(prim), n.c.opts.FallbackWindow, now)
		if f < 0 || int32(f) == pl.cachedAt[p] {
			continue // none, or asked already
		}
		if more == nil {
			more = make([][]int, len(r.view.ids))
		}
		more[f] = append(more[f], p)
	}
	return more
}

// plan is where a call sends each key.
type plan struct {
	prim     []int32 // each key's primary node
	cachedAt []int32 // the usable node the location cache names, or -1
	groups   [][]int // by node: the positions of the keys to send it
}

// plan groups keys by primary node, and with both true also sends a key to
// the node the location cache names when that differs.
func (n *Namespace) plan(r *routing, keys []namespace.Key, both bool) plan {
	pl := plan{prim: make([]int32, len(keys)), cachedAt: make([]int32, len(keys)), groups: make([][]int, len(r.view.ids))}
	if len(r.view.ids) == 1 { // a cluster of one: every key goes to its node
		pl.groups[0] = make([]int, len(keys))
		for p := range keys {
			pl.groups[0][p], pl.cachedAt[p] = p, -1
		}
		return pl
	}
	for p, k := range keys {
		pl.prim[p], pl.cachedAt[p] = int32(r.primary(k)), -1
		pl.groups[pl.prim[p]] = append(pl.groups[pl.prim[p]], p)
		if c, ok := n.cached(r, k); ok {
			pl.cachedAt[p] = int32(c)
			if both && c != int(pl.prim[p]) {
				pl.groups[c] = append(pl.groups[c], p)
			}
		}
	}
	return pl
}

// merge folds the nodes' answers into present, and returns, per key, a node
// that has it (its primary when that does, else -1) and the leases granted.
// It updates the location cache.
func (n *Namespace) merge(r *routing, keys []namespace.Key, pl plan, answers []nodeLookup, present []bool) ([]int32, []leaseSpan) {
	holder := make([]int32, len(keys))
	for p := range holder {
		holder[p] = -1
	}
	var spans []leaseSpan
	for i, a := range answers {
		spans = append(spans, a.spans...)
		if a.err != nil {
			continue
		}
		for j, p := range pl.groups[i] {
			if a.present[j] {
				present[p] = true
				if holder[p] < 0 || i == int(pl.prim[p]) {
					holder[p] = int32(i)
				}
			} else if pl.cachedAt[p] == int32(i) {
				r.cache.gone(n.id, keys[p], r.view.ids[i])
			}
		}
	}
	for p, h := range holder {
		if h >= 0 && h != pl.cachedAt[p] {
			r.cache.seen(n.id, keys[p], r.view.ids[h])
		}
	}
	return holder, spans
}

// leaseGaps leases, in a second round, the keys inside the prefix that are
// present but that no lease covers, on a node that has them.
func (n *Namespace) leaseGaps(ctx context.Context, r *routing, keys []namespace.Key, holder []int32,
	spans []leaseSpan, hit int, ttl time.Duration) ([]leaseSpan, outcome) {
	covered := coverage(len(keys), spans)
	again := make([][]int, len(r.view.ids))
	for p := range hit {
		if !covered[p] {
			again[holder[p]] = append(again[holder[p]], p)
		}
	}
	more, out := n.lookupRound(ctx, r, keys, again, true, ttl, false)
	var got []leaseSpan
	for _, a := range more {
		got = append(got, a.spans...)
	}
	return got, out
}

// lookupRound asks each node with a non-empty group about its keys (as
// probes: nodeNS.probe).
func (n *Namespace) lookupRound(ctx context.Context, r *routing, keys []namespace.Key, groups [][]int,
	lease bool, ttl time.Duration, probe bool) ([]nodeLookup, outcome) {
	answers := make([]nodeLookup, len(groups))
	fanOut(groups, func(i int) { answers[i] = n.lookupNode(ctx, r, i, keys, groups[i], lease, ttl, probe) })
	var out outcome
	for i, a := range answers {
		if len(groups[i]) > 0 {
			out.add(r.view.ids[i], a.err)
		}
	}
	return answers, out
}

// lookupNode asks node i about the keys at positions group, in batches of
// the node's limit. A batch asks for a lease only while every earlier
// batch was a full hit: the node-local prefix cannot extend past a miss.
func (n *Namespace) lookupNode(ctx context.Context, r *routing, i int, keys []namespace.Key, group []int,
	lease bool, ttl time.Duration, probe bool) nodeLookup {
	a := nodeLookup{present: make([]bool, len(group))}
	a.err = n.call(ctx, r, i, func(ctx context.Context, h *nodeNS) error {
		n.c.releaseLater(spanLeases(a.spans)) // from a first try, if fn runs again
		a.spans = nil
		covered := 0
		sub := keys // group is every key, in order (one node has them all)
		if len(group) != len(keys) {
			sub = make([]namespace.Key, len(group))
			for j, p := range group {
				sub[j] = keys[p]
			}
		}
		for start := 0; start < len(group); start += h.maxBatch {
			end := min(len(group), start+h.maxBatch)
			batch := group[start:end]
			look := h.lookup
			if probe {
				look = h.probe
			}
			lr, err := look(ctx, sub[start:end], lease && covered == start, ttl)
			if err != nil {
				return err
			}
			copy(a.present[start:], lr.Present)
			if lr.Lease != nil {
				a.spans = append(a.spans, leaseSpan{node: i, l: lr.Lease, pos: batch[:lr.HitPrefix]})
				covered = start + lr.HitPrefix
			}
		}
		return nil
	})
	if a.err != nil {
		n.c.releaseLater(spanLeases(a.spans))
		clear(a.present)
		a.spans = nil
	}
	return a
}

// keepLeases builds the Lease from the spans that cover part of the
// prefix, and returns the others for release.
func (n *Namespace) keepLeases(r *routing, keys []namespace.Key, prim []int32, spans []leaseSpan, hit int) (*Lease, []*nodeLease) {
	var drop []*nodeLease
	if hit == 0 {
		return nil, spanLeases(spans)
	}
	cl := &Lease{Pages: hit, ns: n, r: r}
	by := make([]int32, hit) // the node whose lease covers each prefix position
	for p := range by {
		by[p] = -1
	}
	for _, s := range spans {
		if len(s.pos) == 0 || s.pos[0] >= hit {
			drop = append(drop, s.l)
			continue
		}
		cl.leases = append(cl.leases, heldLease{node: s.node, l: s.l})
		if cl.Expires.IsZero() || s.l.Expires.Before(cl.Expires) {
			cl.Expires = s.l.Expires
		}
		for _, p := range s.pos {
			if p < hit && (by[p] < 0 || s.node == int(prim[p])) {
				by[p] = int32(s.node)
			}
		}
	}
	if len(cl.leases) == 0 {
		return nil, drop
	}
	for p, node := range by {
		if node >= 0 && node != prim[p] {
			if cl.except == nil {
				cl.except = map[namespace.Key]int{}
			}
			cl.except[keys[p]] = int(node)
		}
	}
	return cl, drop
}

// on returns the lease held on node i, or nil.
func (l *Lease) on(i int) *nodeLease {
	if l == nil {
		return nil
	}
	for _, nl := range l.leases {
		if nl.node == i {
			return nl.l
		}
	}
	return nil
}

// Renew extends every node lease to ttl from now (0: the nodes' default),
// in parallel. The error wraps ErrLeaseExpired if any had expired, and
// each failure; Expires is updated from the renewed ones.
func (l *Lease) Renew(ctx context.Context, ttl time.Duration) error {
	if err := l.ns.c.begin(); err != nil {
		return err
	}
	defer l.ns.c.end()
	errs := l.each(ctx, func(ctx context.Context, nl *nodeLease) error { return nl.renew(ctx, ttl) })
	l.Expires = time.Time{}
	for _, nl := range l.leases {
		if l.Expires.IsZero() || nl.l.Expires.Before(l.Expires) {
			l.Expires = nl.l.Expires
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("renew cluster lease: %w", err)
	}
	return nil
}

// Release ends every node lease, in parallel. A node that cannot be reached
// is not an error: its lease expires on its own.
func (l *Lease) Release(ctx context.Context) error {
	if err := l.ns.c.begin(); err != nil {
		return err
	}
	defer l.ns.c.end()
	var errs []error
	for _, err := range l.each(ctx, func(ctx context.Context, nl *nodeLease) error { return nl.release(ctx) }) {
		if !nodeFailed(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release cluster lease: %w", err)
	}
	return nil
}

// each runs fn on every node lease in parallel under NodeTimeout and
// returns the failures, naming their nodes.
func (l *Lease) each(ctx context.Context, fn func(context.Context, *nodeLease) error) []error {
	errs := make([]error, len(l.leases))
	var wg sync.WaitGroup
	for j, nl := range l.leases {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, l.ns.c.opts.NodeTimeout)
			defer cancel()
			if err := fn(nctx, nl.l); err != nil {
				id := l.r.view.ids[nl.node]
				if ctx.Err() == nil && nodeFailed(err) {
					l.ns.c.suspect(id, err)
				}
				errs[j] = fmt.Errorf("node %s: %w", id, err)
			}
		})
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// releaseLater releases leases in the background, owned by the Cluster.
// Close waits for these releases (up to NodeTimeout) rather than cutting
// them short, so that it leaves no lease pinning pages behind.
func (c *Client) releaseLater(ls []*nodeLease) {
	for _, l := range ls {
		c.bg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.NodeTimeout)
			defer cancel()
			if err := l.release(ctx); err != nil {
				c.log.Debug("releasing an unneeded lease", "err", err)
			}
		})
	}
}

func spanLeases(spans []leaseSpan) []*nodeLease {
	var out []*nodeLease
	for _, s := range spans {
		out = append(out, s.l)
	}
	return out
}

// coverage marks the positions some lease covers.
func coverage(n int, spans []leaseSpan) []bool {
	covered := make([]bool, n)
	for _, s := range spans {
		for _, p := range s.pos {
			covered[p] = true
		}
	}
	return covered
}

// prefix is the number of leading positions present (and covered, when
// covered is not nil).
func prefix(present, covered []bool) int {
	for p := range present {
		if !present[p] || (covered != nil && !covered[p]) {
			return p
		}
	}
	return len(present)
}

// outcome tallies the nodes of a call.
type outcome struct {
	asked, failed int
	failure       error   // the first node failure
	errs          []error // answers the caller must see
}

func (o *outcome) add(id string, err error) {
	o.asked++
	switch {
	case err == nil:
	case nodeFailed(err):
		o.failed++
		if o.failure == nil {
			o.failure = fmt.Errorf("node %s: %w", id, err)
		}
	default:
		o.errs = append(o.errs, fmt.Errorf("node %s: %w", id, err))
	}
}

func (o *outcome) merge(b outcome) {
	o.asked += b.asked
	o.failed += b.failed
	if o.failure == nil {
		o.failure = b.failure
	}
	o.errs = append(o.errs, b.errs...)
}

// err is the call's error: the caller's context, Close, or the errors of
// answers. Node failures are not errors: the failed nodes' keys are misses
// (Client.AllFailed counts the calls where every node failed).
func (o *outcome) err(ctx context.Context, c *Client, op string) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", op, ctx.Err())
	case c.ctx.Err() != nil:
		return fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if o.asked > 0 && o.failed == o.asked {
		// Every node asked failed or timed out: their keys are misses
		// (docs/design.md §6.5: recompute is always correct), counted, never an
		// error for the caller.
		c.allFailed.Add(1)
		c.log.Debug("every node of a call failed; its keys are misses", "op", op, "nodes", o.asked, "err", o.failure)
	}
	if len(o.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", op, errors.Join(o.errs...))
}

// AllFailed counts the calls (lookups, gets, puts) in which every node
// asked failed or timed out: their keys were answered as misses (pages not
// stored, for a put), not as an error.
func (c *Client) AllFailed() int64 { return c.allFailed.Load() }

// ChecksumFailures is how many pages gets received whose bytes did not
// match their checksum, on any plane: each a miss to the caller (Get's
// error wraps ErrChecksum).
func (c *Client) ChecksumFailures() int64 { return c.checksumFailures.Load() }
