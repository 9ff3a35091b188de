package server

import (
	"time"

	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/store"
)

// Puts into granted slots (SPEC.md §5b): the node grants an shm connection
// arena slots ahead of its puts, so a put is the client's copy into a slot
// and one SlotPut, whose answer grants the slots that replace those used.
// The connection keeps its slots with its reservations (writes, slot set):
// only a SlotPut of the same connection and namespace may name one, and
// those left are aborted when the connection ends, as its reservations are.

// maxSlotBytes bounds the slots one connection holds (at least one slot).
const maxSlotBytes = 64 << 20

// slotPut publishes the pages of a SlotPut, each in the slot it names,
// then grants the slots asked for. A request refused as a whole (its
// namespace, a malformed page spec, a batch too large) is refused before
// any page is handled, so its slots stay the connection's.
func (sc *frameConn) slotPut(m *frame.SlotPut) (frame.Message, error) {
	if sc.host == nil {
		return nil, badRequest("a slot put writes into the shared arena; over tcp, put")
	}
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	if len(m.Pages) == 0 && m.Want == 0 {
		return nil, badRequest("a slot put of no pages that asks for no slots")
	}
	if err := sc.s.checkLimit(len(m.Pages), "pages"); err != nil {
		return nil, err
	}
	if err := sc.s.checkLimit(int(m.Want), "slots"); err != nil {
		return nil, err
	}
	specs := make([]store.PageSpec, len(m.Pages))
	for i, p := range m.Pages {
		specs[i] = frameSpec(p.Page)
		if err := checkSpec(specs[i]); err != nil {
			return nil, badRequest("page %d: %v", i, err)
		}
	}
	resp := &frame.SlotPutOK{Results: make([]frame.PutOK, len(m.Pages))}
	bytes := 0
	for i, p := range m.Pages {
		w, ok := sc.writes[p.WriteID]
		if !ok || !w.slot || w.ns != n.ID {
			// Not an unused slot of this connection. A slot used already
			// is no repeated commit (this page may be another than the
			// one it published), so its outcome is not answered here: a
			// Commit of its write id answers it (SPEC.md §2, Repeated
			// commits).
			resp.Results[i] = putOK(store.PutResult{Reserve: store.Reserved, Commit: store.CommitUnknownWrite})
			continue
		}
		res, err := sc.s.putGranted(n, p.WriteID, specs[i], p.Checksum, w.start)
		if err != nil {
			// The namespace went away (or the store closed) mid-request:
			// the slots are the store's no more, and the pages are not
			// published.
			sc.s.received(n, bytes)
			return nil, err
		}
		if res.Reserve != store.Exists {
			sc.drop(p.WriteID)
		}
		if res.Committed() {
			bytes += int(specs[i].Size)
		}
		resp.Results[i] = putOK(res)
	}
	sc.s.received(n, bytes)
	resp.Slots = sc.grant(n, int(m.Want))
	return resp, nil
}

// grant grants the connection up to want slots of namespace n, as many as
// its bound (maxSlotBytes) leaves room for: fewer, or none, when the arena
// is full or the tenant at its quota, which is no error to the request.
func (sc *frameConn) grant(n store.Namespace, want int) []frame.Grant {
	limit := max(1, maxSlotBytes/max(1, int(n.PageBytes)))
	if want > 0 && sc.slots+want > limit {
		sc.pruneSlots()
	}
	want = min(want, limit-sc.slots)
	if want <= 0 {
		return []frame.Grant{}
	}
	gs, err := sc.s.grant(n, want, sc.host)
	if err != nil {
		sc.s.log.Debug("shm: granted fewer slots than asked", "want", want, "granted", len(gs), "err", err)
	}
	out := make([]frame.Grant, 0, len(gs))
	now := time.Now()
	for _, g := range gs {
		idx := sc.host.GenIndex(g.Ext)
		if idx < 0 {
			sc.s.abandon(n.ID, g.WriteID)
			continue
		}
		sc.writes[g.WriteID] = heldWrite{ns: n.ID, start: now, mapped: true, slot: true, deadline: g.Deadline}
		sc.slots++
		out = append(out, frame.Grant{WriteID: g.WriteID, DeadlineMs: g.Deadline.UnixMilli(),
			Ext: frame.Extent{Off: g.Ext.Off, Len: g.Ext.Len, Gen: g.Ext.Gen, GenIndex: idx}})
	}
	return out
}

// pruneSlots forgets the connection's slots past their deadline, which the
// store's janitor takes back: a client that let them lapse is not held at
// its bound by slots it can no longer use.
func (sc *frameConn) pruneSlots() {
	now := time.Now()
	for wid, w := range sc.writes {
		if w.slot && now.After(w.deadline) {
			sc.s.abandon(w.ns, wid)
			sc.drop(wid)
		}
	}
}
