package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/transport"
)

// read answers a Read with the pages' bytes inline: per key a Page frame,
// its bytes written straight from the store's view of the page (the arena
// for the host tier, a copy for the others) with one writev, while the
// store keeps the page pinned. A request the node refuses is answered with
// one Error frame. The error returned is the connection's: it cannot
// continue.
func (sc *shmConn) read(id uint64, m *frame.Read) error {
	n, err := sc.namespace(m.NS)
	if err == nil {
		err = sc.batch(len(m.Keys))
	}
	if err != nil {
		return sc.reply(id, shmError(err))
	}
	sc.armWrite()
	var (
		sent, bytes int
		ioErr       error
		start       = time.Now()
		page        frame.Page
	)
	err = sc.s.cfg.Store.Read(n.ID, m.Lease, m.Keys, func(i int, p store.PageView) error {
		page = frame.Page{Index: uint32(i), Found: p.Found}
		if p.Found {
			page.Checksum, page.Data = p.Checksum, p.Data
		}
		if ioErr = sc.c.SendFrames(transport.Frame{ID: id, Msg: &page}); ioErr != nil {
			return ioErr
		}
		sent++
		bytes += len(page.Data)
		return nil
	})
	switch {
	case ioErr != nil:
		return ioErr
	case err != nil && sent > 0:
		return fmt.Errorf("read failed after %d of %d pages: %w", sent, len(m.Keys), err)
	case err != nil:
		return sc.reply(id, shmError(err))
	}
	if bytes > 0 {
		sc.s.metrics.Transfer(n.ID, "out", bytes)
		sc.s.metrics.PageTime("out", time.Since(start))
	}
	return nil
}

// armWrite makes sure an answer's writing has at least half the write
// timeout left: the deadline is moved (a runtime timer update) only when
// less is left, not per Read.
func (sc *shmConn) armWrite() {
	d := sc.cfg.writeTimeout
	if d <= 0 {
		return
	}
	now := time.Now()
	if sc.writeBy.Sub(now) >= d/2 {
		return
	}
	sc.writeBy = now.Add(d)
	_ = sc.c.Net().SetWriteDeadline(sc.writeBy)
}

// write takes a one-way Write: its bytes go into the reservation through
// the store, which checks the reservation is open and the range leaves no
// gap. A write that fails is only logged: the reservation then lacks bytes
// and its commit answers INCOMPLETE (or EXPIRED), which the client sees.
func (sc *shmConn) write(m *frame.Write) {
	n, err := sc.namespace(m.NS)
	if err == nil {
		err = sc.s.cfg.Store.Write(n.ID, m.WriteID, int64(min(m.Offset, 1<<62)), m.Data)
	}
	if err != nil {
		if !errors.Is(err, store.ErrWriteExpired) {
			sc.s.log.Debug("raw: write refused", "write", m.WriteID, "err", err)
		}
		return
	}
	if len(m.Data) > 0 {
		sc.s.metrics.Transfer(n.ID, "in", len(m.Data))
	}
}

// put takes a one-frame Put: the page is reserved, written from the
// frame's bytes and committed at once, as a Reserve, Write and Commit
// would (the same checks: namespace, links, size, checksum). A page the
// store has, or refuses, is answered so with its bytes dropped.
func (sc *shmConn) put(m *frame.Put) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	p := m.Page
	if p.Size <= 0 {
		return nil, badRequest("put of an empty page")
	}
	spec := store.PageSpec{Key: p.Key, Parent: p.Parent, HasParent: p.HasParent, Depth: p.Depth, Size: p.Size,
		ChainDepth: p.ChainDepth}
	if err := checkLinks(spec); err != nil {
		return nil, err
	}
	st := sc.s.cfg.Store
	start := time.Now()
	res, err := st.Reserve(n.ID, []store.PageSpec{spec}, time.Duration(m.TTLms)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	r := res[0]
	resp := &frame.PutOK{Reserve: uint8(r.Status)}
	if r.Err != nil {
		resp.Reason = r.Err.Error()
	}
	if r.Status != store.Reserved {
		return resp, nil
	}
	if err := st.Write(n.ID, r.WriteID, 0, m.Data); err != nil {
		_, _ = st.Abort(n.ID, []uint64{r.WriteID})
		resp.Commit, resp.Reason = uint8(store.CommitAborted), err.Error()
		return resp, nil
	}
	cs, err := st.Commit(n.ID, r.WriteID, p.Size, m.Checksum)
	if err != nil {
		return nil, err
	}
	resp.Commit = uint8(cs)
	if cs != store.CommitCommitted {
		resp.Reason = cs.String()
		return resp, nil
	}
	sc.s.metrics.Transfer(n.ID, "in", int(p.Size))
	sc.s.metrics.PageTime("in", time.Since(start))
	return resp, nil
}

// lookup answers a Lookup as the gRPC Lookup does (hits recorded, the hit
// prefix leased when asked).
func (sc *shmConn) lookup(m *frame.Lookup) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err == nil {
		err = sc.batch(len(m.Keys))
	}
	if err != nil {
		return nil, err
	}
	res, err := sc.s.cfg.Store.Lookup(n.ID, m.Keys, m.Lease, time.Duration(m.LeaseTTLms)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	sc.s.recordHits(n.ID, res)
	resp := &frame.LookupOK{HitPrefix: uint32(res.HitPrefix), Present: res.Present}
	if l := res.Lease; l != nil {
		resp.LeaseID, resp.ExpiresMs, resp.LeasePages = l.ID, l.Expires.UnixMilli(), uint32(l.Pages)
	}
	return resp, nil
}
