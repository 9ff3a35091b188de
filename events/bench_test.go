package events

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
)

// BenchmarkPublish is the publisher's sustained rate into one subscriber
// on loopback: events of a page's shape (a 32-byte key and parent, 16
// tokens) published in bursts of burst events, each burst waited for at
// the subscriber before the next, so that the queue never overruns. The
// subscriber, in the same process, decodes every batch (decode=true, as a
// router does) or only counts its events (decode=false: the publisher's
// own limit, less the subscriber's share of the CPUs). events/s is what
// the node keeps up with; past it a node's queue fills and its events are
// dropped and resynchronised.
//
//	go test -run '^$' -bench Publish -benchtime 200000x ./events
func BenchmarkPublish(b *testing.B) {
	for _, c := range []struct {
		burst  int
		decode bool
	}{{256, true}, {4096, true}, {256, false}, {4096, false}} {
		burst := c.burst
		b.Run(fmt.Sprintf("decode=%v/burst=%d", c.decode, burst), func(b *testing.B) {
			p, err := New(Config{Listen: "127.0.0.1:0", Node: "n1", Incarnation: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			sub, err := Subscribe(b.Context(), p.Addr(), "", "", "kv@")
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			if !poll.Within(5*time.Second, time.Millisecond, func() bool { return p.subscribed(p.Topic("ns", 1)) }) {
				b.Fatal("no subscription")
			}
			received := make(chan int, 1024)
			go func() {
				for {
					var n int
					if c.decode {
						m, err := sub.Recv()
						if err != nil {
							close(received)
							return
						}
						n = len(m.Batch.Events)
					} else if n, err = sub.RecvCount(); err != nil {
						close(received)
						return
					}
					received <- n
				}
			}()
			parent, tokens := make([]byte, 32), make([]uint32, 16)
			b.ResetTimer()
			start := time.Now()
			for sent := 0; sent < b.N; {
				n := min(burst, b.N-sent)
				for i := range n {
					key := make([]byte, 32) // the publisher keeps it until sent
					key[0], key[1] = byte(sent+i), byte((sent+i)>>8)
					if !p.Publish(Event{Namespace: "ns", Kind: Stored, Block: key, Parent: parent, Tokens: tokens, BlockSize: 16, Tier: "host"}) {
						b.Fatal("the queue overran within a burst")
					}
				}
				for got := 0; got < n; {
					k, ok := <-received
					if !ok {
						b.Fatal("the subscription ended")
					}
					got += k
				}
				sent += n
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
