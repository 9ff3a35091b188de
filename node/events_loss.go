package node

import (
	"context"
	"time"

	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/namespace"
)

// A node that leaves the cluster (dead, or gone from the view) cannot
// clear its own streams: a router would keep its blocks. The eviction
// coordinator does it for it. Every node with a stream watches the
// membership and remembers, for each member that advertised a stream
// (membership.Meta.EventsIncarnation), the incarnation it last advertised;
// when such a member leaves, the node marks it lost, and the node that is
// the coordinator then sends, on each of its own tenants' streams, an
// AllBlocksCleared under the lost node's topic (that node's name and
// incarnation) for every namespace of the tenant in etcd. A node that is
// not the coordinator keeps its lost marks until it is one, or until the
// member comes back; so a loss during a change of coordinator is cleared
// by the next one, and perhaps twice, which a consumer takes as once.
// Without etcd there is no coordinator and no such clear.

// lossCheckEvery is how often the watcher looks again without a
// membership change (the coordinator may have changed).
const lossCheckEvery = time.Second

// watchLostStreams runs the watcher above until Close; nothing without a
// stream of the node's own or a registry.
func (n *Node) watchLostStreams() {
	if n.events == nil || n.reg.Load() == nil {
		return
	}
	changed, cancel := n.members.Subscribe()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer cancel()
		t := time.NewTicker(lossCheckEvery)
		defer t.Stop()
		w := lossWatch{known: map[string]uint64{}, lost: map[string]uint64{}}
		for {
			w.see(n.id, n.members.Members())
			if len(w.lost) > 0 && n.CoordState().Leading {
				for id, inc := range w.lost {
					if n.clearLostStream(id, inc) {
						delete(w.lost, id)
					}
				}
			}
			select {
			case <-n.stop:
				return
			case <-changed:
			case <-t.C:
			}
		}
	}()
}

// lossWatch is the watcher's memory: the stream incarnation each member
// advertised while alive, and the members lost since.
type lossWatch struct {
	known map[string]uint64 // member → the incarnation it advertised
	lost  map[string]uint64 // member → the incarnation to clear
}

// see updates w from the membership view: a member alive (or suspect)
// with a stream is known, and not lost; a known member dead, left or
// gone from the view is lost.
func (w *lossWatch) see(self string, members []membership.Member) {
	present := make(map[string]bool, len(members))
	for _, m := range members {
		if m.NodeID == self {
			continue
		}
		present[m.NodeID] = true
		switch {
		case m.State == membership.Alive || m.State == membership.Suspect:
			if inc := m.Meta.EventsIncarnation; inc != 0 {
				w.known[m.NodeID] = inc
				if w.lost[m.NodeID] == inc {
					delete(w.lost, m.NodeID) // back before it was cleared
				}
			}
		case w.known[m.NodeID] != 0:
			w.lost[m.NodeID] = w.known[m.NodeID]
			delete(w.known, m.NodeID)
		}
	}
	for id, inc := range w.known {
		if !present[id] {
			w.lost[id] = inc
			delete(w.known, id)
		}
	}
}

// clearLostStream sends, on each tenant's stream, an AllBlocksCleared under
// node's topic at incarnation inc for every namespace of the tenant in
// etcd; false when etcd could not say (the watcher tries again).
func (n *Node) clearLostStream(node string, inc uint64) bool {
	reg := n.reg.Load()
	if reg == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for tenant, p := range n.events.pubs {
		recs, err := reg.Namespaces(ctx, tenant)
		if err != nil {
			n.log.Warn("clearing a lost node's event stream", "node", node, "err", err)
			return false
		}
		for _, r := range recs {
			if id, err := namespace.ParseID(r.ID); err == nil && (n.events.only == nil || n.events.only[id]) {
				p.Publish(events.Event{Namespace: r.ID, Kind: events.Cleared, Node: node, Incarnation: inc})
			}
		}
	}
	n.log.Info("cleared a lost node's event streams", "node", node, "incarnation", inc)
	return true
}
