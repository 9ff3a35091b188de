package load

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/node"
)

// A node with its KV event stream on (StrataConfig.Events, strata-load
// --events) publishes a BlockStored for every page a put publishes and a
// BlockRemoved for every page deleted; one subscriber in the load
// generator drains the stream as a router would, so the node pays for
// encoding and sending every batch, and the system's put figures beside
// those of the same node without the stream are the stream's cost.

// eventsConfig publishes tenant's stream on a free loopback port (no
// replay socket).
func eventsConfig(tenant string) node.EventsConfig {
	return node.EventsConfig{Tenants: map[string]node.EventsListen{tenant: {Pub: "127.0.0.1:0"}}}
}

// eventDrain is a subscriber that reads a stream until closed, counting
// what it received.
type eventDrain struct {
	sub     *events.Subscriber
	batches atomic.Uint64
	events  atomic.Uint64
	done    sync.WaitGroup
}

// drainEvents subscribes to every topic of the stream at pub as tenant (a
// node without tokens takes any password) and reads it in a goroutine of
// its own.
func drainEvents(ctx context.Context, pub, tenant string) (*eventDrain, error) {
	if pub == "" {
		return nil, errors.New("events: the node publishes no stream for the tenant")
	}
	sub, err := events.Subscribe(ctx, pub, tenant, "-", "")
	if err != nil {
		return nil, err
	}
	d := &eventDrain{sub: sub}
	d.done.Go(func() {
		for {
			n, err := sub.RecvCount() // a router's decoding is not the node's cost
			if err != nil {
				return
			}
			d.batches.Add(1)
			d.events.Add(uint64(n))
		}
	})
	return d, nil
}

// Received is how many batches and events the drain has read.
func (d *eventDrain) Received() (batches, events uint64) { return d.batches.Load(), d.events.Load() }

// Close ends the subscription and waits for the reader.
func (d *eventDrain) Close() error {
	err := d.sub.Close()
	d.done.Wait()
	return err
}

// EventsReceived is the batches and events the system's subscriber read
// (zero without StrataConfig.Events).
func (s *Strata) EventsReceived() (batches, events uint64) {
	if s.drain == nil {
		return 0, 0
	}
	return s.drain.Received()
}
