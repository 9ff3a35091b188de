package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stratakv/strata/namespace"
)

// putTries is how many placement candidates a page is offered to: its
// owner, then its spill candidate (docs/design.md §6.4).
const putTries = 2

// Put publishes pages on their owners, in parallel per node, with the
// two-phase protocol. A page its node cannot take (the node failed or
// passed NodeTimeout, answered NO_SPACE or NOT_ADMITTED, or rejected or
// failed the page: a node full of more valuable pages rejects it as not
// admitted) is offered to its next placement candidate, its spill
// candidate; nodes in quarantine are skipped.
// Pages the location cache knows present on a node of the view come back
// Exists without a round trip. Pages committed past a page of their
// sequence that no node took are deleted again and come back Rejected
// (dropPast): no lookup could reach them.
//
// results is always len(pages) long. The error is nil unless the caller's
// context ended, a page has the wrong size (ErrInvalid: nothing is sent),
// or a node refused the request itself; a page that found no node (every
// node asked failed: counted by Client.AllFailed) has Status Failed and a
// Reason naming the failure.
//
// A ctx carrying a Pieces (WithPieces) puts the pages registered there from
// their pieces: straight into the arena over shared memory, straight to the
// socket over raw tcp, gathered into their Data first on any other plane;
// pieces that do not add up to the page size are ErrInvalid.
func (n *Namespace) Put(ctx context.Context, pages []Page) (results []PutResult, err error) {
	pcs := piecesOf(ctx)
	for i, p := range pages {
		if len(p.Data) != n.pageBytes {
			return nil, fmt.Errorf("put page %d: %d bytes, namespace pages are %d: %w", i, len(p.Data), n.pageBytes, ErrInvalid)
		}
		if pc := pcs.of(p.Data); pc != nil && piecesLen(pc) != n.pageBytes {
			return nil, fmt.Errorf("put page %d: pieces of %d bytes, namespace pages are %d: %w", i, piecesLen(pc), n.pageBytes, ErrInvalid)
		}
	}
	if err := n.c.begin(); err != nil {
		return nil, err
	}
	defer n.c.end()
	pages = withChainDepths(pages) // before the sequence is split over nodes
	results = make([]PutResult, len(pages))
	r := n.c.routing()
	if len(r.view.ids) == 1 { // a cluster of one: its node takes every page, or no node does
		all := make([]int, len(pages))
		for p := range all {
			all[p] = p
		}
		var out outcome
		at := make([]int, len(pages))
		if ctx.Err() == nil {
			out = n.putRound(ctx, r, pages, [][]int{all}, results, at)
			n.dropPast(ctx, r, pages, results, at)
		}
		return results, out.err(ctx, n.c, "put")
	}
	cand := make([][]int, len(pages)) // each page's nodes to try, best first
	var pending []int
	for p, pg := range pages {
		if _, ok := n.cached(r, pg.Key); ok {
			results[p] = PutResult{Status: Exists}
			continue
		}
		cand[p] = r.candidates(pg.Key, putTries, make([]int, 0, putTries))
		if len(cand[p]) == 0 { // every candidate in quarantine: try the owner anyway
			cand[p] = append(cand[p], r.view.place.Owner(pg.Key))
		}
		pending = append(pending, p)
	}
	var out outcome
	at := make([]int, len(pages))
	for try := 0; try < putTries && len(pending) > 0 && ctx.Err() == nil; try++ {
		groups := make([][]int, len(r.view.ids))
		for _, p := range pending {
			groups[cand[p][try]] = append(groups[cand[p][try]], p)
		}
		out.merge(n.putRound(ctx, r, pages, groups, results, at))
		pending = pending[:0]
		for g := range groups {
			for _, p := range groups[g] {
				if retry(results[p]) && try+1 < len(cand[p]) {
					pending = append(pending, p)
				}
			}
		}
	}
	if ctx.Err() == nil {
		n.dropPast(ctx, r, pages, results, at)
	}
	return results, out.err(ctx, n.c, "put")
}

// putRound puts each node's group and fills in results, and in at the
// node that answered each page.
func (n *Namespace) putRound(ctx context.Context, r *routing, pages []Page, groups [][]int, results []PutResult, at []int) outcome {
	got := make([][]PutResult, len(groups))
	errs := make([]error, len(groups))
	fanOut(groups, func(i int) {
		sub := pages // the group is every page, in order
		if len(groups[i]) != len(pages) {
			sub = make([]Page, len(groups[i]))
			for j, p := range groups[i] {
				sub[j] = pages[p]
			}
		}
		errs[i] = n.call(ctx, r, i, func(ctx context.Context, h *nodeNS) (err error) {
			got[i], err = h.put(ctx, sub)
			return err
		})
	})
	var out outcome
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		id := r.view.ids[i]
		if errs[i] != nil {
			status := Failed
			if refused(errs[i]) { // the node is full: spill, as for a rejected page
				status = Rejected
				out.add(id, nil)
			} else {
				out.add(id, errs[i])
			}
			for _, p := range g {
				results[p] = PutResult{Status: status, Reason: fmt.Sprintf("node %s: %v", id, errs[i])}
			}
			continue
		}
		out.add(id, nil)
		for j, p := range g {
			results[p] = got[i][j]
			if got[i][j].Status.Stored() {
				r.cache.seen(n.id, pages[p].Key, id)
			}
			at[p] = i
		}
	}
	return out
}

// notStored reports whether a page's outcome says no node holds it after
// the put: every outcome but a stored one, and Failed (a node that failed
// or passed NodeTimeout may hold the page, as a lookup's miss may be a
// node restarting).
func notStored(s PutStatus) bool { return !s.Stored() && s != Failed }

// dropPast deletes the pages the put committed past a page of their
// sequence (by parent links) that it stored nowhere, and answers them
// Rejected. The put stores a sequence in parallel per node, so a page
// that every candidate refused does not keep its descendants on other
// nodes from being stored; they are orphans from birth, which no
// parent-gone notice ever names (their parent never was anywhere), and no
// lookup can reach until the page is put again. Deleting them frees their
// room at once, where a mark (as lookups report orphans) would leave them
// until their node next evicts. Pages answered Exists are left as they
// are: an earlier put stored them, and a lookup reports them. A failed
// delete leaves the pages to be found by lookups.
func (n *Namespace) dropPast(ctx context.Context, r *routing, pages []Page, results []PutResult, at []int) {
	gap := slices.IndexFunc(results, func(res PutResult) bool { return notStored(res.Status) })
	if gap < 0 || gap == len(pages)-1 {
		return
	}
	parent := parents(pages)
	cut := make([]bool, len(pages)) // past a page stored nowhere
	groups := make([][]int, len(r.view.ids))
	for p := gap; p < len(pages); p++ {
		if notStored(results[p].Status) {
			cut[p] = true
			continue
		}
		j, ok := parent(p)
		if !ok || !cut[j] {
			continue
		}
		cut[p] = true
		if results[p].Status == Committed {
			groups[at[p]] = append(groups[at[p]], p)
			results[p] = PutResult{Status: Rejected, Reason: "deleted again: a page before it in its sequence is stored nowhere"}
			r.cache.gone(n.id, pages[p].Key, "")
		}
	}
	fanOut(groups, func(i int) {
		sub := make([]namespace.Key, 0, len(groups[i]))
		for _, p := range slices.Backward(groups[i]) { // deepest first, as a node drops pages
			sub = append(sub, pages[p].Key)
		}
		_ = n.call(ctx, r, i, func(ctx context.Context, h *nodeNS) error {
			_, err := h.delete(ctx, sub)
			return err
		})
	})
}

// refused reports whether a node's whole-call error says it has no room
// for the pages (NO_SPACE) or values them below what it holds
// (NOT_ADMITTED, docs/design.md §5.4): the node is healthy, and the pages go to their
// next placement candidate.
func refused(err error) bool {
	return errors.Is(err, ErrNoSpace) || errors.Is(err, errNotAdmitted)
}

// retry reports whether a page's outcome is worth offering to its next
// candidate: the node had no room or could not store it.
func retry(res PutResult) bool { return res.Status == Failed || res.Status == Rejected }

// Delete removes pages from every node that may hold them: their owner and
// spill candidate, and the node the location cache names. deleted counts
// the copies removed. A node that fails makes the error wrap
// ErrUnavailable, as its copies may remain.
func (n *Namespace) Delete(ctx context.Context, keys []namespace.Key) (deleted int, err error) {
	if err := n.c.begin(); err != nil {
		return 0, err
	}
	defer n.c.end()
	r := n.c.routing()
	groups := make([][]int, len(r.view.ids))
	var buf [putTries + 1]int
	for p, k := range keys {
		at := r.view.place.Candidates(k, buf[:min(putTries, len(r.view.ids))])
		if c, ok := n.cached(r, k); ok && !slices.Contains(at, c) {
			at = append(at, c)
		}
		for _, i := range at {
			groups[i] = append(groups[i], p)
		}
		r.cache.gone(n.id, k, "")
	}
	counts := make([]int, len(groups))
	errs := make([]error, len(groups))
	fanOut(groups, func(i int) {
		sub := make([]namespace.Key, len(groups[i]))
		for j, p := range groups[i] {
			sub[j] = keys[p]
		}
		errs[i] = n.call(ctx, r, i, func(ctx context.Context, h *nodeNS) (err error) {
			counts[i], err = h.delete(ctx, sub)
			return err
		})
	})
	var failed []error
	for i, err := range errs {
		deleted += counts[i]
		switch {
		case err == nil:
		case nodeFailed(err):
			failed = append(failed, fmt.Errorf("node %s: %w: %w", r.view.ids[i], ErrUnavailable, err))
		default:
			failed = append(failed, fmt.Errorf("node %s: %w", r.view.ids[i], err))
		}
	}
	if ctx.Err() != nil {
		return deleted, fmt.Errorf("delete: %w", ctx.Err())
	}
	if err := errors.Join(failed...); err != nil {
		return deleted, fmt.Errorf("delete: %w", err)
	}
	return deleted, nil
}
