package node_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratakv/strata/events"
)

// consumer is a router's index fed by one tenant's streams, one per node:
// the block hashes the events say are held, each with the node whose
// topic announced it, and every topic it saw. It applies each stream's
// batches in sequence order and fills a gap from that stream's replay
// socket, as vLLM's subscriber example does. An AllBlocksCleared takes out
// the blocks of its topic's node (one namespace per test), whichever
// node's stream carried it: a survivor clears a lost node's blocks.
type consumer struct {
	user, pass string

	mu     sync.Mutex
	held   map[string]string         // guarded by mu: block hash → the node that announced it ("" any)
	stored map[string]events.Decoded // guarded by mu: each block's last BlockStored
	topics map[string]int            // guarded by mu: events seen per topic
}

// stream is one node's stream a consumer follows.
type stream struct {
	c      *consumer
	sub    *events.Subscriber
	replay string
	next   uint64 // guarded by c.mu: the next sequence number to apply
	done   chan struct{}
}

// newConsumer follows the stream at pub (and its replay socket), starting
// with held in its index (announced by any node).
func newConsumer(t *testing.T, pub, replay, user, pass string, held ...string) *consumer {
	t.Helper()
	c := &consumer{user: user, pass: pass, held: map[string]string{}, stored: map[string]events.Decoded{},
		topics: map[string]int{}}
	for _, h := range held {
		c.held[h] = ""
	}
	c.follow(t, pub, replay)
	return c
}

// follow adds another node's stream to c.
func (c *consumer) follow(t *testing.T, pub, replay string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := events.Subscribe(ctx, pub, c.user, c.pass, "kv@")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{c: c, sub: sub, replay: replay, done: make(chan struct{})}
	go s.run()
	t.Cleanup(func() {
		cancel()
		sub.Close()
		<-s.done
	})
}

func (s *stream) run() {
	defer close(s.done)
	if err := s.fill(); err != nil { // what was sent before the subscription
		return
	}
	for {
		m, err := s.sub.Recv()
		if err != nil {
			return
		}
		s.c.mu.Lock()
		next := s.next
		s.c.mu.Unlock()
		if m.Seq > next && s.fill() != nil { // a gap: a batch was missed
			return
		}
		s.apply(m)
	}
}

// fill applies what the replay socket holds from the next sequence number.
func (s *stream) fill() error {
	s.c.mu.Lock()
	next := s.next
	s.c.mu.Unlock()
	missed, err := events.Replay(context.Background(), s.replay, s.c.user, s.c.pass, next)
	for _, r := range missed {
		s.apply(r)
	}
	return err
}

func (s *stream) apply(m events.Message) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.Seq < s.next {
		return // applied already (a replay overlapping the stream)
	}
	s.next = m.Seq + 1
	node := topicNode(m.Topic)
	for _, e := range m.Batch.Events {
		c.topics[m.Topic]++
		switch e.Kind {
		case events.Stored:
			for _, h := range e.Hashes {
				c.held[string(h)] = node
				c.stored[string(h)] = e
			}
		case events.Removed:
			for _, h := range e.Hashes {
				delete(c.held, string(h))
			}
		case events.Cleared:
			for h, by := range c.held {
				if by == node || by == "" {
					delete(c.held, h)
				}
			}
		}
	}
}

// topicNode is the node a topic "kv@<node>.<incarnation>@<namespace>"
// names.
func topicNode(topic string) string {
	rest, _ := strings.CutPrefix(topic, "kv@")
	rest, _, _ = strings.Cut(rest, "@")
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func (c *consumer) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for h := range c.held {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

func (c *consumer) seen() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.topics))
	for k, v := range c.topics {
		out[k] = v
	}
	return out
}
