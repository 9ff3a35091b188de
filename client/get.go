package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratakv/strata/namespace"
)

// Get reads the pages of keys into bufs (bufs[i] receives keys[i]; each at
// least PageBytes long) from their nodes in parallel, verifying every page
// against its checksum, and returns which arrived intact. found is always
// len(keys) long and exact, whatever the error: a page not found (absent,
// on a node that failed or passed NodeTimeout, or whose bytes did not
// verify) leaves its buffer's contents unspecified. No buffer is written
// after Get returns.
//
// With a lease from Lookup, each page is read from the node whose lease
// covers it, under that lease. The error wraps ErrLeaseExpired when a
// node's lease had expired (its pages are not found), ErrChecksum when
// bytes did not verify, or the caller's context error; a node failure, even
// of every node asked, is a miss, not an error (Client.AllFailed counts the
// calls where every node failed).
//
// A page is read first from the node the lease or the location cache
// names, else its owner; a page not found there is tried, in a second round,
// on the other of the two when they differ, or, when only the owner was
// named and it joined the view less than Options.FallbackWindow ago, on the
// key's next placement candidate (where the page went while the owner was
// away, until handed back).
func (n *Namespace) Get(ctx context.Context, keys []namespace.Key, bufs [][]byte, lease *Lease) (found []bool, err error) {
	if len(bufs) != len(keys) {
		return nil, fmt.Errorf("get: %d buffers for %d keys: %w", len(bufs), len(keys), ErrInvalid)
	}
	for i, b := range bufs {
		if len(b) < n.pageBytes {
			return nil, fmt.Errorf("get: buffer %d is %d bytes, pages are %d: %w", i, len(b), n.pageBytes, ErrBufferTooSmall)
		}
	}
	// A lease from another Client of the namespace serves too: it names
	// its nodes by ID, and this client's connections carry its node leases.
	if lease != nil && lease.ns.id != n.id {
		return nil, fmt.Errorf("get: lease of another namespace: %w", ErrInvalid)
	}
	if err := n.c.begin(); err != nil {
		return nil, err
	}
	defer n.c.end()
	if len(keys) == 0 {
		return []bool{}, nil
	}
	r := n.c.routing()
	if lease != nil {
		r = lease.r
	}
	if len(r.view.ids) == 1 { // a cluster of one: its node serves every key
		if lease == nil {
			if found := n.getLocal(ctx, r, keys, bufs); found != nil {
				return found, nil
			}
		}
		found, err = n.getNode(ctx, r, 0, keys, bufs, lease.on(0))
		var out outcome
		out.add(r.view.ids[0], err)
		return found, out.err(ctx, n.c, "get")
	}
	found = make([]bool, len(keys))
	first := make([][]int, len(r.view.ids))
	second := make([]int32, len(keys)) // the other place to try, or -1
	cachedAt := make([]int32, len(keys))
	now := time.Now()
	young := r.young(n.c.opts.FallbackWindow, now)
	for p, k := range keys {
		at, other := r.primary(k), -1
		c, cached := n.cached(r, k)
		cachedAt[p] = -1
		if cached {
			cachedAt[p] = int32(c)
		}
		if x, ok := lease.exception(k); ok {
			at, other = x, at
		} else if cached && c != at {
			if lease != nil {
				other = c // the lease covers the key on its primary
			} else {
				at, other = c, at
			}
		} else if lease == nil && young {
			other = r.fallback(k, at, n.c.opts.FallbackWindow, now) // a young owner: the page may not be back yet
		}
		first[at] = append(first[at], p)
		second[p] = int32(other)
	}
	failed := make([]bool, len(r.view.ids))
	out := n.getRound(ctx, r, keys, bufs, first, lease, found, failed, cachedAt)
	again := make([][]int, len(r.view.ids))
	for p := range keys {
		if o := second[p]; !found[p] && o >= 0 && !failed[o] {
			again[o] = append(again[o], p)
		}
	}
	if ctx.Err() == nil {
		out.merge(n.getRound(ctx, r, keys, bufs, again, lease, found, failed, cachedAt))
	}
	return found, out.err(ctx, n.c, "get")
}

// CountChecksum is how many of err's joined errors are ErrChecksum (one a
// page whose bytes did not verify): the pages a Get reported not found
// for that reason.
func CountChecksum(err error) int {
	switch e := err.(type) {
	case nil:
		return 0
	case interface{ Unwrap() []error }:
		n := 0
		for _, x := range e.Unwrap() {
			n += CountChecksum(x)
		}
		return n
	}
	if err == ErrChecksum {
		return 1
	}
	return CountChecksum(errors.Unwrap(err))
}

// exception returns the node whose lease covers k when it is not k's
// primary in the lease's view.
func (l *Lease) exception(k namespace.Key) (int, bool) {
	if l == nil || l.except == nil {
		return 0, false
	}
	i, ok := l.except[k]
	return i, ok
}

// getRound reads, from each node with a group, the pages at those
// positions, and records what arrived, which nodes failed, and what the
// location cache learns.
func (n *Namespace) getRound(ctx context.Context, r *routing, keys []namespace.Key, bufs [][]byte, groups [][]int,
	lease *Lease, found, failed []bool, cachedAt []int32) outcome {
	got := make([][]bool, len(groups))
	errs := make([]error, len(groups))
	fanOut(groups, func(i int) {
		sub, subBufs := make([]namespace.Key, len(groups[i])), make([][]byte, len(groups[i]))
		for j, p := range groups[i] {
			sub[j], subBufs[j] = keys[p], bufs[p]
		}
		got[i], errs[i] = n.getNode(ctx, r, i, sub, subBufs, lease.on(i))
	})
	var out outcome
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		out.add(r.view.ids[i], errs[i])
		if errs[i] != nil && nodeFailed(errs[i]) {
			failed[i] = true
		}
		for j, p := range g {
			switch {
			case got[i][j]:
				found[p] = true
				if cachedAt[p] != int32(i) {
					r.cache.seen(n.id, keys[p], r.view.ids[i])
				}
			case cachedAt[p] == int32(i) && !failed[i]:
				r.cache.gone(n.id, keys[p], r.view.ids[i])
			}
		}
	}
	return out
}

// getNode reads the pages of keys from node i, in batches of its limit,
// into bufs. Pages of a batch that failed are not found; pages that failed
// their checksum are not found and reported.
func (n *Namespace) getNode(ctx context.Context, r *routing, i int, keys []namespace.Key, bufs [][]byte,
	lease *nodeLease) ([]bool, error) {
	var got []bool
	err := n.call(ctx, r, i, func(ctx context.Context, h *nodeNS) error {
		var bad []error
		err := eachBatch(len(keys), h.maxBatch, func(start, end int) error {
			f, err := h.get(ctx, keys[start:end], bufs[start:end], lease, true)
			if f == nil {
				return err
			}
			if start == 0 && end == len(keys) {
				got = f // the one batch: its answer is the call's
			} else {
				if got == nil {
					got = make([]bool, len(keys))
				}
				copy(got[start:], f)
			}
			if err != nil {
				bad = append(bad, err) // checksum failures: the batch went through
				n.c.checksumFailures.Add(int64(CountChecksum(err)))
			}
			return nil
		})
		if len(bad) == 0 {
			return err
		}
		return errors.Join(append(bad, err)...)
	})
	if got == nil {
		got = make([]bool, len(keys))
	}
	return got, err
}

// getLocal serves a lease-less get of a cluster of one from the shm
// location cache alone, when that knows every key: the copies the shm plane
// makes first anyway (shmSession.get), without a node call's NodeTimeout
// context and Close bookkeeping, which a memcpy from the mapped arena needs
// neither of (begin holds Close off meanwhile; a copy that raced a reclaim
// fails its generation check and sends the call the usual way). nil: the
// usual way.
func (n *Namespace) getLocal(ctx context.Context, r *routing, keys []namespace.Key, bufs [][]byte) []bool {
	n.mu.Lock()
	h := n.handles[r.view.ids[0]]
	n.mu.Unlock()
	if h == nil || h.c.addr != r.view.addrs[0] {
		return nil
	}
	s := h.c.shm.Load()
	if s == nil || !s.pin() {
		return nil
	}
	defer s.unpin()
	found, err := h.getCached(ctx, s, keys, bufs)
	if err != nil {
		return nil
	}
	return found
}
