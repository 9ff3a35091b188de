package membership

import (
	"fmt"
	"time"

	"github.com/hashicorp/memberlist"
)

// hooks are the callbacks memberlist makes: its Delegate (for this
// member's metadata) and EventDelegate (for changes to the others).
// memberlist calls the event hooks with its node lock held, so they only
// update the member map and signal subscribers.
type hooks struct{ m *Membership }

var (
	_ memberlist.Delegate         = hooks{}
	_ memberlist.EventDelegate    = hooks{}
	_ memberlist.ConflictDelegate = hooks{}
)

// NodeMeta encodes Config.Meta. If Summary makes it too large, it goes out
// without Summary; if it is too large even so, the last metadata that fit
// goes out again (with the new version and leaving flag). Either way
// metaErr records why, for UpdateMeta.
func (h hooks) NodeMeta(limit int) []byte {
	m := h.m
	w := wireMeta{Meta: m.cfg.Meta(), version: m.version.Add(1), leaving: m.leaving.Load()}
	b, err := encodeMeta(w)
	if err != nil && len(w.Summary) > 0 {
		m.log.Warn("metadata too large; sent without summary", "summary_bytes", len(w.Summary), "budget", SummaryBudget(w.Meta))
		w.Summary = nil
		b, _ = encodeMeta(w)
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	m.metaErr = err
	if b == nil {
		m.log.Error("metadata too large; advertising the previous metadata", "err", err)
		// The header has a fixed size, so the previous metadata with a new
		// header fits as it did before.
		// (There is none only if Config.Meta grew between Start's check
		// and its first call here: then an empty Meta goes out.)
		prev, _ := decodeMeta(m.cfg.NodeID, m.lastMeta)
		prev.version, prev.leaving = w.version, w.leaving
		b, _ = encodeMeta(prev)
		return b
	}
	if len(b) > limit {
		panic(fmt.Sprintf("membership: memberlist's metadata limit %d is below MaxMetaSize", limit))
	}
	m.lastMeta = b
	return b
}

// NotifyMsg takes the asks and answers of reports (report.go).
func (h hooks) NotifyMsg(b []byte) { h.m.handleReportMsg(b) }

// GetBroadcasts, LocalState and MergeRemoteState are unused: all that
// this package gossips travels in the node metadata.
func (hooks) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (hooks) LocalState(join bool) []byte                { return nil }
func (hooks) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin records a member that became alive (or was new).
func (h hooks) NotifyJoin(n *memberlist.Node) { h.m.noteAlive(n) }

// NotifyUpdate records a member's new metadata.
func (h hooks) NotifyUpdate(n *memberlist.Node) { h.m.noteAlive(n) }

// NotifyLeave records a member that died or left; memberlist reports both
// alike, and n.State is not set (hashicorp/memberlist#293), so the
// leaving flag in the member's last metadata tells them apart.
func (h hooks) NotifyLeave(n *memberlist.Node) { h.m.noteGone(n) }

// NotifyConflict hears of a member with this member's NodeID on another
// address: this member restarted on a new port while the others still hold
// its old self alive, and they reject it until they find the old self
// dead. So for as long as that can take (resyncWindow), the reconnect loop
// syncs with a live peer each tick; the first sync after the old self is
// declared dead gives the others the new address.
func (h hooks) NotifyConflict(existing, other *memberlist.Node) {
	m := h.m
	if existing.Name != m.cfg.NodeID {
		return // another member's conflict: its own to resolve
	}
	m.log.Warn("another address holds this member's name; will resync", "addr", other.Address())
	m.resyncUntil.Store(time.Now().Add(m.resyncWindow()).UnixNano())
}

// noteAlive records n as memberlist reports it alive, with its metadata.
// A member whose metadata says it is leaving is Left already: its leave
// message follows.
func (m *Membership) noteAlive(n *memberlist.Node) { m.note(n, true) }

// noteGone records n as Left if its last metadata said it was leaving (or
// it is Left already), otherwise as Dead.
func (m *Membership) noteGone(n *memberlist.Node) { m.note(n, false) }

// note records n as alive or gone. An alive note takes n's metadata; a
// gone one changes only the state of what was known.
func (m *Membership) note(n *memberlist.Node, alive bool) {
	w := m.decode(n)
	state := Dead
	if alive {
		state = Alive
	}
	if w.leaving {
		state = Left
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.members[n.Name]
	if e == nil {
		e = &entry{Member: memberOf(n, w, Alive)}
		m.members[n.Name] = e
	}
	if !alive && e.State == Left {
		state = Left
	}
	if e.State != state {
		e.changed = time.Now()
	}
	if alive {
		e.Member = memberOf(n, w, state)
	} else {
		e.State = state
	}
	m.signalLocked()
}

// memberOf is n as its metadata w describes it, in state.
func memberOf(n *memberlist.Node, w wireMeta, state State) Member {
	return Member{NodeID: n.Name, GRPCAddress: w.GRPCAddress, GossipAddress: n.Address(), State: state,
		Meta: w.Meta, Incarnation: w.version}
}

// decode decodes n's metadata; metadata this version can't read is logged
// and leaves the member with only its NodeID.
func (m *Membership) decode(n *memberlist.Node) wireMeta {
	w, err := decodeMeta(n.Name, n.Meta)
	if err != nil {
		m.log.Warn("undecodable member metadata", "member", n.Name, "bytes", len(n.Meta), "err", err)
		return wireMeta{Meta: Meta{NodeID: n.Name}}
	}
	return w
}
