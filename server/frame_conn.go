package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
	"github.com/stratakv/strata/transport"
)

// frameConn serves one connection of the frame protocol, on either plane
// that speaks it: an shm connection (host set: the arena is shared,
// shm.go) or a raw tcp one (host nil: page bytes travel inline, raw.go).
// Its goroutine owns every field. It reads frames, hands each request to
// its handler (frame_ops.go, frame_slots.go), which calls the request
// layer (requests.go), and answers.
type frameConn struct {
	s      *Server
	c      *transport.Conn
	host   *tiers.Host // the shared arena; nil on tcp
	cfg    connConfig
	caller caller
	// tokenHash is the hello's token, hashed: a token revoked since
	// (SetTokens) fails the connection's next request.
	tokenHash string
	// writes are the reservations and granted slots this connection was
	// given and has not committed, used or aborted: aborted when it ends.
	writes map[uint64]heldWrite
	// slots counts the granted slots among writes.
	slots int
	// broken is why a request's bytes could not be read off the
	// connection (a Put whose data stopped coming: the idle timeout, or
	// the peer gone): the connection is closed without an answer.
	broken error
	// writeBy and readBy are the write and read deadlines set on the
	// connection (armWrite, armRead).
	writeBy, readBy time.Time
	// version is the protocol version the client said hello with.
	version uint16
}

// connConfig is what a listener tells its connections.
type connConfig struct {
	// plane names the listener in logs: "shm" or "raw".
	plane        string
	arenaID      uint64
	helloTimeout time.Duration
	// writeTimeout bounds writing one answer (the page being sent stays
	// pinned until it is written); 0: none.
	writeTimeout time.Duration
	// shmTenants may map the arena besides the admin (ShmConfig.Tenants).
	shmTenants []string
	// idleTimeout closes a connection that sends no request for that long
	// (between half of it and all of it: armRead); 0: never.
	idleTimeout time.Duration
}

// heldWrite is a reservation or granted slot a connection holds open.
type heldWrite struct {
	ns    namespace.ID
	start time.Time // when the extent was handed out
	// mapped: the client writes the bytes into the arena itself, so they
	// are counted in at the commit; bytes in Write frames are counted as
	// they come (write).
	mapped bool
	// slot: a granted slot (frame_slots.go), which only a SlotPut names,
	// until deadline.
	slot     bool
	deadline time.Time
}

func (sc *frameConn) serve() {
	defer sc.cleanup()
	defer sc.c.Close()
	defer sc.c.Flush() // the answers queued before a request that ends the connection
	log := sc.s.log.With("plane", sc.cfg.plane)
	if err := sc.handshake(); err != nil {
		log.Info("frame: handshake refused", "err", err)
		return
	}
	for {
		// A Put's data (RecvBulk) that its handler did not read, because
		// it refused the page, is dropped before the next frame.
		if err := sc.c.SkipBulk(); err != nil {
			log.Info("frame: closing connection", "err", err)
			return
		}
		// Answers queued (reply) go out when this read finds nothing to
		// read (transport, "Answers queued behind the next request").
		sc.armRead()
		id, m, err := sc.c.RecvBulk()
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			log.Debug("frame: closing an idle connection", "idle", sc.cfg.idleTimeout)
			return
		case errors.Is(err, frame.ErrMalformed) && m == nil && id != 0:
			// The body did not decode but the stream is in step: answer.
			if sc.reply(id, frameError(badRequest("%v", err))) != nil {
				return
			}
			continue
		case err != nil:
			// A frame too large or a broken header: the stream is lost.
			_ = sc.c.Send(id, frameError(badRequest("%v", err)))
			log.Info("frame: closing connection", "err", err)
			return
		}
		if r, ok := m.(*frame.Read); ok {
			if err := sc.read(id, r); err != nil {
				log.Info("frame: closing connection", "err", err)
				return
			}
			continue
		}
		resp := sc.handle(m)
		if sc.broken != nil {
			log.Info("frame: closing connection", "err", sc.broken)
			return
		}
		if resp == nil {
			continue // one-way
		}
		if sc.reply(id, resp) != nil {
			return
		}
	}
}

func (sc *frameConn) reply(id uint64, m frame.Message) error {
	sc.armWrite() // a Read answer's deadline may have passed since: every answer gets its own
	return sc.c.Queue(id, m)
}

// armRead gives the next request at most the idle timeout to come: the
// read deadline is moved (a runtime timer update) only when less than half
// of it is left, not per request, so a connection idle for between half
// the timeout and all of it is closed.
func (sc *frameConn) armRead() { arm(sc.cfg.idleTimeout, &sc.readBy, sc.c.Net().SetReadDeadline) }

// arm moves a deadline *by to d from now, through set, when less than
// half of d is left (d 0: no deadline).
func arm(d time.Duration, by *time.Time, set func(time.Time) error) {
	if d <= 0 {
		return
	}
	now := time.Now()
	if by.Sub(now) >= d/2 {
		return
	}
	*by = now.Add(d)
	_ = set(*by)
}

// handshake checks the token (and, on the Unix socket, the peer's user),
// then sends the Welcome, with the arena's and generations' fds on the
// Unix socket.
func (sc *frameConn) handshake() error {
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
		_ = sc.c.Send(id, frameError(err))
		return err
	}
	if hello.Version < frame.MinProtocolVersion || hello.Version > frame.ProtocolVersion {
		err := errorf(errVersion, "shm protocol %d: this node speaks %d to %d", hello.Version, frame.MinProtocolVersion, frame.ProtocolVersion)
		_ = sc.c.Send(id, frameError(err))
		return err
	}
	sc.version = hello.Version
	sc.c.SetVersion(sc.version) // Reserve, Put and SlotPut are read as sc.version lays them out
	if hello.Token != "" {
		sc.tokenHash = HashToken(hello.Token)
	}
	if sc.caller, err = sc.s.authenticate(hello.Token); err != nil {
		_ = sc.c.Send(id, frameError(err))
		return err
	}
	w := &frame.Welcome{Version: sc.version, NodeID: sc.s.cfg.NodeID, MaxBatch: uint32(sc.s.cfg.MaxBatch)}
	h := sc.host
	if h == nil {
		return sc.c.Send(id, w)
	}
	if !sc.caller.admin && !slices.Contains(sc.cfg.shmTenants, sc.caller.tenant) {
		err := fmt.Errorf("tenant %q may not map the host arena, which holds other tenants' pages (not in the node's shm tenants); use the raw plane: %w",
			sc.caller.tenant, errDenied)
		_ = sc.c.Send(id, frameError(err))
		return err
	}
	w.ArenaID, w.ArenaSize, w.GenWords = sc.cfg.arenaID, h.Size(), h.GenWords()
	return sc.c.SendFDs(id, w, h.FD(), h.GenFD())
}

// cleanup aborts the reservations left.
func (sc *frameConn) cleanup() {
	for wid, w := range sc.writes {
		sc.s.abandon(w.ns, wid)
	}
}

func (sc *frameConn) handle(m frame.Message) frame.Message {
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
		if err = sc.needs(3, "put"); err == nil {
			resp, err = sc.put(m)
		}
	case *frame.SlotPut:
		if err = sc.needs(4, "slot put"); err == nil {
			resp, err = sc.slotPut(m)
		}
	case *frame.Lookup:
		if err = sc.needs(3, "lookup"); err == nil {
			resp, err = sc.lookup(m)
		}
	case *frame.Served:
		if n, err := sc.namespace(m.NS); err == nil {
			sc.s.served(n, int(min(m.Bytes, 1<<40)))
		}
		return nil
	default:
		err = badRequest("op %d is not a request", m.Op())
	}
	if err != nil {
		return frameError(err)
	}
	return resp
}

// namespace resolves a request's namespace for the connection's caller.
func (sc *frameConn) namespace(id namespace.ID) (store.Namespace, error) {
	if err := sc.s.stillValid(sc.caller, sc.tokenHash); err != nil {
		return store.Namespace{}, err
	}
	return sc.s.resolve(context.Background(), sc.caller, id)
}

// batch is namespace for a request of count what (keys, items, write ids),
// refusing an empty batch or one over Config.MaxBatch.
func (sc *frameConn) batch(id namespace.ID, count int, what string) (store.Namespace, error) {
	n, err := sc.namespace(id)
	if err == nil {
		err = sc.s.checkBatch(count, what)
	}
	return n, err
}

// needs refuses a request of what on a connection that said hello with a
// protocol older than v, the first version that has it.
func (sc *frameConn) needs(v uint16, what string) error {
	if sc.version < v {
		return badRequest("%s needs protocol %d, the connection said hello with %d", what, v, sc.version)
	}
	return nil
}
