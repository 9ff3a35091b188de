package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// TestScrapeEventStreams: a real node's KV event stream shows in /metrics
// per tenant: the events and batches it sent, the replay requests it
// served, its subscribers, no overruns, and the age of its last event.
func TestScrapeEventStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := testnode.Start(t, node.Config{HostBytes: 32 << 20, TenantTokens: map[string]string{"acme-token": "acme"},
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"}}}})
	pub, replay := n.EventsAddrs("acme")
	sub, err := events.Subscribe(ctx, pub, "acme", "acme-token", "kv@")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	c, err := client.Dial(ctx, n.Addr(), client.Options{Token: "acme-token"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns, err := c.Open(ctx, namespace.Descriptor{Tenant: "acme", Model: "m", ModelRevision: "r", Engine: "vllm", DType: "bf16",
		PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64})
	if err != nil {
		t.Fatal(err)
	}
	keys, data := chain(ns, 5)
	if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
		t.Fatal(err)
	}
	acme := map[string]string{"tenant": "acme"}
	var got map[string]float64
	samples := func(done func() bool) bool {
		return poll.Within(10*time.Second, 5*time.Millisecond, func() bool {
			fams := scrape(t, n.AdminAddr())
			got = map[string]float64{}
			for _, name := range []string{"strata_kv_events_sent_total", "strata_kv_event_batches_total",
				"strata_kv_event_replay_requests_total", "strata_kv_event_overruns_total", "strata_kv_event_subscribers",
				"strata_kv_event_last_age_seconds"} {
				if fams[name] != nil { // the age is absent before the first batch
					got[name] = value(t, fams, name, acme)
				}
			}
			return done()
		})
	}
	if !samples(func() bool { return got["strata_kv_events_sent_total"] == 5 && got["strata_kv_event_subscribers"] == 1 }) {
		t.Fatalf("after 5 pages put: %v", got)
	}
	if _, err := events.Replay(ctx, replay, "acme", "acme-token", 0); err != nil {
		t.Fatal(err)
	}
	ok := samples(func() bool { return got["strata_kv_event_replay_requests_total"] == 1 })
	if age, sent := got["strata_kv_event_last_age_seconds"]; !ok || !sent || got["strata_kv_events_sent_total"] != 5 || got["strata_kv_event_batches_total"] < 1 ||
		got["strata_kv_event_overruns_total"] != 0 || got["strata_kv_event_subscribers"] != 1 ||
		age < 0 || age > 30 {
		t.Fatalf("the event stream's samples: %v", got)
	}
}
