package client

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// What the two frame planes (raw tcp and shm) share: a pool of idle
// connections, reading an answer, and the two halves of a two-phase put
// (the Reserve frame and its answer, the Commit frame and its answer).
// Between the halves the raw plane sends the bytes as Write frames and the
// shm plane copies them into the arena.

const (
	// retryAfter is the least time between attempts to reach a plane
	// (start a shm session, dial a raw connection) after one failed.
	retryAfter = 5 * time.Second
	// handshakeLimit bounds connecting to a plane and its handshake.
	handshakeLimit = 500 * time.Millisecond
)

// peekAfter is how long a pooled connection sits idle before take checks
// that the node has not closed it meanwhile (one non-blocking peek): a
// node closes connections idle past its --raw-idle-timeout, and a call on
// one would fail and quarantine a healthy node. Connections in steady use
// skip the system call.
const peekAfter = 100 * time.Millisecond

// connPool is a session's connections: the idle ones, and the ones lent
// to a call (each carries one request at a time), which Close of the
// client interrupts.
type connPool struct {
	mu     sync.Mutex // guards idle, since, lent and closed
	idle   []*transport.Conn
	since  []time.Time // when each idle connection was given back
	lent   map[*transport.Conn]struct{}
	closed bool
	// maxIdle, if not 0, is how long a connection may sit in the pool: one
	// idle longer is closed rather than used (set where the node closes
	// idle connections: rawPoolIdle).
	maxIdle time.Duration
	// onClose, if set, is told of each connection the pool closes (what
	// the session kept for it is gone).
	onClose func(*transport.Conn)
}

// shut closes c, which the pool gave up.
func (p *connPool) shut(c *transport.Conn) {
	c.Close()
	if p.onClose != nil {
		p.onClose(c)
	}
}

// take returns an idle connection, lent until give, nil when there is
// none; open is false once the pool is closed.
func (p *connPool) take() (c *transport.Conn, open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	for k := len(p.idle); k > 0 && c == nil; k-- {
		c, p.idle = p.idle[k-1], p.idle[:k-1]
		since := p.since[k-1]
		p.since = p.since[:k-1]
		idle := time.Since(since)
		if (p.maxIdle > 0 && idle > p.maxIdle) || (idle > peekAfter && c.PeerGone()) {
			p.shut(c)
			c = nil
		}
	}
	if c != nil {
		p.lendLocked(c)
	}
	return c, true
}

// dropGone closes the longest-idle connection when the node closed it
// (one non-blocking peek), and reports whether it did: the node idled it
// out, or is gone.
func (p *connPool) dropGone() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) == 0 || !p.idle[0].PeerGone() {
		return false
	}
	p.shut(p.idle[0])
	p.idle, p.since = p.idle[1:], p.since[1:]
	return true
}

// lend counts a new connection c as lent until give; false (c closed) when
// the pool is closed.
func (p *connPool) lend(c *transport.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.shut(c)
		return false
	}
	p.lendLocked(c)
	return true
}

func (p *connPool) lendLocked(c *transport.Conn) {
	if p.lent == nil {
		p.lent = make(map[*transport.Conn]struct{})
	}
	p.lent[c] = struct{}{}
}

// give returns c to the pool, or closes it when it broke or the pool is
// closed.
func (p *connPool) give(c *transport.Conn, broke bool) {
	p.mu.Lock()
	delete(p.lent, c)
	if !broke && !p.closed {
		p.idle, p.since = append(p.idle, c), append(p.since, time.Now())
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.shut(c)
}

// interrupt makes the blocked reads and writes of the lent connections
// fail at once (their calls then close them).
func (p *connPool) interrupt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.lent {
		_ = c.Net().SetDeadline(time.Unix(1, 0))
	}
}

// close closes the idle connections; later gives close theirs. It reports
// whether the pool was open.
func (p *connPool) close() bool {
	p.mu.Lock()
	idle, was := p.idle, !p.closed
	p.idle, p.since, p.closed = nil, nil, true
	p.mu.Unlock()
	for _, c := range idle {
		p.shut(c)
	}
	return was
}

// hello authenticates a new connection c (over nc): a Hello of version
// with token, then the Welcome recv reads (with the fds that ride with it,
// on a Unix socket), both within limit. On failure it closes c and the
// fds; a node that does not speak version fails it with ErrVersion.
func hello(c *transport.Conn, nc net.Conn, token string, version uint16, limit time.Duration,
	recv func() (frame.Message, []int, error)) (*frame.Welcome, []int, error) {
	_ = nc.SetDeadline(time.Now().Add(limit))
	if err := c.Send(0, &frame.Hello{Version: version, Token: token}); err != nil {
		c.Close()
		return nil, nil, err
	}
	m, fds, err := recv()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	w, ok := m.(*frame.Welcome)
	if !ok {
		closeFDs(fds)
		c.Close()
		return nil, nil, fromFrame("welcome", m)
	}
	c.SetVersion(w.Version) // the requests whose layout depends on it are sent as w.Version lays them out
	return w, fds, nil
}

// helloVersions runs dial, which connects and says hello with a version,
// with the version in *v (frame.ProtocolVersion while it is 0) and, while
// the node refuses it as one it does not speak (an older node, SPEC.md
// §4), with each older one down to frame.MinProtocolVersion. *v keeps the
// version the node took, for the next dials.
func helloVersions(v *atomic.Uint32, dial func(version uint16) error) error {
	for {
		was := v.Load()
		cur := cmp.Or(was, frame.ProtocolVersion)
		err := dial(uint16(cur))
		if err == nil {
			v.Store(cur)
		}
		if !errors.Is(err, ErrVersion) || cur <= frame.MinProtocolVersion {
			return err
		}
		v.CompareAndSwap(was, cur-1)
	}
}

// recvAnswer reads the answer to request id.
func recvAnswer(c *transport.Conn, id uint64) (frame.Message, error) {
	got, m, err := c.Recv()
	if err != nil {
		return nil, err
	}
	if got != id {
		return nil, fmt.Errorf("answer for request %d, want %d: %w", got, id, ErrProtocol)
	}
	return m, nil
}

// reserveFrame asks the node to reserve pages.
func (n *nodeNS) reserveFrame(pages []Page) *frame.Reserve {
	req := &frame.Reserve{NS: n.id, Pages: make([]frame.PageSpec, len(pages))}
	for i, p := range pages {
		req.Pages[i] = framePageSpec(p)
		req.Pages[i].Size = int64(len(p.Data))
	}
	return req
}

// reserved reads the answer to a Reserve of pages: results holds the
// outcome of every page that was not reserved, open the indexes of those
// that were. broke reports an answer after which the connection is out of
// step.
func reserved(m frame.Message, pages []Page) (r *frame.ReserveOK, results []PutResult, open []int, broke bool, err error) {
	r, isOK := m.(*frame.ReserveOK)
	if !isOK {
		return nil, nil, nil, false, fromFrame("reserve", m)
	}
	if len(r.Slots) != len(pages) {
		return nil, nil, nil, true, fmt.Errorf("reserve: %d answers for %d pages: %w", len(r.Slots), len(pages), ErrProtocol)
	}
	results = make([]PutResult, len(pages))
	for i, sl := range r.Slots {
		switch sl.Status {
		case frame.SlotReserved:
			open = append(open, i)
		case frame.SlotExists:
			results[i] = PutResult{Status: Exists}
		default:
			results[i] = PutResult{Status: Rejected, Reason: sl.Reason}
		}
	}
	return r, results, open, false, nil
}

// commitFrame commits the reserved pages at open with their checksums (a
// page registered in pcs: its pieces').
func (n *nodeNS) commitFrame(r *frame.ReserveOK, pages []Page, open []int, pcs *Pieces) *frame.Commit {
	items := make([]frame.CommitItem, len(open))
	for j, i := range open {
		items[j] = frame.CommitItem{WriteID: r.Slots[i].WriteID, Size: int64(len(pages[i].Data)),
			Checksum: n.sumOf(pages[i].Data, pcs.of(pages[i].Data))}
	}
	return &frame.Commit{NS: n.id, Items: items}
}

// sumOf is the checksum of a page: of its pieces when it has them, else of
// data.
func (n *nodeNS) sumOf(data []byte, pieces [][]byte) []byte {
	if pieces == nil {
		return n.desc.Checksum.Sum(data)
	}
	s := newPageSum(n.desc.Checksum)
	for _, p := range pieces {
		s.write(p)
	}
	return s.sum()
}

// committed reads the answer to a Commit of the pages at open into
// results.
func committed(m frame.Message, open []int, results []PutResult) (broke bool, err error) {
	co, isOK := m.(*frame.CommitOK)
	if !isOK {
		return false, fromFrame("commit", m)
	}
	if len(co.Statuses) != len(open) {
		return true, fmt.Errorf("commit: %d answers for %d pages: %w", len(co.Statuses), len(open), ErrProtocol)
	}
	for j, i := range open {
		results[i] = PutResult{Status: PutStatus(co.Statuses[j])}
		if results[i].Status != Committed {
			results[i].Reason = results[i].Status.String()
		}
	}
	return false, nil
}

// framePageSpec is p's spec on the frame wire, the one place the raw and
// shm planes build it (Size is the caller's: a Put frame's size is its
// data's length).
func framePageSpec(p Page) frame.PageSpec {
	spec := frame.PageSpec{Key: p.Key, Parent: p.Parent, HasParent: p.HasParent, Depth: p.Depth, ChainDepth: p.ChainDepth,
		CostHint: p.CostHint}
	if e := p.Event; e != nil {
		spec.Tokens, spec.LoraName, spec.ExtraKeys = e.Tokens, e.LoraName, e.ExtraKeys
	}
	return spec
}
