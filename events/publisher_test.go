package events

import (
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/plain"

	"github.com/stratakv/strata/internal/testing/leaktest"
	"github.com/stratakv/strata/internal/testing/poll"
)

// TestMain fails the run if a goroutine the tests started outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }

func newPublisher(t *testing.T, mod func(*Config)) *Publisher {
	t.Helper()
	cfg := Config{Listen: "127.0.0.1:0", Replay: "127.0.0.1:0", Node: "n1", Incarnation: 7,
		Auth: func(user, pass string) bool { return user == "acme" && pass == "acme-token" }}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// subscribed reports whether a subscriber of p wants topic.
func (p *Publisher) subscribed(topic string) bool {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	for s := range p.subs {
		if s.wants([]byte(topic)) {
			return true
		}
	}
	return false
}

func subscribe(t *testing.T, p *Publisher, user, pass string) *Subscriber {
	t.Helper()
	s, err := Subscribe(context.Background(), p.Addr(), user, pass, "kv@")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	poll.Until(t, 5*time.Second, time.Millisecond, "the subscription", func() bool { return p.subscribed(p.Topic("ns", 7)) })
	return s
}

// TestStreamAndReplay: a subscriber with the tenant's credentials gets
// each batch under its topic, numbered from 0, in vLLM's shape; the
// replay socket serves the ring from a sequence number, then vLLM's end
// marker.
func TestStreamAndReplay(t *testing.T) {
	p := newPublisher(t, nil)
	sub := subscribe(t, p, "acme", "acme-token")
	extra := []byte{0x92, 0xa2, 'm', 'm', 0x05} // ["mm", 5]
	p.Publish(Event{Namespace: "ns", Kind: Stored, Block: []byte("k1"), Tokens: []uint32{1, 2}, BlockSize: 2,
		LoraName: "l", ExtraKeys: extra, Tier: "host"})
	m, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "kv@n1.7@ns" || m.Seq != 0 || len(m.Batch.Events) != 1 {
		t.Fatalf("got %+v", m)
	}
	e := m.Batch.Events[0]
	if e.Kind != Stored || !bytes.Equal(e.Hashes[0], []byte("k1")) || e.Parent != nil || len(e.Tokens) != 2 ||
		e.BlockSize != 2 || e.Medium != "STORAGE" || e.LoraName != "l" || e.Ownership != "strata/host" {
		t.Fatalf("event %+v", e)
	}
	p.Publish(Event{Namespace: "ns", Kind: Removed, Block: []byte("k1"), Tier: "host"})
	p.Publish(Event{Namespace: "ns", Kind: Cleared, Incarnation: 3})
	var got []Message
	for len(got) < 2 {
		m, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if got[len(got)-1].Topic != "kv@n1.3@ns" || got[len(got)-1].Batch.Events[0].Kind != Cleared {
		t.Fatalf("a Cleared of incarnation 3: got %+v", got[len(got)-1])
	}
	rep, err := Replay(context.Background(), p.ReplayAddr(), "acme", "acme-token", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != 2 || rep[0].Seq != 1 || rep[1].Seq != 2 || rep[0].Batch.Events[0].Kind != Removed {
		t.Fatalf("replay from 1: %+v", rep)
	}
	if st := p.Stats(); st.Batches != 3 || st.Events != 3 || st.Replays != 1 || st.Overruns != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCredentials: a subscriber with another tenant's name or a wrong
// token is refused at the handshake, on both sockets.
func TestCredentials(t *testing.T) {
	p := newPublisher(t, nil)
	for _, c := range [][2]string{{"globex", "acme-token"}, {"acme", "globex-token"}, {"", ""}} {
		if s, err := Subscribe(context.Background(), p.Addr(), c[0], c[1], ""); err == nil {
			s.Close()
			t.Errorf("credentials %q: subscribed", c)
		}
		if _, err := Replay(context.Background(), p.ReplayAddr(), c[0], c[1], 0); err == nil {
			t.Errorf("credentials %q: replayed", c)
		}
	}
	poll.Until(t, 5*time.Second, time.Millisecond, "the refusals counted", func() bool { return p.Stats().Refused == 6 })
}

// TestOverrunResyncs: events past a full queue are dropped and counted;
// once the queue drains, their namespace is sent again as a Cleared then
// its current blocks (Config.Resync).
func TestOverrunResyncs(t *testing.T) {
	hold, release := make(chan struct{}), make(chan struct{})
	first := true
	p := newPublisher(t, func(c *Config) {
		c.Queue = 2
		c.Resync = func(ns string, emit func(Event)) {
			if first { // holds the loop while the test fills the queue
				first = false
				close(hold)
				<-release
			}
			emit(Event{Kind: Stored, Block: []byte("now")})
		}
	})
	sub := subscribe(t, p, "acme", "acme-token")
	for p.Publish(Event{Namespace: "ns", Kind: Stored, Block: []byte("x")}) {
	}
	<-hold // the loop is in Resync: nothing leaves the queue
	for p.Publish(Event{Namespace: "ns", Kind: Stored, Block: []byte("y")}) {
	}
	close(release)
	var kinds []Kind
	poll.Until(t, 5*time.Second, time.Millisecond, "a second resync", func() bool { return p.Stats().Resyncs == 2 })
	for p.Stats().Batches > uint64(len(kinds)) {
		m, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Batch.Events {
			kinds = append(kinds, e.Kind)
		}
		if len(kinds) > 100 {
			break
		}
	}
	if n := len(kinds); n < 2 || kinds[n-2] != Cleared || kinds[n-1] != Stored {
		t.Fatalf("the stream ends with %v, want a Cleared then the resync's Stored", kinds)
	}
	if p.Stats().Overruns < 2 {
		t.Fatalf("stats %+v", p.Stats())
	}
}

// TestSilentPeerDoesNotStallAccept: a peer that connects and sends nothing
// does not keep the next subscriber out.
func TestSilentPeerDoesNotStallAccept(t *testing.T) {
	p := newPublisher(t, nil)
	dial(t, p)
	subscribe(t, p, "acme", "acme-token")
}

// dial connects to p's PUB socket, and does nothing more; the connection
// closes with the test.
func dial(t *testing.T, p *Publisher) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGuardRefusesLargeFrames: a frame declared past maxFrame fails the
// read before its length reaches zmq4, however the bytes arrive.
func TestGuardRefusesLargeFrames(t *testing.T) {
	stream := append(make([]byte, greeting), 0x00, 3, 'a', 'b', 'c', 0x02, 0, 0, 1, 0, 0, 0, 0, 0)
	for chunk := 1; chunk <= len(stream); chunk++ {
		g := &guard{skip: greeting}
		var err error
		for i := 0; i < len(stream) && err == nil; i += chunk {
			err = g.feed(stream[i:min(i+chunk, len(stream))])
		}
		if err != errTooLarge {
			t.Fatalf("chunks of %d: %v, want errTooLarge", chunk, err)
		}
	}
	g := &guard{skip: greeting}
	if err := g.feed(append(make([]byte, greeting), 0x00, 3, 'a', 'b', 'c', 0x01, 1, 'x', 0x00, 0)); err != nil {
		t.Fatalf("small frames: %v", err)
	}
}

func FuzzGuard(f *testing.F) {
	f.Add(append(make([]byte, greeting), 0x02, 0, 0, 0, 0, 0, 0, 1, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &guard{skip: greeting}
		_ = g.feed(b)
	})
}

func FuzzParseHello(f *testing.F) {
	f.Add([]byte{4, 'a', 'c', 'm', 'e', 1, 't'})
	f.Fuzz(func(t *testing.T, b []byte) {
		u, p, err := parseHello(b)
		if err == nil && 2+len(u)+len(p) != len(b) {
			t.Fatalf("parsed %q %q from %d bytes", u, p, len(b))
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	payload, _, _ := newBatchEncoder().encode(time.Unix(1, 0), []Event{{Kind: Stored, Block: []byte("k"), Tokens: []uint32{1}}, {Kind: Cleared}})
	f.Add(payload)
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = DecodeBatch(b) })
}

// TestDecodeArrayForm: the array form older vLLM and SGLang send decodes
// as the map form does.
func TestDecodeArrayForm(t *testing.T) {
	// [ts, [["BlockStored", [7], null, [1, 2], 2, null, "GPU", null], ["BlockRemoved", [7], "GPU"], ["AllBlocksCleared"]]]
	b := []byte{0x92, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x93,
		0x98, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0x91, 7, 0xc0, 0x92, 1, 2, 2, 0xc0, 0xa3, 'G', 'P', 'U', 0xc0,
		0x93, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd', 0x91, 7, 0xa3, 'G', 'P', 'U',
		0x91, 0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c', 'k', 's', 'C', 'l', 'e', 'a', 'r', 'e', 'd'}
	got, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 3 || got.Events[0].Kind != Stored || got.Events[0].BlockSize != 2 || len(got.Events[0].Tokens) != 2 ||
		got.Events[1].Kind != Removed || got.Events[1].Medium != "GPU" || got.Events[2].Kind != Cleared {
		t.Fatalf("decoded %+v", got)
	}
}

// TestRecvCount: RecvCount counts a batch's events as Recv decodes them.
func TestRecvCount(t *testing.T) {
	p := newPublisher(t, nil)
	sub := subscribe(t, p, "acme", "acme-token")
	p.Publish(Event{Namespace: "ns", Kind: Stored, Block: []byte("k1"), Tier: "host"})
	if n, err := sub.RecvCount(); err != nil || n != 1 {
		t.Fatalf("RecvCount: %d, %v", n, err)
	}
	if _, err := countEvents([]byte{0x91, 0x01}); err == nil {
		t.Error("a one-field batch counted")
	}
}

// TestLingerBatchesAFlow: an event that comes while the publisher is idle
// goes at once; what comes while it lingers waits, without waking it, until
// a batch's worth is queued, and then goes in one batch. The linger here
// is an hour,
// so only the first event's idle wake and the full batch's wake can send
// anything.
func TestLingerBatchesAFlow(t *testing.T) {
	const maxBatch = 100
	p := newPublisher(t, func(c *Config) { c.Linger, c.MaxBatch = time.Hour, maxBatch })
	key := []byte("k")
	p.Publish(Event{Namespace: "ns", Kind: Stored, Block: key})
	poll.Until(t, 5*time.Second, time.Millisecond, "the idle event sent", func() bool { return p.Stats().Events == 1 })
	for range maxBatch - 1 {
		p.Publish(Event{Namespace: "ns", Kind: Stored, Block: key})
	}
	if st := p.Stats(); st.Events != 1 {
		t.Fatalf("%d events sent while a batch was filling during the linger, want 1", st.Events)
	}
	p.Publish(Event{Namespace: "ns", Kind: Stored, Block: key}) // the batch is full: the loop wakes
	poll.Until(t, 5*time.Second, time.Millisecond, "the full batch sent", func() bool { return p.Stats().Events == 1+maxBatch })
	if st := p.Stats(); st.Batches != 2 {
		t.Fatalf("%d batches for an idle event and a full batch, want 2", st.Batches)
	}
	if st := p.Stats(); st.Overruns != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDrainTakesEveryQueuedEvent: a wake sends every event queued, in
// batches of MaxBatch, not one batch a wake (a linger of 10 ms would
// otherwise cap the stream at 100 batches a second), and answers a mark
// between them once the events before it are sent.
func TestDrainTakesEveryQueuedEvent(t *testing.T) {
	const maxBatch, queued = 100, 260
	// The loop is not running: the test plays it.
	p := &Publisher{cfg: Config{Node: "n1", MaxBatch: maxBatch, Queue: 1000}, wake: make(chan struct{}, 1), wakeAt: maxBatch,
		enc: newBatchEncoder(), topics: map[topicKey][]byte{}, ring: make([]record, 16), subs: map[*subscriber]bool{}}
	var wait func(context.Context) (uint64, error)
	for i := range queued {
		if i == 150 {
			wait, _ = p.Mark()
		}
		p.Publish(Event{Namespace: "ns", Kind: Stored, Block: []byte("k")})
	}
	q := p.take()
	p.drain(q)
	p.giveBack(q)
	// 100 and 50 before the mark, 100 and 10 after it.
	if st := p.Stats(); st.Events != queued || st.Batches != 4 || len(p.q) != 0 {
		t.Fatalf("stats %+v, %d left queued; want %d events in 4 batches, none left", st, len(p.q), queued)
	}
	if seq, err := wait(context.Background()); err != nil || seq != 2 {
		t.Fatalf("the mark after 150 events in batches of 100: %d, %v; want 2", seq, err)
	}
}

// TestRingBounds: the replay ring keeps the last Buffer batches, fewer
// when they hold more than BufferBytes, and always the newest.
func TestRingBounds(t *testing.T) {
	for _, c := range []struct {
		buffer, bytes int
		sizes         []int // payload sizes, oldest first
		want          []uint64
	}{
		{4, 1 << 20, []int{100, 100, 100, 100, 100, 100}, []uint64{2, 3, 4, 5}},
		{4, 250, []int{100, 100, 100, 100, 100, 100}, []uint64{4, 5}},
		{4, 250, []int{100, 100, 300}, []uint64{2}},
		{4, 250, []int{300, 10, 10}, []uint64{1, 2}},
		{2, 1 << 20, []int{1}, []uint64{0}},
	} {
		p := &Publisher{cfg: Config{BufferBytes: c.bytes}, ring: make([]record, c.buffer)}
		for _, n := range c.sizes {
			p.ringMu.Lock()
			p.keepLocked(record{seq: p.next, payload: make([]byte, n)})
			p.next++
			p.ringMu.Unlock()
		}
		var got []uint64
		for _, r := range p.since(0) {
			got = append(got, r.seq)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("buffer %d, %d bytes, batches of %v: the ring holds %v, want %v", c.buffer, c.bytes, c.sizes, got, c.want)
		}
	}
}

// countingSec counts the frames a mechanism is asked to decrypt.
type countingSec struct {
	zmq4.Security
	decrypts atomic.Int64
}

func (c *countingSec) Decrypt(w io.Writer, b []byte) (int, error) {
	c.decrypts.Add(1)
	return c.Security.Decrypt(w, b)
}

// TestDataPhaseReadsFramesAsTheyAre: once a subscriber's PLAIN handshake
// is done (dataPhase, as Subscribe connects), zmq4 reads the stream's
// frames as they are, not through the mechanism's Decrypt (a copy of
// every frame into a buffer of its own), and they arrive whole.
func TestDataPhaseReadsFramesAsTheyAre(t *testing.T) {
	p := newPublisher(t, nil)
	c := dial(t, p)
	sec := &countingSec{Security: plain.Security("acme", "acme-token")}
	zc, err := zmq4.Open(c, &dataPhase{Security: sec}, zmq4.Sub, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	sec.decrypts.Store(0) // the handshake's commands
	if err := zc.SendMsg(zmq4.NewMsg(append([]byte{1}, "kv@"...))); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, time.Millisecond, "the subscription", func() bool { return p.subscribed(p.Topic("ns", 7)) })
	p.Publish(Event{Namespace: "ns", Kind: Stored, Block: []byte("k1"), Tier: "host"})
	m, err := zc.RecvMsg()
	if err != nil {
		t.Fatal(err)
	}
	msg, err := parseMessage(m.Frames)
	if err != nil || msg.Topic != "kv@n1.7@ns" || len(msg.Batch.Events) != 1 || string(msg.Batch.Events[0].Hashes[0]) != "k1" {
		t.Fatalf("received %+v, %v", msg, err)
	}
	if n := sec.decrypts.Load(); n != 0 {
		t.Fatalf("%d frames read through Decrypt after the handshake, want 0", n)
	}
}

// TestPublishBlockCopiesHashes: PublishBlock copies the block's and the
// parent's hashes as it queues them, so that the caller may overwrite
// them at once (a node's store does, under its lock), and the queue keeps
// them whole across the moves of its byte buffer.
func TestPublishBlockCopiesHashes(t *testing.T) {
	// The loop is not running: the test takes the queue itself.
	p := &Publisher{cfg: Config{Queue: 100000}, wake: make(chan struct{}, 1), wakeAt: 4}
	block, parent := make([]byte, 32), make([]byte, 32)
	const n = 1000 // past the byte buffer's first capacity, 4 events' worth
	for i := range n {
		block[0], block[1], parent[0] = byte(i), byte(i>>8), byte(i+1)
		if i%3 == 2 {
			p.PublishBlock(Event{Namespace: "ns", Kind: Removed}, block, nil)
		} else {
			p.PublishBlock(Event{Namespace: "ns", Kind: Stored}, block, parent)
		}
	}
	clear(block)
	clear(parent)
	q := p.take()
	if len(q) != n {
		t.Fatalf("%d events queued, want %d", len(q), n)
	}
	for i, e := range q {
		wantParent := i%3 != 2
		if len(e.Block) != 32 || e.Block[0] != byte(i) || e.Block[1] != byte(i>>8) ||
			wantParent != (e.Parent != nil) || wantParent && (len(e.Parent) != 32 || e.Parent[0] != byte(i+1)) {
			t.Fatalf("event %d: block %x parent %x", i, e.Block, e.Parent)
		}
	}
}
