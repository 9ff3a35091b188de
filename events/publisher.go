package events

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// Config configures a Publisher. Zero fields take their defaults.
type Config struct {
	// Listen is the PUB socket's TCP address, host:port; port 0 picks a
	// free one (Addr says which). Required.
	Listen string
	// Replay is the ROUTER replay socket's TCP address; port 0 picks a
	// free one. Default "": no replay socket.
	Replay string
	// Node names the publisher in its topics. Required.
	Node string
	// Incarnation is the node's incarnation, in every topic. Default 0.
	Incarnation uint64
	// Auth checks a subscriber's PLAIN credentials (both sockets). Default
	// nil: the NULL mechanism, every peer accepted.
	Auth func(user, password string) bool
	// Buffer is how many batches the replay ring keeps. Default 10000
	// (vLLM's buffer_steps).
	Buffer int
	// BufferBytes bounds the payload bytes the replay ring keeps: past it
	// the oldest batches leave first, as past Buffer. Batches grow with
	// Linger (about 200 events, 30 KB, at 20k events/s), so that the ring
	// of Buffer of them could hold gigabytes. Default 64 MiB.
	BufferBytes int
	// Queue is how many events may wait to be sent; an event past it is
	// dropped and counted as an overrun, and its namespace resynchronised
	// (see the package doc). Default 65536.
	Queue int
	// SubscriberQueue is how many batches may wait for one subscriber;
	// past it that subscriber misses batches (it sees the gap in the
	// sequence numbers and asks the replay socket), as past libzmq's
	// high-water mark. Default 10000.
	SubscriberQueue int
	// MaxBatch bounds the events of one batch. Default 1024.
	MaxBatch int
	// Linger is the longest an event waits while events flow: after a
	// batch the publisher sleeps Linger, or until MaxBatch events (half
	// of Queue, when less) are queued, before it takes what was queued
	// since; an event that comes while it is idle goes at once. A batch
	// costs the same few wakes whatever it carries (the publisher's
	// timer, each subscriber's writer, each subscriber and its read), so
	// a flow of events rides a few batches a second instead of a thousand
	// (BenchmarkPublishLinger; benchmarks/README.md, "KV events"). Default
	// 10ms (an engine publishes once per scheduler step, milliseconds to
	// tens of them); negative: none.
	Linger time.Duration
	// MaxConns bounds the connections of each socket. Default 64.
	MaxConns int
	// HandshakeTimeout bounds a connection's ZMTP handshake. Default 5s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds writing one message to a peer; a peer that takes
	// longer is disconnected. Default 10s.
	WriteTimeout time.Duration
	// Resync, when set, emits a namespace's current blocks as Stored
	// events (in any order; emit may be called from Resync's goroutine
	// only). The publisher calls it after an overrun, once its queue is
	// empty, right after a Cleared for the namespace. Default nil: an
	// overrun is followed by the Cleared alone.
	Resync func(namespace string, emit func(Event))
	// Logger receives the publisher's logs. Default: discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Listen == "" || c.Node == "" {
		return errors.New("events: a publisher needs Listen and Node")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Buffer, 10000)
	def(&c.BufferBytes, 64<<20)
	def(&c.Queue, 65536)
	def(&c.SubscriberQueue, 10000)
	def(&c.MaxBatch, 1024)
	def(&c.MaxConns, 64)
	if c.Linger == 0 {
		c.Linger = 10 * time.Millisecond
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Stats counts what a publisher did since New.
type Stats struct {
	Batches  uint64 // batches sent (each one sequence number)
	Events   uint64 // events sent
	Overruns uint64 // events dropped at a full queue
	Resyncs  uint64 // namespaces resynchronised after an overrun
	Bad      uint64 // events left out because they did not encode (bad extra keys)
	// SubscriberDrops counts batches a slow subscriber missed.
	SubscriberDrops uint64
	Replays         uint64 // replay requests served
	Refused         uint64 // connections refused: credentials, handshake, too many
	Subscribers     int    // connected now
	LastEvent       time.Time
	// Next is the sequence number the next batch will carry.
	Next uint64
}

// record is one sent batch, as the ring keeps it for replay.
type record struct {
	seq     uint64
	topic   []byte
	payload []byte
}

// Publisher sends a stream of KV events: a PUB socket for the stream, a
// ROUTER socket replaying its last batches. Publish never blocks.
type Publisher struct {
	cfg  Config
	log  *slog.Logger
	sec  zmq4.Security
	pub  net.Listener
	rep  net.Listener // nil without Config.Replay
	stop chan struct{}
	wg   sync.WaitGroup

	// The queue. Publish appends to q under qmu; the loop takes q whole,
	// one lock a wake whatever it holds, and hands it the other buffer
	// (spare), so that neither side allocates or copies an event twice.
	qmu    sync.Mutex
	q      []Event       // guarded by qmu: the events and marks waiting, oldest first
	qbytes []byte        // guarded by qmu: the hashes PublishBlock copied for q's events
	idle   bool          // guarded by qmu: the loop waits for an event, and the next one wakes it
	wake   chan struct{} // the loop's wake (1 deep): an event while idle, a batch's worth queued, an overrun
	wakeAt int           // MaxBatch, or half the queue when that is less
	closed atomic.Bool

	// The loop goroutine's alone: its encoder, its topics, the queue's
	// other buffer.
	enc        *batchEncoder
	topics     map[topicKey][]byte
	spare      []Event
	spareBytes []byte

	lostMu sync.Mutex
	lost   map[string]bool // guarded by lostMu: namespaces an overrun touched

	ringMu    sync.Mutex
	ring      []record // guarded by ringMu: ring[seq % len] for sequence numbers [oldest, next)
	oldest    uint64   // guarded by ringMu: the oldest sequence number the ring holds
	next      uint64   // guarded by ringMu: the next sequence number
	ringBytes int      // guarded by ringMu: the payload bytes the ring holds

	connMu sync.Mutex
	conns  map[net.Conn]bool    // guarded by connMu: every open connection (true: the PUB socket's)
	subs   map[*subscriber]bool // guarded by connMu: the PUB socket's handshaken subscribers
	nconns [2]int               // guarded by connMu: connections per socket (0 PUB, 1 ROUTER)

	batches, events, overruns, resyncs, bad, subDrops, replays, refused atomic.Uint64
	lastEvent                                                           atomic.Int64
}

// New binds the sockets and starts the publisher.
func New(cfg Config) (*Publisher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}),
		wake: make(chan struct{}, 1), enc: newBatchEncoder(), topics: map[topicKey][]byte{}, lost: map[string]bool{},
		ring: make([]record, cfg.Buffer), conns: map[net.Conn]bool{}, subs: map[*subscriber]bool{}}
	p.wakeAt = max(1, min(cfg.MaxBatch, cfg.Queue/2))
	if cfg.Auth != nil {
		p.sec = plainServer{auth: cfg.Auth}
	} else {
		p.sec = null.Security()
	}
	var err error
	if p.pub, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("events: listening on %s: %w", cfg.Listen, err)
	}
	if cfg.Replay != "" {
		if p.rep, err = net.Listen("tcp", cfg.Replay); err != nil {
			_ = p.pub.Close()
			return nil, fmt.Errorf("events: listening on %s: %w", cfg.Replay, err)
		}
		p.wg.Add(1)
		go p.accept(p.rep, false)
	}
	p.wg.Add(2)
	go p.accept(p.pub, true)
	go p.loop()
	return p, nil
}

// Addr is the PUB socket's address.
func (p *Publisher) Addr() string { return p.pub.Addr().String() }

// ReplayAddr is the replay socket's address; "" without one.
func (p *Publisher) ReplayAddr() string {
	if p.rep == nil {
		return ""
	}
	return p.rep.Addr().String()
}

// Topic is the topic of a namespace's batches under an incarnation.
func (p *Publisher) Topic(namespace string, incarnation uint64) string {
	return Topic(p.cfg.Node, incarnation, namespace)
}

// Topic is the topic of node's batches for a namespace under an
// incarnation: "kv@<node>.<incarnation>@<namespace>".
func Topic(node string, incarnation uint64, namespace string) string {
	return "kv@" + node + "." + strconv.FormatUint(incarnation, 10) + "@" + namespace
}

// Publish queues e; it never blocks. It reports false when the queue was
// full: e is dropped, counted as an overrun, and its namespace is
// resynchronised once the queue drains.
func (p *Publisher) Publish(e Event) bool {
	if p.closed.Load() {
		return false
	}
	if p.enqueue(e, nil, nil) {
		return true
	}
	return p.overrun(e.Namespace)
}

// PublishBlock is Publish for an event of one block (Stored, Removed)
// whose hashes, block and parent (nil: none), it copies into the queue in
// place of e.Block and e.Parent: the caller keeps them, and nothing is
// allocated for them (a node publishes under its store's lock).
func (p *Publisher) PublishBlock(e Event, block, parent []byte) bool {
	if p.closed.Load() {
		return false
	}
	if p.enqueue(e, block, parent) {
		return true
	}
	return p.overrun(e.Namespace)
}

// overrun counts an event dropped at a full queue and marks its namespace
// for a resync; it returns false, Publish's answer.
func (p *Publisher) overrun(namespace string) bool {
	p.overruns.Add(1)
	p.lostMu.Lock()
	p.lost[namespace] = true
	p.lostMu.Unlock()
	p.signal()
	return false
}

// enqueue appends e to the queue unless it is full, with copies of block
// and parent as its hashes when block is not nil, and wakes the loop when
// it is idle or when a batch's worth is queued (ending its linger).
//
// The copies go to qbytes, which the events hold slices of until the loop
// has sent them (giveBack). Where an append moves qbytes, the events
// queued before keep the array they point to.
func (p *Publisher) enqueue(e Event, block, parent []byte) bool {
	p.qmu.Lock()
	if len(p.q) >= p.cfg.Queue {
		p.qmu.Unlock()
		return false
	}
	if cap(p.q) == 0 { // not grown from nothing, copying as it goes
		p.q, p.qbytes = make([]Event, 0, p.wakeAt), make([]byte, 0, p.wakeAt*eventHashes)
	}
	if block != nil {
		n := len(p.qbytes)
		p.qbytes = append(append(p.qbytes, block...), parent...)
		e.Block = p.qbytes[n : n+len(block) : n+len(block)]
		if e.Parent = nil; parent != nil {
			e.Parent = p.qbytes[n+len(block) : len(p.qbytes) : len(p.qbytes)]
		}
	}
	p.q = append(p.q, e)
	wake := p.idle || len(p.q) == p.wakeAt
	p.idle = false
	p.qmu.Unlock()
	if wake {
		p.signal()
	}
	return true
}

// signal wakes the loop, or leaves it a wake if it is busy.
func (p *Publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() Stats {
	p.connMu.Lock()
	subs := len(p.subs)
	p.connMu.Unlock()
	p.ringMu.Lock()
	next := p.next
	p.ringMu.Unlock()
	st := Stats{Next: next, Batches: p.batches.Load(), Events: p.events.Load(), Overruns: p.overruns.Load(),
		Resyncs: p.resyncs.Load(), Bad: p.bad.Load(), SubscriberDrops: p.subDrops.Load(),
		Replays: p.replays.Load(), Refused: p.refused.Load(), Subscribers: subs}
	if t := p.lastEvent.Load(); t != 0 {
		st.LastEvent = time.Unix(0, t)
	}
	return st
}

// Close stops the publisher: the sockets close, queued events are
// dropped, its goroutines are waited for.
func (p *Publisher) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.stop)
	err := p.pub.Close()
	if p.rep != nil {
		err = errors.Join(err, p.rep.Close())
	}
	p.connMu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.connMu.Unlock()
	p.wg.Wait()
	return err
}

// loop sends what is queued, in batches, and resynchronises the namespaces
// an overrun touched once the queue is empty.
//
// Wakes, not bytes, are what a batch costs (Config.Linger): the loop wakes
// for the first event after a quiet spell and sends it at once, then
// lingers, waking again when Linger is up or a batch's worth is queued,
// as long as events keep coming. Publish wakes it only when it is idle
// (the idle flag, set under the queue's lock) or when a batch is full.
func (p *Publisher) loop() {
	defer p.wg.Done()
	var linger *time.Timer
	if p.cfg.Linger > 0 {
		linger = time.NewTimer(p.cfg.Linger)
		linger.Stop()
		defer linger.Stop()
	}
	for {
		q := p.take()
		if len(q) == 0 {
			p.giveBack(q)
			p.resync()
			if !p.park() {
				return
			}
			continue
		}
		p.drain(q)
		p.giveBack(q)
		// Linger: what comes meanwhile is queued without a wake.
		if linger != nil && !p.linger(linger) {
			return
		}
	}
}

// take takes the queue whole, leaving the spare buffers in its place.
func (p *Publisher) take() []Event {
	p.qmu.Lock()
	q := p.q
	p.q, p.spare = p.spare[:0], nil
	p.qbytes, p.spareBytes = p.spareBytes[:0], p.qbytes
	p.qmu.Unlock()
	return q
}

// giveBack keeps q, sent, as the spare buffer: cleared, so that it holds
// no event's tokens, and let go after a burst past maxSpare batches. A
// loop that waits for a CPU while puts run can find several batches'
// worth queued: a buffer let go at that size would be grown again, copied
// at each doubling, under the lock of the puts that fill it.
func (p *Publisher) giveBack(q []Event) {
	clear(q)
	if cap(q) > maxSpare*p.wakeAt {
		q = nil
	}
	p.spare = q[:0]
	if cap(p.spareBytes) > maxSpare*p.wakeAt*eventHashes {
		p.spareBytes = nil
	}
}

// maxSpare is the most batches' worth (wakeAt events) of a queue buffer
// kept after a burst: 16 of 1,024 events of about 190 bytes, 3 MiB.
const maxSpare = 16

// eventHashes is what PublishBlock's copies take for an event, about: a
// strata key and its parent.
const eventHashes = 64

// park waits, the loop idle, for the next event (or an overrun's wake);
// false when the publisher closes.
func (p *Publisher) park() bool {
	p.qmu.Lock()
	if len(p.q) > 0 {
		p.qmu.Unlock()
		return true
	}
	p.idle = true
	p.qmu.Unlock()
	select {
	case <-p.stop:
		return false
	case <-p.wake:
		return true
	}
}

// linger waits Linger, or until a batch's worth is queued; false when the
// publisher closes.
func (p *Publisher) linger(t *time.Timer) bool {
	select { // stale: what filled a batch then was taken
	case <-p.wake:
	default:
	}
	p.qmu.Lock()
	n := len(p.q)
	p.qmu.Unlock()
	if n >= p.wakeAt {
		return true
	}
	t.Reset(p.cfg.Linger)
	select {
	case <-p.stop:
		return false
	case <-t.C:
	case <-p.wake:
		t.Stop()
	}
	return true
}

// drain sends q, the events taken from the queue, in batches of up to
// MaxBatch events, and answers the marks among them once the events
// before each are sent.
func (p *Publisher) drain(q []Event) {
	for len(q) > 0 {
		n := 0
		for n < len(q) && n < p.cfg.MaxBatch && q[n].mark == nil {
			n++
		}
		p.send(q[:n])
		if n < len(q) && q[n].mark != nil {
			p.ringMu.Lock()
			q[n].mark <- p.next
			p.ringMu.Unlock()
			n++
		}
		q = q[n:]
	}
}

// Mark queues a mark behind every event published so far and returns a
// wait for its place in the stream: the sequence number of the first batch
// sent after it. Every event published before Mark goes out in a batch
// numbered below it, every event published after Mark in one numbered
// from it (a store's snapshot taken together with Mark, under the lock its
// events are published under, is cut there). It never blocks; ok is false
// when the queue is full (nothing was queued: ask again later).
func (p *Publisher) Mark() (wait func(context.Context) (uint64, error), ok bool) {
	if p.closed.Load() {
		return nil, false
	}
	ch := make(chan uint64, 1)
	if !p.enqueue(Event{mark: ch}, nil, nil) {
		return nil, false
	}
	return func(ctx context.Context) (uint64, error) {
		select {
		case seq := <-ch:
			return seq, nil
		case <-p.stop:
			return 0, ErrClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, true
}

// resync sends, for each namespace an overrun touched, a Cleared and then
// the namespace's blocks (Config.Resync). It runs once every event queued
// before the overrun was sent, so that a consumer applying the stream in
// order ends with the node's contents: an event older than the resync's
// reading of a block is sent before the Cleared; one newer, after it or
// after the block's Stored, and the last word on each block is the newest.
func (p *Publisher) resync() {
	p.lostMu.Lock()
	lost := p.lost
	if len(lost) == 0 {
		p.lostMu.Unlock()
		return
	}
	p.lost = map[string]bool{}
	p.lostMu.Unlock()
	for ns := range lost {
		p.resyncs.Add(1)
		buf := []Event{{Namespace: ns, Kind: Cleared}}
		if p.cfg.Resync != nil {
			p.cfg.Resync(ns, func(e Event) {
				e.Namespace = ns
				if buf = append(buf, e); len(buf) >= p.cfg.MaxBatch {
					p.send(buf)
					buf = buf[:0]
				}
			})
		}
		p.send(buf)
	}
}

// send sends events as batches: one per run of events of one topic.
func (p *Publisher) send(events []Event) {
	for len(events) > 0 {
		n := 1
		for n < len(events) && events[n].Namespace == events[0].Namespace && events[n].Incarnation == events[0].Incarnation &&
			events[n].Node == events[0].Node {
			n++
		}
		p.sendBatch(events[:n])
		events = events[n:]
	}
}

func (p *Publisher) sendBatch(events []Event) {
	now := time.Now()
	payload, bad, err := p.enc.encode(now, events)
	p.bad.Add(uint64(bad))
	if err != nil {
		p.log.Error("events: encoding a batch", "err", err)
		p.bad.Add(uint64(len(events) - bad))
		return
	}
	r := record{topic: p.topic(&events[0]), payload: payload}
	p.ringMu.Lock()
	r.seq = p.next
	p.next++
	p.keepLocked(r)
	p.ringMu.Unlock()
	p.batches.Add(1)
	p.events.Add(uint64(len(events) - bad))
	p.lastEvent.Store(now.UnixNano())

	msg := zmq4.NewMsgFrom(r.topic, seqBytes(r.seq), r.payload)
	p.connMu.Lock()
	for s := range p.subs {
		if !s.wants(r.topic) {
			continue
		}
		select {
		case s.out <- msg:
		default:
			p.subDrops.Add(1)
		}
	}
	p.connMu.Unlock()
}

// topicKey names a topic: the namespace, and the node and incarnation
// when an event names another's (Event.Node, Event.Incarnation).
type topicKey struct {
	namespace, node string
	incarnation     uint64
}

// topic is e's topic, from the loop's cache: formatted once per
// namespace, here and not where Publish is called (under the store's
// lock). Records share it; nobody writes to it.
func (p *Publisher) topic(e *Event) []byte {
	k := topicKey{namespace: e.Namespace, node: e.Node, incarnation: e.Incarnation}
	if t, ok := p.topics[k]; ok {
		return t
	}
	inc, node := p.cfg.Incarnation, p.cfg.Node
	if e.Incarnation != 0 {
		inc = e.Incarnation
	}
	if e.Node != "" {
		node = e.Node
	}
	t := []byte(Topic(node, inc, e.Namespace))
	if len(p.topics) >= maxTopics {
		clear(p.topics)
	}
	p.topics[k] = t
	return t
}

// maxTopics bounds the loop's cache of topics.
const maxTopics = 4096

// keepLocked puts r, the newest batch, in the ring, and lets the oldest go
// while the ring holds more than Buffer batches or BufferBytes (the newest
// is kept whatever its size).
func (p *Publisher) keepLocked(r record) {
	n := uint64(len(p.ring))
	if r.seq-p.oldest >= n {
		p.dropOldestLocked()
	}
	p.ring[r.seq%n] = r
	p.ringBytes += len(r.payload)
	for p.ringBytes > p.cfg.BufferBytes && p.oldest < r.seq {
		p.dropOldestLocked()
	}
}

func (p *Publisher) dropOldestLocked() {
	old := &p.ring[p.oldest%uint64(len(p.ring))]
	p.ringBytes -= len(old.payload)
	*old = record{}
	p.oldest++
}

// since returns the ring's records from sequence number start on, oldest
// first.
func (p *Publisher) since(start uint64) []record {
	p.ringMu.Lock()
	defer p.ringMu.Unlock()
	start = max(start, p.oldest)
	out := make([]record, 0, p.next-min(start, p.next))
	for s := start; s < p.next; s++ {
		out = append(out, p.ring[s%uint64(len(p.ring))])
	}
	return out
}

func seqBytes(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// endSeq is vLLM's end-of-replay marker, -1 as 8 big-endian bytes.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
