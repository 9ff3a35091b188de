package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
)

// TestClusterStatusEventStreams: cluster status shows each node's KV event
// streams, the admin every tenant's and a tenant only its own.
func TestClusterStatusEventStreams(t *testing.T) {
	listen := node.EventsListen{Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"}
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, AdminToken: "root",
		TenantTokens: map[string]string{"acme-token": "acme", "globex-token": "globex"},
		Events:       node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": listen, "globex": listen}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := openAcme(t, ctx, n.Addr(), "m")
	keys := ns.PageKeys(make([]uint32, 3*16))
	if _, err := ns.Put(ctx, client.ChainPages(keys, [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes()),
		make([]byte, ns.PageBytes())})); err != nil {
		t.Fatal(err)
	}
	pub, _ := n.EventsAddrs("acme")
	var doc struct {
		Events []nodeEventStreamJSON `json:"event_streams"`
	}
	// The stream sends the 3 pages' events on its own goroutine.
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the stream's events in cluster status", func() bool {
		doc.Events = nil
		out := mustStrata(t, map[string]string{"STRATA_ENDPOINT": n.Addr(), "STRATA_TOKEN": "root"}, "cluster", "status", "-o", "json")
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("cluster status -o json: %v\n%s", err, out)
		}
		return len(doc.Events) == 2 && doc.Events[0].Events == 3
	})
	if e := doc.Events[0]; e.NodeID != n.ID() || e.Tenant != "acme" || e.PubAddress != pub || e.Incarnation != 1 ||
		e.Batches == 0 || e.NextSeq != e.Batches || e.Overruns != 0 || e.LastEventUnixMs == 0 || doc.Events[1].Tenant != "globex" {
		t.Fatalf("cluster status -o json: %+v", doc.Events)
	}
	out := mustStrata(t, map[string]string{"STRATA_ENDPOINT": n.Addr(), "STRATA_TOKEN": "root"}, "cluster", "status")
	checkLines(t, "cluster status", out, false,
		`KV event streams:`,
		`NODE\s+TENANT\s+SUBS\s+EVENTS\s+BATCHES\s+REPLAYS\s+OVERRUNS\s+DROPS\s+LAST EVENT`,
		n.ID()+`\s+acme\s+0\s+3\s+\d+\s+0\s+0\s+0\s+[0-9.]+m?s ago`,
		n.ID()+`\s+globex\s+0\s+0\s+0\s+0\s+0\s+0\s+-`)
	// A tenant sees its own stream alone.
	out = mustStrata(t, map[string]string{"STRATA_ENDPOINT": n.Addr(), "STRATA_TOKEN": "globex-token"}, "cluster", "status", "-o", "json")
	doc.Events = nil
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Events) != 1 || doc.Events[0].Tenant != "globex" {
		t.Fatalf("cluster status as globex: %v\n%s", err, out)
	}
}
