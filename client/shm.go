package client

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// Same-host shared memory (docs/design.md §7.1; proto/frame/SPEC.md has the protocol,
// package transport the mapping).
//
// Finding the node's socket. Options.ShmSocket names it; when it is empty
// and the node's address is a loopback or local address, the client tries
// the link a node makes by convention for its gRPC port, transport.SocketLink
// (<temp dir>/strata-<uid>/<port>.sock). The session starts at the first
// Open (it needs the node id Open reports): the Welcome must name the same
// node, else the socket belongs to another node and is not used. Any
// failure (no socket, refused token, another user's node, another node)
// leaves the client on tcp silently; Options.NoShm keeps it there.
//
// A session is the mapped arena plus a pool of control connections (each
// carries one request at a time). A connection that fails marks the session
// broken: calls in flight fall back to tcp, the session is closed once
// they are done (the arena is unmapped only when nobody copies from it),
// and a later Open may start a new one (at most every retryAfter).
//
// A Get is one round trip: the node answers where each page lies (checking
// the caller's lease, if any, is live); the client copies each mapped page
// and then re-checks its generation word, so a page reclaimed meanwhile
// (not under the caller's lease) is a miss, never wrong bytes. A Put is
// memcpy and checksum in one pass into arena slots the node granted the
// connection ahead → one SlotPut (the node verifies, publishes and grants
// new slots) on a node of protocol 4 (shm_slots.go); else, or short of
// slots, reserve (extents in the arena) → memcpy and checksum → commit,
// its commits pipelined behind the copies (shm_put.go).

const (
	// shmMinDeadline is the least time left on a reservation for an
	// in-place write: past its deadline the extent can be reused.
	shmMinDeadline = time.Second
	// peekEvery is how often at most a call that asks the node nothing
	// (a get from the location cache) looks whether the node is gone (pin).
	peekEvery = time.Millisecond
)

// shmSession is a mapped arena and its control connections.
type shmSession struct {
	path    string
	token   string
	nodeID  string
	arenaID uint64
	// version is the protocol version the node welcomed the session with
	// (helloVersions): 4 and up, puts go into granted slots (shm_slots.go).
	version atomic.Uint32
	shm     *transport.Shm
	ids     atomic.Uint64
	broken  atomic.Bool
	lookups atomic.Int64 // lookups answered through the session
	// slotPuts counts the put batches that went into granted slots.
	slotPuts atomic.Int64
	// peeked is when (unix ns) pin last looked whether the node is gone.
	peeked atomic.Int64

	// use is read-held while a call uses the mapping; close write-locks it.
	use sync.RWMutex

	locs   locCache // where pages were last seen (shm_cache.go)
	served sync.Map // namespace.ID → *served: cache reads to report

	// slots are the slots the node granted each connection, by namespace
	// (shm_slots.go); slotsShort is until when (unix ns) puts do not ask
	// for slots, after the node granted fewer than asked.
	slotsMu    sync.Mutex
	slots      map[*transport.Conn]map[namespace.ID][]frame.Grant
	slotsShort atomic.Int64

	pool connPool
}

// shmPath is where the client looks for addr's shm socket, "" for none.
func shmPath(addr string, opts Options) string {
	if opts.NoShm {
		return ""
	}
	if opts.ShmSocket != "" {
		return opts.ShmSocket
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || !isLocal(host) {
		return ""
	}
	return transport.SocketLink(port)
}

// isLocal reports whether host names this machine.
func isLocal(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// startShm opens a session to the node at path if it is node nodeID.
func startShm(path, token, nodeID string) (*shmSession, error) {
	s := &shmSession{path: path, token: token, nodeID: nodeID}
	s.pool.onClose = s.forgetSlots
	c, fds, w, err := s.dial(true)
	if err != nil {
		return nil, err
	}
	defer closeFDs(fds)
	if w.NodeID != nodeID {
		c.Close()
		return nil, fmt.Errorf("shm socket %s serves node %q, not %q", path, w.NodeID, nodeID)
	}
	if len(fds) != 2 {
		c.Close()
		return nil, fmt.Errorf("shm handshake passed %d fds, want 2: %w", len(fds), ErrProtocol)
	}
	if s.shm, err = transport.MapShm(fds[0], w.ArenaSize, fds[1], w.GenWords); err != nil {
		c.Close()
		return nil, err
	}
	s.arenaID = w.ArenaID
	s.pool.give(c, false)
	return s, nil
}

// dial connects and authenticates one control connection, in the newest
// version the node speaks.
func (s *shmSession) dial(first bool) (c *transport.Conn, fds []int, w *frame.Welcome, err error) {
	err = helloVersions(&s.version, func(version uint16) error {
		c, fds, w, err = s.dialVersion(first, version)
		return err
	})
	return c, fds, w, err
}

// dialVersion connects one control connection and says hello with
// version.
func (s *shmSession) dialVersion(first bool, version uint16) (*transport.Conn, []int, *frame.Welcome, error) {
	uc, err := net.DialTimeout("unix", s.path, handshakeLimit)
	if err != nil {
		return nil, nil, nil, err
	}
	c := transport.NewConn(uc.(*net.UnixConn), 0)
	w, fds, err := hello(c, uc, s.token, version, handshakeLimit, func() (frame.Message, []int, error) {
		_, m, fds, err := c.RecvFDs(2)
		return m, fds, err
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("shm handshake: %w", err)
	}
	if !first && w.ArenaID != s.arenaID {
		closeFDs(fds)
		c.Close()
		return nil, nil, nil, fmt.Errorf("shm socket %s now serves another arena", s.path)
	}
	if w.Version != version {
		closeFDs(fds)
		c.Close()
		return nil, nil, nil, fmt.Errorf("shm handshake: welcome of protocol %d to a hello of %d: %w", w.Version, version, ErrProtocol)
	}
	return c, fds, w, nil
}

// acquire pins the mapping for a call and returns a connection; ok is
// false when the session cannot be used (broken or closed).
func (s *shmSession) acquire() (c *transport.Conn, ok bool) {
	if s.broken.Load() {
		return nil, false
	}
	s.use.RLock()
	c, open := s.pool.take()
	if !open {
		s.use.RUnlock()
		return nil, false
	}
	if c == nil {
		var fds []int
		var err error
		if c, fds, _, err = s.dial(false); err != nil {
			s.broken.Store(true)
			s.use.RUnlock()
			return nil, false
		}
		closeFDs(fds)
	}
	return c, true
}

// pin keeps the mapping for a call that needs no connection; false when
// the session cannot be used. unpin ends it.
//
// Such a call asks the node nothing, so it would go on copying from the
// arena of a node that died: bytes that still verify, but a mapping that
// keeps the dead node's memory allocated for as long as this client
// lives. So pin looks at the session's longest-idle connection (a peek,
// at most every peekEvery): when the node closed it, a new connection must
// be had, else the node is gone and the session broken (closed once no
// call uses it: the arena is unmapped).
func (s *shmSession) pin() bool {
	if s.broken.Load() {
		return false
	}
	if now := time.Now().UnixNano(); now-s.peeked.Load() > int64(peekEvery) {
		s.peeked.Store(now)
		if s.pool.dropGone() {
			c, fds, _, err := s.dial(false)
			if err != nil {
				s.broken.Store(true)
				return false
			}
			closeFDs(fds)
			if s.pool.lend(c) {
				s.pool.give(c, false)
			}
		}
	}
	s.use.RLock()
	s.pool.mu.Lock()
	closed := s.pool.closed
	s.pool.mu.Unlock()
	if closed {
		s.use.RUnlock()
		return false
	}
	return true
}

func (s *shmSession) unpin() { s.use.RUnlock() }

// finish returns c to the pool (nil when it failed) and unpins the mapping.
func (s *shmSession) finish(c *transport.Conn, failed bool) {
	if failed {
		s.broken.Store(true)
	}
	s.pool.give(c, failed)
	s.use.RUnlock()
}

// call sends one request and reads its answer, by ctx's deadline.
func (s *shmSession) call(ctx context.Context, c *transport.Conn, req frame.Message) (frame.Message, error) {
	dl, _ := ctx.Deadline() // zero: none
	if err := c.SetDeadline(dl); err != nil {
		return nil, err
	}
	id := s.ids.Add(1)
	if err := c.Send(id, req); err != nil {
		return nil, err
	}
	return recvAnswer(c, id)
}

// close reports the last cache reads, closes the connections and unmaps
// the arena once no call uses it.
func (s *shmSession) close() error {
	if !s.broken.Load() {
		s.flushServed()
	}
	s.use.Lock() // no call in flight from here on
	defer s.use.Unlock()
	if !s.pool.close() {
		return nil
	}
	return s.shm.Close()
}

// shmSession returns the client's session, starting one for node nodeID
// if none runs and the last attempt is old enough; nil means tcp.
func (c *nodeClient) shmSession(nodeID string) *shmSession {
	if c.shmPath == "" {
		return nil
	}
	if s := c.shm.Load(); s != nil && !s.broken.Load() {
		return s
	}
	c.shmMu.Lock()
	defer c.shmMu.Unlock()
	if s := c.shm.Load(); s != nil {
		if !s.broken.Load() {
			return s
		}
		c.shm.Store(nil)
		c.bg.Go(func() { _ = s.close() })
	}
	if nodeID == "" || time.Since(c.shmTried) < retryAfter {
		return nil
	}
	c.shmTried = time.Now()
	s, err := startShm(c.shmPath, c.token, nodeID)
	if err != nil {
		return nil
	}
	c.shm.Store(s)
	return s
}

// usingShm reports whether calls currently go through shared memory.
func (c *nodeClient) usingShm() bool {
	s := c.shm.Load()
	return s != nil && !s.broken.Load()
}

// with runs fn with a connection of the session. ok is false when the
// session is not usable (fn did not run) or fn reports the connection broke
// (the caller falls back to the next plane; the node releases and aborts
// what the connection held when it sees it close).
func (s *shmSession) with(fn func(c *transport.Conn) (broke bool, err error)) (ok bool, err error) {
	c, ok := s.acquire()
	if !ok {
		return false, nil
	}
	broke, err := fn(c)
	s.finish(c, broke)
	if broke {
		return false, nil
	}
	return true, err
}
