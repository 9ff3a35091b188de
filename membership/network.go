package membership

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Network is an in-process network for gossip: members started with the
// same Network (Config.Network) reach each other through channels instead
// of sockets, so that many can run in one process (the cluster simulator,
// cmd/strata-sim cluster). It counts what crosses it. Packets behave as
// UDP does: one to a member that is gone, or whose queue is full, is lost
// without an error. A stream (TCP) to a member that is gone fails to dial.
// It is safe for concurrent use; the zero value is not: use NewNetwork.
type Network struct {
	// mu guards members and nextPort.
	mu       sync.Mutex
	members  map[string]*memTransport // by address
	nextPort int

	packets, packetBytes atomic.Int64
	lost                 atomic.Int64
	streams, streamBytes atomic.Int64
}

// NetworkStats is what has crossed a Network since NewNetwork.
type NetworkStats struct {
	// Packets and PacketBytes count the packets sent (UDP's share of
	// gossip: probes, acks, gossip rounds), lost ones included.
	Packets, PacketBytes int64
	// Lost counts the packets lost: to a member gone, or whose inbox was
	// full.
	Lost int64
	// Streams counts the streams dialed (TCP's share: joins, push-pull
	// state exchanges, fallback probes); StreamBytes the bytes written on
	// them, both ways.
	Streams, StreamBytes int64
}

// packetQueue is how many packets a member's inbox holds before more are
// lost.
const packetQueue = 1024

// NewNetwork returns an empty in-process network.
func NewNetwork() *Network {
	return &Network{members: make(map[string]*memTransport)}
}

// Stats returns what has crossed the network so far.
func (n *Network) Stats() NetworkStats {
	return NetworkStats{
		Packets: n.packets.Load(), PacketBytes: n.packetBytes.Load(), Lost: n.lost.Load(),
		Streams: n.streams.Load(), StreamBytes: n.streamBytes.Load(),
	}
}

// attach returns a new transport on a fresh address of the network.
func (n *Network) attach() *memTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextPort++
	t := &memTransport{
		net:     n,
		addr:    &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: n.nextPort},
		packets: make(chan *memberlist.Packet, packetQueue),
		streams: make(chan net.Conn),
		stop:    make(chan struct{}),
	}
	n.members[t.addr.String()] = t
	return t
}

// peer returns the live transport at addr, or nil.
func (n *Network) peer(addr string) *memTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members[canonicalAddr(addr)]
}

// detach removes t from the network.
func (n *Network) detach(t *memTransport) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.members, t.addr.String())
}

// memTransport is one member's end of a Network.
type memTransport struct {
	net     *Network
	addr    *net.TCPAddr
	packets chan *memberlist.Packet
	streams chan net.Conn
	stop    chan struct{} // closed by Shutdown
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*memTransport)(nil)

func (t *memTransport) port() int { return t.addr.Port }

func (t *memTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.addr.IP, t.addr.Port, nil
}

func (t *memTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *memTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	now := time.Now()
	t.net.packets.Add(1)
	t.net.packetBytes.Add(int64(len(b)))
	if dest := t.net.peer(a.Addr); dest == nil || !dest.deliver(&memberlist.Packet{Buf: bytes.Clone(b), From: t.addr, Timestamp: now}) {
		t.net.lost.Add(1)
	}
	return now, nil
}

// deliver queues pkt, or loses it (and returns false) if the queue is
// full or t is shut down.
func (t *memTransport) deliver(pkt *memberlist.Packet) bool {
	select {
	case <-t.stop:
		return false
	case t.packets <- pkt:
		return true
	default:
		return false
	}
}

func (t *memTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *memTransport) IngestPacket(conn net.Conn, addr net.Addr, now time.Time, shouldClose bool) error {
	if shouldClose {
		defer conn.Close()
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, conn); err != nil {
		return fmt.Errorf("reading packet: %w", err)
	}
	if buf.Len() < 1 {
		return fmt.Errorf("packet from %s too short", addr)
	}
	if !t.deliver(&memberlist.Packet{Buf: buf.Bytes(), From: addr, Timestamp: now}) {
		t.net.lost.Add(1)
	}
	return nil
}

func (t *memTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *memTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("no member at %s", a.Addr)}
	dest := t.net.peer(a.Addr)
	if dest == nil {
		return nil, refused
	}
	t.net.streams.Add(1)
	near, far := net.Pipe()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case dest.streams <- countingConn{far, &t.net.streamBytes}:
		return countingConn{near, &t.net.streamBytes}, nil
	case <-dest.stop:
	case <-t.stop:
	case <-timer.C:
	}
	near.Close()
	far.Close()
	return nil, refused
}

func (t *memTransport) StreamCh() <-chan net.Conn { return t.streams }

func (t *memTransport) IngestStream(conn net.Conn) error {
	select {
	case t.streams <- conn:
		return nil
	case <-t.stop:
		conn.Close()
		return fmt.Errorf("transport %s shut down", t.addr)
	}
}

// Shutdown takes t off the network; packets to it are lost from now on
// and dials to it fail. It is idempotent.
func (t *memTransport) Shutdown() error {
	t.once.Do(func() {
		t.net.detach(t)
		close(t.stop)
	})
	return nil
}

// countingConn adds the bytes written on a stream to a Network's count.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}
