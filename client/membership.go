package client

import "slices"

// Re-learning a node's data-plane addresses from the view.
//
// A client learns a node's raw tcp address from the node's OpenNamespace
// answer. A node that restarts comes back on a new raw port (a free one by
// default), and its new address reaches the client in the membership view
// (pb.Member.raw_address, gossiped in the node's metadata): when a view
// names, for a node the client has a raw session with, another address
// than the session's, the session is replaced (relearnRaw), so that the
// next call dials the new address at once instead of staying on gRPC. The
// shm plane needs nothing from the view: its socket is found by the node's
// gRPC port (transport.SocketLink) and the node ID, which survive a
// restart, and a broken session is started again within retryAfter.

// member returns the member of the view with id (zero when none).
func (v *clusterView) member(id string) Member {
	i, ok := slices.BinarySearchFunc(v.members, id, func(m Member, id string) int {
		switch {
		case m.ID < id:
			return -1
		case m.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return Member{}
	}
	return v.members[i]
}

// relearnRaw points the node's raw session at the address m advertises,
// when the client has a session with the node (it opened a namespace
// there) and the address moved.
func (c *nodeClient) relearnRaw(m Member) {
	if m.RawAddress == "" || c.rawOverride != "" || c.noRaw {
		return
	}
	s := c.raw.Load()
	if s == nil || s.nodeID != m.ID {
		return
	}
	if addr := rawAddr(m.RawAddress, c.addr); addr != "" && addr != s.addr {
		c.startRaw([]string{m.RawAddress}, m.ID)
	}
}
