package peer

import (
	"math"
	"slices"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/placement"
	"github.com/stratakv/strata/store"
)

// Route splits hints by the index of the member each must reach, among
// members members: child and value hints go to the owner of their parent
// key (owner, e.g. a placement view's Owner), parent-gone notices (after
// them) to every member but self. A child or value hint whose parent self
// owns would be about a page absent everywhere it is looked for: it is
// dropped, and counted in dropped.
func Route(members, self int, owner func(namespace.Key) int, hints []store.ChildHint) (groups [][]store.ChildHint, dropped int) {
	return RouteCandidates(members, self, func(k namespace.Key, dst []int) []int {
		return append(dst[:0], owner(k))
	}, hints)
}

// RouteCandidates is Route with a parent's placement candidates (e.g. a
// placement view's Candidates, which fills dst): child and value hints go
// to the first two that are not self, since a parent its owner refused is
// put on its second candidate (a spill), and the node that holds it must
// learn of its remote children to send a parent-gone notice when it goes.
// The candidate that does not hold the parent remembers the hint for a
// while (store.ApplyHints), harmlessly. A hint whose only candidate is
// self is dropped, and counted in dropped. Parent-gone notices go to
// every member but self: the node routes them with RouteKnown instead;
// the trace simulator (cmd/strata-sim), which keeps no Holders, with this.
func RouteCandidates(members, self int, candidates func(k namespace.Key, dst []int) []int, hints []store.ChildHint) (groups [][]store.ChildHint, dropped int) {
	return RouteKnown(members, self, candidates, nil, hints)
}

// RouteKnown is RouteCandidates with the nodes known to hold children of
// each parent (holders, e.g. a Holders' Take by view index, which fills
// dst): a parent-gone notice goes to those but self, and to the parent's
// first two candidates but self when holders knows of none, so that a
// notice costs at most MaxHolders messages whatever the cluster's size. A
// nil holders sends notices to every member but self (RouteCandidates).
// Notices follow each member's other hints. The node's sender and the
// cluster simulator (cmd/strata-cluster-sim) route with it.
func RouteKnown(members, self int, candidates func(k namespace.Key, dst []int) []int,
	holders func(ns namespace.ID, parent namespace.Key, dst []int) []int, hints []store.ChildHint) (groups [][]store.ChildHint, dropped int) {
	groups = make([][]store.ChildHint, members)
	var gone []store.ChildHint
	for i := range groups {
		groups[i] = make([]store.ChildHint, 0, len(hints)/max(members-1, 1)+1)
	}
	var buf [2]int
	var to []int
	for _, c := range hints {
		if c.Gone {
			g := store.ChildHint{NS: c.NS, Parent: c.Parent, Gone: true}
			if holders == nil {
				gone = append(gone, g)
				continue
			}
			if to = holders(c.NS, c.Parent, to[:0]); len(to) == 0 {
				to = append(to, candidates(c.Parent, buf[:])...)
			}
			noticeTo(groups, self, to, g)
			continue
		}
		sent := false
		for _, o := range candidates(c.Parent, buf[:]) {
			if o == self || o < 0 || o >= members {
				continue
			}
			groups[o] = append(groups[o], store.ChildHint{NS: c.NS, Parent: c.Parent, Added: c.Added, Worth: c.Worth})
			sent = true
		}
		if !sent {
			dropped++ // the parent would be here: it is gone
		}
	}
	for i := range groups {
		if len(gone) > 0 && i != self {
			groups[i] = append(groups[i], gone...)
		}
	}
	return groups, dropped
}

// noticeTo appends notice g to the groups of members to, each once, but
// self's and those out of range.
func noticeTo(groups [][]store.ChildHint, self int, to []int, g store.ChildHint) {
	for j, o := range to {
		if o == self || o < 0 || o >= len(groups) || slices.Contains(to[:j], o) {
			continue
		}
		groups[o] = append(groups[o], g)
	}
}

// routeView is RouteKnown over a placement view, self named by its node
// id, with the holders known (taken from known): nodes not in the view are
// skipped.
func routeView(view *placement.View, self string, known *Holders, hints []store.ChildHint) ([][]store.ChildHint, int) {
	idx := -1
	byID := make(map[string]int, view.Len())
	for i := range view.Len() {
		byID[view.Node(i).ID] = i
		if view.Node(i).ID == self {
			idx = i
		}
	}
	holders := func(ns namespace.ID, parent namespace.Key, dst []int) []int {
		for _, id := range known.Take(ns, parent) {
			if i, ok := byID[id]; ok {
				dst = append(dst, i)
			}
		}
		return dst
	}
	return RouteKnown(view.Len(), idx, func(k namespace.Key, dst []int) []int { return view.Candidates(k, dst) }, holders, hints)
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
