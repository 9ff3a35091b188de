package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/transport"
)

// The frame handlers: each decodes nothing more (the frame codec did),
// calls the request layer (requests.go) and encodes the answer. What is
// frame-only stays here: page bytes written straight from the store's
// pinned view (Read), the shared arena's extents (Get, Reserve over shm)
// and the reservations a connection holds.

// read answers a Read with the pages' bytes inline: per key a Page frame,
// its bytes written straight from the store's view of the page (the arena
// for the host tier, a copy for the others) with one writev, while the
// store keeps the page pinned. A request the node refuses is answered with
// one Error frame. The error returned is the connection's: it cannot
// continue.
func (sc *frameConn) read(id uint64, m *frame.Read) error {
	n, err := sc.batch(m.NS, len(m.Keys), "keys")
	if err != nil {
		return sc.reply(id, frameError(err))
	}
	sc.armWrite()
	var (
		sent  int
		ioErr error
		page  frame.Page
	)
	err = sc.s.read(n, m.Lease, m.Keys, func(i int, p store.PageView) error {
		page = frame.Page{Index: uint32(i), Found: p.Found}
		if p.Found {
			page.Checksum, page.Data = p.Checksum, p.Data
		}
		if ioErr = sc.c.SendFrames(transport.Frame{ID: id, Msg: &page}); ioErr != nil {
			return ioErr
		}
		sent++
		return nil
	})
	switch {
	case ioErr != nil:
		return ioErr
	case err != nil && sent > 0:
		return fmt.Errorf("read failed after %d of %d pages: %w", sent, len(m.Keys), err)
	case err != nil:
		return sc.reply(id, frameError(err))
	}
	return nil
}

// armWrite makes sure an answer's writing has at least half the write
// timeout left: the deadline is moved (a runtime timer update) only when
// less is left, not per Read.
func (sc *frameConn) armWrite() { arm(sc.cfg.writeTimeout, &sc.writeBy, sc.c.Net().SetWriteDeadline) }

// write takes a one-way Write: its bytes go into the reservation, which
// must be one of this connection's (mine), through the store, which checks
// the reservation is open and the range leaves no gap. Bytes RecvBulk left
// in the connection are read straight into the reservation's memory
// (store.WriteInPlace); bytes of a refused write are dropped by the serve
// loop. A write that fails is only logged: the reservation then lacks
// bytes and its commit answers INCOMPLETE (or EXPIRED), which the client
// sees.
func (sc *frameConn) write(m *frame.Write) {
	n, err := sc.namespace(m.NS)
	switch {
	case err != nil:
	case !sc.mine(n, m.WriteID):
		err = fmt.Errorf("write %d: not a reservation of this connection: %w", m.WriteID, store.ErrUnknownWrite)
	case m.Data == nil && sc.c.Bulk() > 0:
		err = sc.s.writeInPlace(n, m.WriteID, int64(min(m.Offset, 1<<62)), sc.c.Bulk(), func(dst []byte) error {
			if err := sc.c.ReadBulk(dst); err != nil {
				sc.broken = err // the stream is out of step: the connection closes
				return err
			}
			return nil
		})
	default:
		err = sc.s.write(n, m.WriteID, int64(min(m.Offset, 1<<62)), m.Data)
	}
	if err != nil && !errors.Is(err, store.ErrWriteExpired) {
		sc.s.log.Debug("frame: write refused", "plane", sc.cfg.plane, "write", m.WriteID, "err", err)
	}
}

// put takes a one-frame Put: the page is published by the request layer's
// one-call put (store.PutInPlace), its bytes read from the connection
// straight into the reservation (RecvBulk left them there). A page the
// store has, or refuses, is answered so with its bytes dropped (the serve
// loop skips them).
func (sc *frameConn) put(m *frame.Put) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	res, err := sc.s.putInPlace(n, frameSpec(m.Page), m.Checksum, time.Duration(m.TTLms)*time.Millisecond,
		func(dst []byte) error {
			if m.Data != nil {
				copy(dst, m.Data)
				return nil
			}
			if err := sc.c.ReadBulk(dst); err != nil {
				sc.broken = err // the stream is out of step: no answer, the connection closes
				return err
			}
			return nil
		})
	if err != nil && res.Reserve == 0 {
		return nil, err
	}
	resp := putOK(res)
	return &resp, nil
}

// putOK is a one-call put's outcome as PutOK (and a SlotPutOK's result)
// carries it.
func putOK(res store.PutResult) frame.PutOK {
	resp := frame.PutOK{Reserve: reserveFrame(res.Reserve)}
	if res.Reserve == store.Reserved {
		resp.Commit = commitFrame(res.Commit)
		if res.Commit != store.CommitCommitted {
			resp.Reason = res.Commit.String()
		}
	}
	if res.Err != nil {
		resp.Reason = res.Err.Error()
	}
	return resp
}

// lookup answers a Lookup as the gRPC Lookup does.
func (sc *frameConn) lookup(m *frame.Lookup) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	res, err := sc.s.lookup(n, m.Keys, m.Lease, time.Duration(m.LeaseTTLms)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	resp := &frame.LookupOK{HitPrefix: uint32(res.HitPrefix), Present: res.Present}
	if l := res.Lease; l != nil {
		resp.LeaseID, resp.ExpiresMs, resp.LeasePages = l.ID, l.Expires.UnixMilli(), uint32(l.Pages)
	}
	return resp, nil
}

// get locates pages in the shared arena; the client copies them.
func (sc *frameConn) get(m *frame.Get) (frame.Message, error) {
	if sc.host == nil {
		return nil, badRequest("get locates pages in a shared arena; over tcp, read")
	}
	n, err := sc.batch(m.NS, len(m.Keys), "keys")
	if err != nil {
		return nil, err
	}
	h, start := sc.host, time.Now()
	pages, err := sc.s.locate(n, m.Lease, m.Keys, h)
	if err != nil {
		return nil, err
	}
	resp := &frame.GetOK{Pages: make([]frame.PageLoc, len(pages))}
	var bytes int
	for i, p := range pages {
		switch {
		case !p.Found:
		case p.Mapped:
			if idx := h.GenIndex(p.Ext); idx >= 0 {
				resp.Pages[i] = frame.PageLoc{Status: frame.PageMapped, Checksum: p.Checksum,
					Ext: frame.Extent{Off: p.Ext.Off, Len: p.Ext.Len, Gen: p.Ext.Gen, GenIndex: idx}}
				bytes += int(p.Ext.Len)
				break
			}
			fallthrough
		default:
			resp.Pages[i] = frame.PageLoc{Status: frame.PageElse, Checksum: p.Checksum}
		}
	}
	sc.s.located(n, bytes, start)
	return resp, nil
}

// reserve reserves pages; over shm it hands out each reservation's extent
// in the arena, for the client to write into.
func (sc *frameConn) reserve(m *frame.Reserve) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	specs := make([]store.PageSpec, len(m.Pages))
	for i, p := range m.Pages {
		specs[i] = frameSpec(p)
	}
	res, err := sc.s.reserve(n, specs, time.Duration(m.TTLms)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	h := sc.host
	resp := &frame.ReserveOK{Slots: make([]frame.Slot, len(res))}
	for i, r := range res {
		slot := &resp.Slots[i]
		slot.Status = reserveFrame(r.Status)
		if r.Err != nil {
			slot.Reason = r.Err.Error()
		}
		if r.Status != store.Reserved {
			continue
		}
		slot.WriteID, slot.DeadlineMs = r.WriteID, r.Deadline.UnixMilli()
		sc.writes[r.WriteID] = heldWrite{ns: n.ID, start: time.Now()}
		if h == nil {
			continue // tcp: the bytes come in Write frames
		}
		ext, mapped, err := sc.s.directWrite(n, r.WriteID, h) // aborted on error
		if err != nil {
			slot.Status, slot.Reason = reserveFrame(store.Rejected), err.Error()
			delete(sc.writes, r.WriteID)
			continue
		}
		if idx := h.GenIndex(ext); mapped && idx >= 0 {
			slot.Mapped = true
			sc.writes[r.WriteID] = heldWrite{ns: n.ID, start: time.Now(), mapped: true}
			slot.Ext = frame.Extent{Off: ext.Off, Len: ext.Len, Gen: ext.Gen, GenIndex: idx}
		}
	}
	return resp, nil
}

// commit commits reservations; the bytes a client wrote into the arena
// itself are counted in here. A connection commits only the reservations
// it made and has not committed or aborted (mine): any other write id is
// only answered its remembered outcome (store.Outcome), so a repeated
// commit, from this connection or another of the namespace, answers the
// first outcome, as over gRPC, while a client cannot publish, nor spoil,
// another connection's open reservation even when it learns its write id:
// that one answers UNKNOWN_WRITE (SPEC.md §2, Commit, Repeated commits).
func (sc *frameConn) commit(m *frame.Commit) (frame.Message, error) {
	n, err := sc.batch(m.NS, len(m.Items), "items")
	if err != nil {
		return nil, err
	}
	// Each reservation is taken off the connection's list as its item is
	// read, so a write id repeated in the batch is a repeat at its second
	// item, answered the first's outcome (items are committed in order).
	items := make([]commitItem, len(m.Items))
	taken := make([]heldWrite, len(m.Items))
	for i, it := range m.Items {
		items[i] = commitItem{writeID: it.WriteID, size: it.Size, sum: it.Checksum, repeat: !sc.mine(n, it.WriteID)}
		if !items[i].repeat {
			taken[i] = sc.writes[it.WriteID]
			delete(sc.writes, it.WriteID)
		}
	}
	sts, err := sc.s.commit(n, items)
	if err != nil {
		for i, it := range items {
			if !it.repeat {
				sc.writes[it.writeID] = taken[i] // still open: aborted when the connection ends
			}
		}
		return nil, err
	}
	resp := &frame.CommitOK{Statuses: make([]uint8, len(m.Items))}
	var bytes int
	for i, st := range sts {
		resp.Statuses[i] = commitFrame(st)
		if st == store.CommitCommitted && !items[i].repeat {
			if taken[i].mapped {
				bytes += int(items[i].size)
			}
			sc.s.published(taken[i].start)
		}
	}
	sc.s.received(n, bytes)
	return resp, nil
}

// mine reports whether writeID is a reservation of namespace n this
// connection made and has not committed or aborted (a granted slot is
// not: only a SlotPut names it).
func (sc *frameConn) mine(n store.Namespace, writeID uint64) bool {
	w, ok := sc.writes[writeID]
	return ok && w.ns == n.ID && !w.slot
}

// held reports whether writeID is a reservation or a granted slot of
// namespace n this connection holds.
func (sc *frameConn) held(n store.Namespace, writeID uint64) bool {
	w, ok := sc.writes[writeID]
	return ok && w.ns == n.ID
}

// drop forgets writeID, which the connection held.
func (sc *frameConn) drop(writeID uint64) {
	if sc.writes[writeID].slot {
		sc.slots--
	}
	delete(sc.writes, writeID)
}

// abort drops reservations; an empty batch is malformed here (SPEC.md
// §6), where gRPC's Abort answers it with 0.
func (sc *frameConn) abort(m *frame.Abort) (frame.Message, error) {
	n, err := sc.batch(m.NS, len(m.WriteIDs), "write ids")
	if err != nil {
		return nil, err
	}
	// Only the connection's own reservations and slots are aborted (as
	// committed).
	own := make([]uint64, 0, len(m.WriteIDs))
	for _, wid := range m.WriteIDs {
		if sc.held(n, wid) {
			own = append(own, wid)
		}
	}
	k := 0
	if len(own) > 0 {
		if k, err = sc.s.abort(n, own); err != nil {
			return nil, err
		}
	}
	for _, wid := range own {
		sc.drop(wid)
	}
	return &frame.AbortOK{Aborted: uint32(k)}, nil
}
