package events

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// The sockets' peers. zmq4 frames every message and runs the handshake
// (zmq4.Open over each accepted connection); the publisher keeps, as
// libzmq's PUB and ROUTER do, the connections themselves: an accept loop
// that hands each handshake to its own goroutine under a deadline (zmq4's
// own sockets handshake in the accept loop, where one silent peer stalls
// every later one), a queue per subscriber so that a slow one misses
// batches instead of holding the others (zmq4's PUB writes to each peer in
// turn, without deadlines), and the subscriptions, matched by prefix.

// accept serves l's connections until Close: pub says whether l is the PUB
// socket or the replay socket.
func (p *Publisher) accept(l net.Listener, pub bool) {
	defer p.wg.Done()
	which := 0
	if !pub {
		which = 1
	}
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Warn("events: accepting", "err", err)
			continue
		}
		p.connMu.Lock()
		ok := !p.closed.Load() && p.nconns[which] < p.cfg.MaxConns
		if ok {
			p.conns[c] = pub
			p.nconns[which]++
		}
		p.connMu.Unlock()
		if !ok {
			p.refused.Add(1)
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.forget(c, which)
			p.serve(c, pub)
		}()
	}
}

// forget closes c and drops it from the connections.
func (p *Publisher) forget(c net.Conn, which int) {
	_ = c.Close()
	p.connMu.Lock()
	delete(p.conns, c)
	p.nconns[which]--
	p.connMu.Unlock()
}

// serve handshakes c and serves it until it fails or Close.
func (p *Publisher) serve(c net.Conn, pub bool) {
	typ := zmq4.Router
	if pub {
		typ = zmq4.Pub
	}
	_ = c.SetDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	bc := &batched{guard: newGuard(c)}
	zc, err := zmq4.Open(bc, p.sec, typ, nil, true, nil)
	if err != nil {
		p.refused.Add(1)
		p.log.Debug("events: handshake", "peer", c.RemoteAddr().String(), "err", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	if pub {
		p.subscribe(c, bc, zc)
	} else {
		p.replay(c, zc)
	}
}

// batched is a peer's connection whose writes, while gathering, collect
// in a buffer that flush writes at once: zmq4 writes a frame's header and
// its body apart, six writes for a batch's three frames, and a subscriber
// with several batches waiting gets them all in one write.
type batched struct {
	*guard
	mu        sync.Mutex
	gathering bool   // guarded by mu
	buf       []byte // guarded by mu: what was written while gathering
}

func (b *batched) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.gathering {
		return b.guard.Write(p)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// gather makes writes collect until flush.
func (b *batched) gather() {
	b.mu.Lock()
	b.gathering = true
	b.mu.Unlock()
}

// gathered is how many bytes wait for flush.
func (b *batched) gathered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

// flush writes what was gathered, in one write, and ends the gathering.
func (b *batched) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gathering = false
	_, err := b.guard.Write(b.buf)
	if cap(b.buf) > maxGather {
		b.buf = nil // a burst's buffer is not kept
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// maxGather is about the most a subscriber's writer gathers for one
// write.
const maxGather = 1 << 20

// subscriber is a PUB peer: its subscriptions and its queue.
type subscriber struct {
	out chan zmq4.Msg

	mu     sync.Mutex // guards prefix; taken under Publisher.connMu
	prefix [][]byte
}

// wants reports whether one of s's subscriptions is a prefix of topic.
func (s *subscriber) wants(topic []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pre := range s.prefix {
		if bytes.HasPrefix(topic, pre) {
			return true
		}
	}
	return false
}

// update applies a subscription message: 1 and a prefix subscribes, 0 and
// a prefix cancels one.
func (s *subscriber) update(frame []byte) {
	if len(frame) == 0 || frame[0] > 1 {
		return
	}
	pre := bytes.Clone(frame[1:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if frame[0] == 1 {
		s.prefix = append(s.prefix, pre)
		return
	}
	for i, q := range s.prefix {
		if bytes.Equal(q, pre) {
			s.prefix = append(s.prefix[:i], s.prefix[i+1:]...)
			return
		}
	}
}

// subscribe serves a handshaken PUB peer: its subscriptions on this
// goroutine, its queue on a writer of its own.
func (p *Publisher) subscribe(c net.Conn, bc *batched, zc *zmq4.Conn) {
	s := &subscriber{out: make(chan zmq4.Msg, p.cfg.SubscriberQueue)}
	p.connMu.Lock()
	p.subs[s] = true
	p.connMu.Unlock()
	defer func() {
		p.connMu.Lock()
		delete(p.subs, s)
		p.connMu.Unlock()
	}()
	done := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		for {
			select {
			case <-p.stop:
				return
			case m := <-s.out:
				if err := p.write(c, bc, zc, s, m); err != nil {
					_ = c.Close() // ends the reader below too
					return
				}
			}
		}
	}()
	for {
		m, err := zc.RecvMsg()
		if err != nil {
			break
		}
		if len(m.Frames) == 1 {
			s.update(m.Frames[0])
		}
	}
	_ = c.Close()
	<-done
}

// write sends m and the batches queued behind it, up to about maxGather
// bytes, to s in one write.
func (p *Publisher) write(c net.Conn, bc *batched, zc *zmq4.Conn, s *subscriber, m zmq4.Msg) error {
	bc.gather()
	for {
		if err := zc.SendMsg(m); err != nil {
			return err
		}
		if bc.gathered() >= maxGather {
			break
		}
		select {
		case m = <-s.out:
			continue
		default:
		}
		break
	}
	_ = c.SetWriteDeadline(time.Now().Add(p.cfg.WriteTimeout))
	return bc.flush()
}

// replay serves a replay peer: each request, a start sequence number as 8
// big-endian bytes (after an empty delimiter frame from a REQ socket), is
// answered with every batch the ring holds from it on, then vLLM's end
// marker, each as [delimiter,] topic, sequence number, payload.
func (p *Publisher) replay(c net.Conn, zc *zmq4.Conn) {
	for {
		m, err := zc.RecvMsg()
		if err != nil {
			return
		}
		f := m.Frames
		if len(f) == 0 || len(f[len(f)-1]) != 8 {
			p.log.Debug("events: malformed replay request", "frames", len(f))
			continue
		}
		var head [][]byte
		if len(f) >= 2 && len(f[len(f)-2]) == 0 {
			head = [][]byte{{}}
		}
		p.replays.Add(1)
		start := uint64(0)
		for _, b := range f[len(f)-1] {
			start = start<<8 | uint64(b)
		}
		send := func(frames ...[]byte) error {
			_ = c.SetWriteDeadline(time.Now().Add(p.cfg.WriteTimeout))
			return zc.SendMsg(zmq4.NewMsgFrom(append(head[:len(head):len(head)], frames...)...))
		}
		for _, r := range p.since(start) {
			if err := send(r.topic, seqBytes(r.seq), r.payload); err != nil {
				return
			}
		}
		if err := send([]byte{}, endSeq, []byte{}); err != nil {
			return
		}
	}
}
