package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
	"github.com/stratakv/strata/transport"
)

// shmConn serves one connection of the framed protocol: an shm connection
// (host set: the arena is shared) or a raw tcp one (host nil: page bytes
// travel inline, server/raw.go). Its goroutine owns every field.
type shmConn struct {
	s      *Server
	c      *transport.Conn
	host   *tiers.Host // the shared arena; nil on tcp
	cfg    connConfig
	caller caller
	// writes are the reservations this connection was given and has not
	// committed or aborted: aborted when it ends.
	writes map[uint64]shmWrite
	// writeBy is the write deadline set on the connection (raw_conn.go).
	writeBy time.Time
	// version is the protocol version the client said hello with.
	version uint16
}

// connConfig is what a listener tells its connections.
type connConfig struct {
	arenaID      uint64
	helloTimeout time.Duration
	// writeTimeout bounds writing one answer (the pages of a Read stay
	// pinned until it is written); 0: none.
	writeTimeout time.Duration
}

// shmWrite is an open reservation of a connection.
type shmWrite struct {
	ns    namespace.ID
	start time.Time // when the extent was handed out
	// mapped: the client writes the bytes into the arena itself, so they
	// are counted in at the commit; bytes in Write frames are counted as
	// they come (write).
	mapped bool
}

func (sc *shmConn) serve() {
	defer sc.cleanup()
	defer sc.c.Close()
	log := sc.s.log
	if err := sc.handshake(); err != nil {
		log.Info("shm: handshake refused", "err", err)
		return
	}
	for {
		id, m, err := sc.c.Recv()
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
			return
		case errors.Is(err, frame.ErrMalformed) && m == nil && id != 0:
			// The body did not decode but the stream is in step: answer.
			if sc.reply(id, shmError(badRequest("%v", err))) != nil {
				return
			}
			continue
		case err != nil:
			// A frame too large or a broken header: the stream is lost.
			_ = sc.c.Send(id, shmError(badRequest("%v", err)))
			log.Info("shm: closing connection", "err", err)
			return
		}
		if r, ok := m.(*frame.Read); ok {
			if err := sc.read(id, r); err != nil {
				log.Info("shm: closing connection", "err", err)
				return
			}
			continue
		}
		resp := sc.handle(m)
		if resp == nil {
			continue // one-way
		}
		if sc.reply(id, resp) != nil {
			return
		}
	}
}

func (sc *shmConn) reply(id uint64, m frame.Message) error { return sc.c.Send(id, m) }

// handshake checks the token (and, on the Unix socket, the peer's user),
// then sends the Welcome, with the arena's and generations' fds on the
// Unix socket.
func (sc *shmConn) handshake() error {
	if uc := sc.c.Unix(); uc != nil && sc.host != nil {
		if err := checkPeer(uc); err != nil {
			_ = sc.c.Send(0, &frame.Error{Code: frame.CodeDenied, Message: err.Error()})
			return err
		}
	}
	nc := sc.c.Net()
	_ = nc.SetDeadline(time.Now().Add(sc.cfg.helloTimeout))
	defer nc.SetDeadline(time.Time{})
	id, m, err := sc.c.Recv()
	if err != nil {
		return err
	}
	hello, ok := m.(*frame.Hello)
	if !ok {
		err := badRequest("first frame is op %d, not hello", m.Op())
		_ = sc.c.Send(id, shmError(err))
		return err
	}
	if hello.Version < frame.MinProtocolVersion || hello.Version > frame.ProtocolVersion {
		err := errorf(errVersion, "shm protocol %d: this node speaks %d to %d", hello.Version, frame.MinProtocolVersion, frame.ProtocolVersion)
		_ = sc.c.Send(id, shmError(err))
		return err
	}
	sc.version = hello.Version
	if sc.caller, err = sc.s.callerOfToken(hello.Token); err != nil {
		_ = sc.c.Send(id, shmError(err))
		return err
	}
	w := &frame.Welcome{Version: sc.version, NodeID: sc.s.cfg.NodeID, MaxBatch: uint32(sc.s.cfg.MaxBatch)}
	h := sc.host
	if h == nil {
		return sc.c.Send(id, w)
	}
	w.ArenaID, w.ArenaSize, w.GenWords = sc.cfg.arenaID, h.Size(), h.GenWords()
	return sc.c.SendFDs(id, w, h.FD(), h.GenFD())
}

// callerOfToken authenticates a bearer token as callerOf does for gRPC.
func (s *Server) callerOfToken(tok string) (caller, error) {
	if len(s.cfg.Tokens) == 0 && s.cfg.AdminTokenHash == "" {
		return caller{admin: true}, nil
	}
	if tok == "" {
		return caller{}, fmt.Errorf("no token: %w", errUnauthenticated)
	}
	h := HashToken(tok)
	if s.cfg.AdminTokenHash != "" && h == s.cfg.AdminTokenHash {
		return caller{admin: true}, nil
	}
	tenant, ok := s.cfg.Tokens[h]
	if !ok {
		return caller{}, errUnauthenticated
	}
	return caller{tenant: tenant}, nil
}

// cleanup aborts the reservations left.
func (sc *shmConn) cleanup() {
	st := sc.s.cfg.Store
	for wid, w := range sc.writes {
		_, _ = st.Abort(w.ns, []uint64{wid})
	}
}

func (sc *shmConn) handle(m frame.Message) frame.Message {
	var (
		resp frame.Message
		err  error
	)
	switch m := m.(type) {
	case *frame.Get:
		resp, err = sc.get(m)
	case *frame.Write:
		sc.write(m)
		return nil
	case *frame.Reserve:
		resp, err = sc.reserve(m)
	case *frame.Commit:
		resp, err = sc.commit(m)
	case *frame.Abort:
		resp, err = sc.abort(m)
	case *frame.Put:
		if sc.version < 3 {
			err = badRequest("put needs protocol 3, the connection said hello with %d", sc.version)
			break
		}
		resp, err = sc.put(m)
	case *frame.Lookup:
		if sc.version < 3 {
			err = badRequest("lookup needs protocol 3, the connection said hello with %d", sc.version)
			break
		}
		resp, err = sc.lookup(m)
	case *frame.Served:
		if n, err := sc.namespace(m.NS); err == nil && m.Bytes > 0 {
			sc.s.metrics.Transfer(n.ID, "out", int(m.Bytes))
		}
		return nil
	default:
		err = badRequest("op %d is not a request", m.Op())
	}
	if err != nil {
		return shmError(err)
	}
	return resp
}

// namespace resolves a request's namespace for the connection's caller.
func (sc *shmConn) namespace(id namespace.ID) (store.Namespace, error) {
	s := sc.s
	n, ok := s.cfg.Store.Namespace(id)
	if !ok {
		if n, ok = s.adopt(context.Background(), id); !ok {
			return store.Namespace{}, errorf(store.ErrNamespaceNotFound, "namespace %s is not registered (open it first)", id.Short())
		}
	}
	return n, sc.caller.mayUse(n.Tenant)
}

func (sc *shmConn) batch(n int) error {
	if n == 0 {
		return badRequest("empty batch")
	}
	if n > sc.s.cfg.MaxBatch {
		return errorf(errBatchTooLarge, "%d items, the limit is %d", n, sc.s.cfg.MaxBatch)
	}
	return nil
}

func (sc *shmConn) get(m *frame.Get) (frame.Message, error) {
	if sc.host == nil {
		return nil, badRequest("get locates pages in a shared arena; over tcp, read")
	}
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	if err := sc.batch(len(m.Keys)); err != nil {
		return nil, err
	}
	h, start := sc.host, time.Now()
	pages, err := sc.s.cfg.Store.Extents(n.ID, m.Lease, m.Keys, h)
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
	if bytes > 0 {
		sc.s.metrics.Transfer(n.ID, "out", bytes)
		sc.s.metrics.PageTime("out", time.Since(start)) // locating, not copying: the client copies
	}
	return resp, nil
}

func (sc *shmConn) reserve(m *frame.Reserve) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	if err := sc.batch(len(m.Pages)); err != nil {
		return nil, err
	}
	specs := make([]store.PageSpec, len(m.Pages))
	for i, p := range m.Pages {
		if p.Size <= 0 || p.Size > 1<<40 {
			return nil, badRequest("page %d: size %d", i, p.Size)
		}
		specs[i] = store.PageSpec{Key: p.Key, Parent: p.Parent, HasParent: p.HasParent, Depth: p.Depth, Size: p.Size,
			ChainDepth: p.ChainDepth}
		if err := checkLinks(specs[i]); err != nil {
			return nil, err
		}
	}
	st := sc.s.cfg.Store
	res, err := st.Reserve(n.ID, specs, time.Duration(m.TTLms)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	h := sc.host
	resp := &frame.ReserveOK{Slots: make([]frame.Slot, len(res))}
	for i, r := range res {
		slot := &resp.Slots[i]
		slot.Status = uint8(r.Status)
		if r.Err != nil {
			slot.Reason = r.Err.Error()
		}
		if r.Status != store.Reserved {
			continue
		}
		slot.WriteID, slot.DeadlineMs = r.WriteID, r.Deadline.UnixMilli()
		sc.writes[r.WriteID] = shmWrite{ns: n.ID, start: time.Now()}
		if h == nil {
			continue // tcp: the bytes come in Write frames
		}
		ext, mapped, err := st.DirectWrite(n.ID, r.WriteID, h)
		if err != nil {
			slot.Status, slot.Reason = uint8(store.Rejected), err.Error()
			delete(sc.writes, r.WriteID)
			_, _ = st.Abort(n.ID, []uint64{r.WriteID})
			continue
		}
		if idx := h.GenIndex(ext); mapped && idx >= 0 {
			slot.Mapped = true
			sc.writes[r.WriteID] = shmWrite{ns: n.ID, start: time.Now(), mapped: true}
			slot.Ext = frame.Extent{Off: ext.Off, Len: ext.Len, Gen: ext.Gen, GenIndex: idx}
		}
	}
	return resp, nil
}

func (sc *shmConn) commit(m *frame.Commit) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	if err := sc.batch(len(m.Items)); err != nil {
		return nil, err
	}
	resp := &frame.CommitOK{Statuses: make([]uint8, len(m.Items))}
	var bytes int
	for i, it := range m.Items {
		st, err := sc.s.cfg.Store.Commit(n.ID, it.WriteID, it.Size, it.Checksum)
		if err != nil {
			return nil, err
		}
		w, mine := sc.writes[it.WriteID]
		delete(sc.writes, it.WriteID)
		resp.Statuses[i] = uint8(st)
		if st == store.CommitCommitted && mine {
			if w.mapped {
				bytes += int(it.Size)
			}
			sc.s.metrics.PageTime("in", time.Since(w.start)) // reservation to verified commit
		}
	}
	if bytes > 0 {
		sc.s.metrics.Transfer(n.ID, "in", bytes)
	}
	return resp, nil
}

func (sc *shmConn) abort(m *frame.Abort) (frame.Message, error) {
	n, err := sc.namespace(m.NS)
	if err != nil {
		return nil, err
	}
	if err := sc.batch(len(m.WriteIDs)); err != nil {
		return nil, err
	}
	k, err := sc.s.cfg.Store.Abort(n.ID, m.WriteIDs)
	if err != nil {
		return nil, err
	}
	for _, wid := range m.WriteIDs {
		delete(sc.writes, wid)
	}
	return &frame.AbortOK{Aborted: uint32(k)}, nil
}

// shmCodes maps errors to shm error codes, like mapping does to gRPC's.
var shmCodes = []struct {
	err  error
	code frame.Code
}{
	{errBadRequest, frame.CodeBadRequest},
	{namespace.ErrInvalid, frame.CodeBadRequest},
	{namespace.ErrBadID, frame.CodeBadRequest},
	{namespace.ErrBadKey, frame.CodeBadRequest},
	{store.ErrBadSize, frame.CodeBadRequest},
	{errBatchTooLarge, frame.CodeBatchTooLarge},
	{store.ErrNamespaceNotFound, frame.CodeNamespaceNotFound},
	{errDenied, frame.CodeDenied},
	{errUnauthenticated, frame.CodeUnauthenticated},
	{errVersion, frame.CodeVersion},
	{store.ErrLeaseExpired, frame.CodeLeaseExpired},
	{store.ErrLeaseNotFound, frame.CodeLeaseNotFound},
	{store.ErrLeaseLimit, frame.CodeLeaseLimit},
	{store.ErrNoSpace, frame.CodeNoSpace},
	{store.ErrUnknownWrite, frame.CodeWriteUnknown},
	{store.ErrWriteExpired, frame.CodeWriteExpired},
	{store.ErrWriteClosed, frame.CodeWriteClosed},
	{store.ErrClosed, frame.CodeShuttingDown},
}

func shmError(err error) *frame.Error {
	for _, m := range shmCodes {
		if errors.Is(err, m.err) {
			return &frame.Error{Code: m.code, Message: err.Error()}
		}
	}
	return &frame.Error{Code: frame.CodeInternal, Message: err.Error()}
}
