package node

import (
	"time"

	"github.com/stratakv/strata/metrics"
	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/transfer"
)

// The node's transfer rooms (package transfer, docs/design.md §14): the
// rooms whose key this node owns are kept here, their pages pinned where
// they live (peer.Pinner), swept once a second; the metrics read them
// (roomMetrics) and observe each load's time (roomAcked).

// sweepEvery is how often expired attempts, pins and tombstones are swept.
const sweepEvery = time.Second

// startTransfer builds the rooms; call it after startMembership. Its
// sweeper starts later (sweepRooms).
func (n *Node) startTransfer() {
	n.pins = peer.NewPinner(n.id, n.store, n.members, n.cfg.peerDial(), n.log)
	tc := n.cfg.Transfer
	tc.Pinner = n.pins
	if tc.MaxPinnedBytes == 0 {
		tc.MaxPinnedBytes = uint64(n.cfg.HostBytes) / 4
	}
	if tc.TenantPinnedBytes == nil {
		half := tc.MaxPinnedBytes / 2
		tc.TenantPinnedBytes = func(string) uint64 { return half }
	}
	if acked := tc.Acked; acked != nil {
		tc.Acked = func(s transfer.Status) { n.roomAcked(s); acked(s) }
	} else {
		tc.Acked = n.roomAcked
	}
	n.rooms = transfer.New(tc)
}

// roomAcked observes an attempt's publish-to-loaded time. Acks come
// through the server, so n.srv is set by the time one ends an attempt.
func (n *Node) roomAcked(s transfer.Status) {
	n.srv.Metrics().RoomLoaded(s.Done.Sub(s.Published))
}

// roomMetrics adapts the rooms to metrics.RoomsSource.
type roomMetrics struct{ r *transfer.Rooms }

func (m roomMetrics) RoomStats() metrics.Rooms {
	s := m.r.Stats()
	out := metrics.Rooms{Live: s.Live, Tombstones: s.Tombstones, Waiting: s.Waiting, PinnedBytes: s.PinnedBytes,
		Opened: s.Opened, Published: s.Published, Acked: s.Acked, AckedBytes: s.AckedBytes, Expired: s.Expired,
		Aborted: make(map[string]uint64, len(s.Aborted)), Mismatches: s.Mismatches, Busy: s.Busy, Stale: s.Stale,
		TombstonesDropped: s.TombstonesDropped}
	for i, n := range s.Aborted {
		if r := transfer.Reason(i); r != transfer.ReasonNone {
			out.Aborted[r.String()] = n
		}
	}
	return out
}

// sweepRooms sweeps the rooms until Close; start it with the node's other
// goroutines, once nothing can fail any more.
func (n *Node) sweepRooms() {
	n.wg.Add(1)
	go n.every(sweepEvery, n.rooms.Sweep)
}

// Rooms is the node's transfer rooms.
func (n *Node) Rooms() *transfer.Rooms { return n.rooms }

// closeTransfer ends waiting consumers and releases every pin; it is
// idempotent.
func (n *Node) closeTransfer() {
	if n.rooms != nil {
		n.rooms.Close()
	}
	if n.pins != nil {
		n.pins.Close()
	}
}
