package node

import (
	"github.com/stratakv/strata/eviction/coord"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
)

// startCoord starts the node's part in globally coordinated eviction: the
// summaries it gossips, the coordinator election, and applying cutoffs
// (coord package).
func (n *Node) startCoord(reg *registry.Registry) error {
	var kinds []string
	var caps []int64
	for _, t := range n.tiers {
		st := t.Stats()
		kinds = append(kinds, st.Kind.String())
		caps = append(caps, st.Capacity)
	}
	c, err := coord.Start(coord.Config{NodeID: n.id, Registry: reg, Store: n.store.Evictor(), Members: n.members,
		Tiers: kinds, Capacities: caps, Advertise: n.members.UpdateMetaPaced, Round: n.cfg.CoordRound,
		StaleRounds: n.cfg.CoordStaleRounds, CandidateTTL: n.cfg.CoordinatorTTL, NoFloor: n.cfg.NoCutoffFloor, Logger: n.log})
	if err != nil {
		return err
	}
	n.coord.Store(c)
	return nil
}

// report is the node's value summaries as of the coordination loop's last
// round, encoded for the coordinator that asks (membership.Config.Report);
// none before the loop starts.
func (n *Node) report() []byte {
	if c := n.coord.Load(); c != nil {
		return c.Report()
	}
	return nil
}

// CoordState is the eviction coordination the node applies now.
func (n *Node) CoordState() coord.State {
	if c := n.coord.Load(); c != nil {
		return c.State()
	}
	return coord.State{}
}

// coordView adapts the node's coordination state to the server's Cluster
// service.
type coordView struct{ n *Node }

func (v coordView) CoordState() server.CoordState {
	st := v.n.CoordState()
	return server.CoordState{Coordinator: st.Coordinator, Epoch: st.Epoch, Round: st.Round,
		Coordinated: st.Coordinated, Worth: st.Worth}
}

// HintStats counts the remote child hints this node sent to parent owners
// and those it dropped (queue full, owner unreachable, parent owned here).
func (n *Node) HintStats() peer.Stats { return n.hints.Stats() }

// HandoffStats is what the hinted handoff did (zero when it is off).
func (n *Node) HandoffStats() peer.HandoffStats {
	if n.handoff == nil {
		return peer.HandoffStats{}
	}
	return n.handoff.Stats()
}
