package node

import (
	"time"

	"github.com/stratakv/strata/peer"
	"github.com/stratakv/strata/transfer"
)

// The node's transfer rooms (package transfer, docs/design.md §14): the
// rooms whose key this node owns are kept here, their pages pinned where
// they live (peer.Pinner), swept once a second.

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
	n.rooms = transfer.New(tc)
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
