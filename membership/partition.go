package membership

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Partition is a fault-injection seam: given as Config.Partition, it drops
// the member's gossip to and from the peers it blocks, as a network
// partition would. The zero value blocks nothing; it is safe for
// concurrent use.
//
// Outgoing packets to a blocked peer are dropped silently, dials to it
// fail, and packets from it are dropped on arrival. Incoming streams (TCP)
// can't be told apart by peer, since their source port is ephemeral, so
// they are let through: a partition between A and B must block B in A's
// Partition and A in B's, and then neither side opens a stream to the other.
type Partition struct {
	// mu guards blocked.
	mu      sync.Mutex
	blocked map[string]bool // by canonical host:port
}

// Block adds gossip addresses (host:port, as GossipAddress returns them)
// to the blocked set.
func (p *Partition) Block(addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked == nil {
		p.blocked = make(map[string]bool)
	}
	for _, a := range addrs {
		p.blocked[canonicalAddr(a)] = true
	}
}

// Heal unblocks every address.
func (p *Partition) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.blocked)
}

// blocks reports whether traffic with addr is dropped.
func (p *Partition) blocks(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.blocked) > 0 && p.blocked[canonicalAddr(addr)]
}

// canonicalAddr writes host:port with the IP in its canonical form, so that
// "127.0.0.1:7946" and "[::ffff:127.0.0.1]:7946" match; anything else is
// returned as is.
func canonicalAddr(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return a
	}
	if ip4 := ip.To4(); ip4 != nil {
		ip = ip4
	}
	return net.JoinHostPort(ip.String(), port)
}

// partitionTransport wraps memberlist's transport, dropping traffic that
// its Partition blocks. Its forward goroutine, which filters incoming
// packets, is stopped and waited for by Shutdown.
type partitionTransport struct {
	memberlist.NodeAwareTransport
	p       *Partition
	packets chan *memberlist.Packet
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once // Shutdown's
	err     error     // Shutdown's, set once
}

var _ memberlist.NodeAwareTransport = (*partitionTransport)(nil)

func newPartitionTransport(t memberlist.NodeAwareTransport, p *Partition) *partitionTransport {
	pt := &partitionTransport{
		NodeAwareTransport: t,
		p:                  p,
		packets:            make(chan *memberlist.Packet),
		stop:               make(chan struct{}),
		done:               make(chan struct{}),
	}
	go pt.forward()
	return pt
}

func (t *partitionTransport) forward() {
	defer close(t.done)
	in := t.NodeAwareTransport.PacketCh()
	for {
		select {
		case pkt := <-in:
			if t.p.blocks(pkt.From.String()) {
				continue
			}
			select {
			case t.packets <- pkt:
			case <-t.stop:
				return
			}
		case <-t.stop:
			return
		}
	}
}

func (t *partitionTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *partitionTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *partitionTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.p.blocks(a.Addr) {
		return time.Now(), nil // lost on the way, as UDP may be
	}
	return t.NodeAwareTransport.WriteToAddress(b, a)
}

func (t *partitionTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *partitionTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.p.blocks(a.Addr) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("%s blocked by partition", a.Addr)}
	}
	return t.NodeAwareTransport.DialAddressTimeout(a, timeout)
}

// Shutdown shuts the wrapped transport down (which stops its listeners),
// then stops and waits for the forward goroutine. It is idempotent.
func (t *partitionTransport) Shutdown() error {
	t.once.Do(func() {
		t.err = t.NodeAwareTransport.Shutdown()
		close(t.stop)
		<-t.done
	})
	return t.err
}
