package node

import (
	"runtime"
	"testing"
	"time"

	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// hookEvents is a put's two store events, a page's BlockStored and the
// BlockRemoved of another (strata-load's put and its trim), for a node
// whose only stream is p's, tenant acme's.
func hookEvents(p *events.Publisher) (ev *nodeEvents, stored, removed store.Event) {
	ev = &nodeEvents{pubs: map[string]*events.Publisher{"acme": p}}
	var id namespace.ID
	id[0] = 7
	stored = store.Event{Kind: store.EventStored, Namespace: id, Tenant: "acme", PageTokens: 16, HasParent: true, Tier: tiers.KindHost}
	removed = store.Event{Kind: store.EventRemoved, Namespace: id, Tenant: "acme", PageTokens: 16, Tier: tiers.KindHost}
	return ev, stored, removed
}

// TestEventHookAllocatesNothing: the store's OnEvent, under the store's
// lock at every put, allocates nothing (the publisher copies the hashes
// into its queue). The publisher's loop, lingering an hour with a batch of
// 4,096, stays asleep meanwhile.
func TestEventHookAllocatesNothing(t *testing.T) {
	p, err := events.New(events.Config{Listen: "127.0.0.1:0", Node: "n1", Linger: time.Hour, MaxBatch: 4096, Queue: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ev, stored, removed := hookEvents(p)
	if n := testing.AllocsPerRun(1000, func() {
		ev.onStore(stored)
		ev.onStore(removed)
	}); n != 0 {
		t.Fatalf("%v allocations a put's two events, want 0", n)
	}
}

// BenchmarkEventHook is the store's OnEvent with a stream on, as a put
// pays it under the store's lock (hookEvents), queued to a publisher
// whose loop sends them to nobody, on the other CPU, waited for every 256
// puts (not timed) so that the queue never overruns. ns/op is the hook's
// time a put, the loop's not included.
//
//	go test -run '^$' -bench EventHook ./node
func BenchmarkEventHook(b *testing.B) {
	p, err := events.New(events.Config{Listen: "127.0.0.1:0", Node: "n1"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ev, stored, removed := hookEvents(p)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		stored.Key[0], stored.Key[1], removed.Key[0] = byte(i), byte(i>>8), byte(i+1)
		ev.onStore(stored)
		ev.onStore(removed)
		if i%256 == 255 {
			b.StopTimer()
			for p.Stats().Events < uint64(2*(i+1)) {
				runtime.Gosched()
			}
			b.StartTimer()
		}
	}
	if st := p.Stats(); st.Overruns > 0 {
		b.Fatalf("%d overruns", st.Overruns)
	}
}

// TestEventRoute: a namespace's events go to its tenant's stream when the
// namespace is opted in, nowhere before the store knows its tenant (pages
// recovered from SSD), and to the tenant's stream once it does, whichever
// namespace was routed last.
func TestEventRoute(t *testing.T) {
	p := &events.Publisher{}
	var a, b, c namespace.ID
	a[0], b[0], c[0] = 1, 2, 3
	ev := &nodeEvents{pubs: map[string]*events.Publisher{"acme": p}, only: map[namespace.ID]bool{a: true, b: true}}
	for i, step := range []struct {
		id     namespace.ID
		tenant string
		want   *events.Publisher
	}{
		{a, "", nil}, {a, "", nil}, {a, "acme", p}, {a, "acme", p}, {b, "acme", p}, {a, "acme", p},
		{b, "globex", nil}, {c, "acme", nil}, {b, "acme", p},
	} {
		r := ev.route(step.id, step.tenant)
		if r.pub != step.want || r.name != step.id.String() {
			t.Fatalf("step %d: namespace %x of tenant %q routed to %p as %q, want %p", i, step.id[0], step.tenant, r.pub, r.name, step.want)
		}
	}
}
