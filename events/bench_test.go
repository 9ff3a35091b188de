package events

import (
	"fmt"
	"sync/atomic"
	"syscall"
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
			p, sub := benchStream(b, 0)
			received := make(chan int, 1024)
			go func() {
				for {
					var n int
					var err error
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

// BenchmarkPublishRate offers b.N events of a page's shape at a steady
// rate (rate events/s, a millisecond's share each tick, as a node's puts
// do) to one subscriber in this process that counts them, and reports
// what arrived per second, the events the queue overran (each dropped and
// its namespace resynchronised), the batches the subscriber missed, and
// the process's CPU (publisher and subscriber) per event. The node keeps
// up with a rate at which overruns and drops stay 0.
//
//	go test -run '^$' -bench PublishRate -benchtime 400000x ./events
func BenchmarkPublishRate(b *testing.B) {
	for _, rate := range []int{100_000, 200_000, 400_000, 800_000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) { publishAtRate(b, rate, 0) })
	}
}

// BenchmarkPublishLinger is BenchmarkPublishRate at the rate of one
// client's 4 KiB puts on this VM (20k events/s) with the linger of before
// (1ms) and the default (10ms): what a batch costs, its wakes on both
// sides, is spread over the events it carries.
//
//	go test -run '^$' -bench PublishLinger -benchtime 100000x ./events
func BenchmarkPublishLinger(b *testing.B) {
	for _, linger := range []time.Duration{time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("rate=20000/linger=%v", linger), func(b *testing.B) { publishAtRate(b, 20_000, linger) })
	}
}

// publishAtRate is BenchmarkPublishRate's body, for a publisher with
// Config.Linger linger.
func publishAtRate(b *testing.B, rate int, linger time.Duration) {
	p, sub := benchStream(b, linger)
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := sub.RecvCount()
			if err != nil {
				return
			}
			got.Add(int64(n))
		}
	}()
	parent, tokens := make([]byte, 32), make([]uint32, 16)
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for sent := 0; sent < b.N; <-tick.C {
		due := min(b.N, int(time.Since(start).Seconds()*float64(rate))+1)
		for ; sent < due; sent++ {
			key := make([]byte, 32)
			key[0], key[1], key[2] = byte(sent), byte(sent>>8), byte(sent>>16)
			p.Publish(Event{Namespace: "ns", Kind: Stored, Block: key, Parent: parent, Tokens: tokens, BlockSize: 16, Tier: "host"})
		}
	}
	want := int64(b.N) - int64(p.Stats().Overruns)
	poll.Within(10*time.Second, time.Millisecond, func() bool { return got.Load() >= want })
	elapsed := time.Since(start)
	st := p.Stats()
	b.ReportMetric(float64(got.Load())/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(float64(st.Batches)/elapsed.Seconds(), "batches/s")
	b.ReportMetric(float64(st.Overruns), "overruns")
	b.ReportMetric(float64(st.SubscriberDrops), "drops")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/event")
	sub.Close()
	<-done
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStream is a publisher (with Config.Linger linger) and a subscriber
// to it, subscribed; both close with the benchmark.
func benchStream(b *testing.B, linger time.Duration) (*Publisher, *Subscriber) {
	p, err := New(Config{Listen: "127.0.0.1:0", Node: "n1", Incarnation: 1, Linger: linger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	sub, err := Subscribe(b.Context(), p.Addr(), "", "", "kv@")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sub.Close() })
	if !poll.Within(5*time.Second, time.Millisecond, func() bool { return p.subscribed(p.Topic("ns", 1)) }) {
		b.Fatal("no subscription")
	}
	return p, sub
}
