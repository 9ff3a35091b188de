package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/node"
)

// TestPutEventsOverFramePlanes: a put whose pages carry event info
// (Page.Event) goes over the raw plane and through shared memory like any
// other put (frame.EventVersion; it used to fall back to gRPC, the only
// wire that had the field), in both of the raw plane's put shapes (Put
// frames, and Reserve with Writes), and each page's BlockStored carries
// the tokens and LoRA name its put gave it.
func TestPutEventsOverFramePlanes(t *testing.T) {
	for _, plane := range []string{"raw", "shm"} {
		t.Run(plane, func(t *testing.T) {
			n, _ := shmNode(t, func(c *node.Config) {
				c.TenantTokens = map[string]string{"token-a": "acme"}
				c.Events = node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0"}}}
				if plane == "raw" {
					c.ShmSocket = "off"
				} else {
					c.ShmTenants = []string{"acme"}
				}
			})
			pubAddr, _ := n.EventsAddrs("acme")
			sub, err := events.Subscribe(ctxT(t), pubAddr, "acme", "token-a", "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sub.Close() })
			c := dial(t, n.Addr(), "token-a")
			ns := open(t, c)
			if active := map[string]bool{"raw": c.RawActive(), "shm": c.ShmActive()}[plane]; !active {
				t.Fatalf("the client does not use the %s plane", plane)
			}
			// 2 pages go as Put frames (raw), 20 as Reserve and Writes.
			keys := ns.PageKeys(tokens(16*22, 31))
			pages := client.ChainPages(keys, pagesFor(ns, keys))
			want := make(map[string][]int64, len(pages))
			for i := range pages {
				toks := []uint32{uint32(1000 + i), uint32(2000 + i), 7}
				pages[i].Event = &client.EventInfo{Tokens: toks, LoraName: "lora-x"}
				for _, tk := range toks {
					want[string(keys[i][:])] = append(want[string(keys[i][:])], int64(tk))
				}
			}
			_, slotsBefore := c.ShmRequests()
			for _, batch := range [][]client.Page{pages[:2], pages[2:]} {
				res, err := ns.Put(ctxT(t), batch)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					if r.Status != client.Committed {
						t.Fatalf("page %d: %v", i, r)
					}
				}
			}
			oneCall, twoPhase := c.RawPuts()
			_, slots := c.ShmRequests()
			switch {
			case plane == "raw" && (oneCall != 1 || twoPhase != 1):
				t.Fatalf("raw put batches: %d in one call, %d in two; want 1 and 1", oneCall, twoPhase)
			case plane == "shm" && slots-slotsBefore != 2:
				t.Fatalf("%d put batches into granted slots, want 2", slots-slotsBefore)
			}
			got := make(map[string][]int64)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() { <-ctx.Done(); sub.Close() }()
			for len(got) < len(want) {
				m, err := sub.Recv()
				if err != nil {
					t.Fatalf("after %d of %d pages announced: %v", len(got), len(want), err)
				}
				for _, e := range m.Batch.Events {
					if e.Kind != events.Stored {
						continue
					}
					if e.LoraName != "lora-x" {
						t.Errorf("lora %q, want lora-x", e.LoraName)
					}
					for _, h := range e.Hashes {
						got[string(h)] = e.Tokens
					}
				}
			}
			for k, w := range want {
				if !slices.Equal(got[k], w) {
					t.Errorf("page %x: BlockStored tokens %v, want %v", k[:4], got[k], w)
				}
			}
		})
	}
}
