package client

import (
	"context"
	"fmt"
	"time"
)

// NodeLease names one node's lease as another process holds it: the
// node's ID, the lease ID and its expiry (the Python client's
// Lease.export, an engine's scheduler handing a hit to its workers).
type NodeLease struct {
	Node    string
	ID      uint64
	Expires time.Time
}

// AdoptLease is a Lease of this namespace made of node leases another
// client took: Get reads each key from its owner under the lease held
// there. Nodes outside the current view are left out (their keys read
// without a lease, as from a lease that expired). Whoever took the leases
// renews and releases them; a Release of the adopted lease ends them too.
func (n *Namespace) AdoptLease(ctx context.Context, pages int, leases []NodeLease) (*Lease, error) {
	if err := n.c.begin(); err != nil {
		return nil, err
	}
	defer n.c.end()
	r := n.c.routing()
	l := &Lease{Pages: pages, ns: n, r: r}
	for _, nl := range leases {
		i, ok := r.at(nl.Node)
		if !ok || l.on(i) != nil {
			continue
		}
		h, err := n.handle(ctx, r, i)
		if err != nil {
			return nil, fmt.Errorf("adopt lease on node %s: %w", nl.Node, err)
		}
		l.leases = append(l.leases, heldLease{node: i, l: &nodeLease{ns: h, ID: nl.ID, Expires: nl.Expires}})
		if l.Expires.IsZero() || nl.Expires.Before(l.Expires) {
			l.Expires = nl.Expires
		}
	}
	return l, nil
}
