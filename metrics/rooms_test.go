package metrics_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/transfer"
)

// roomSamples are the transfer rooms' samples a test checks, by a name
// that says which (family, labels).
var roomSamples = map[string]struct {
	family string
	labels map[string]string
}{
	"opened":           {"strata_room_attempts_opened_total", nil},
	"published":        {"strata_room_attempts_published_total", nil},
	"acked":            {"strata_room_outcomes_total", map[string]string{"outcome": "acked", "reason": "none"}},
	"expired":          {"strata_room_outcomes_total", map[string]string{"outcome": "expired", "reason": "none"}},
	"user_cancel":      {"strata_room_outcomes_total", map[string]string{"outcome": "aborted", "reason": "user_cancel"}},
	"timeout":          {"strata_room_outcomes_total", map[string]string{"outcome": "aborted", "reason": "timeout"}},
	"producer_failure": {"strata_room_outcomes_total", map[string]string{"outcome": "aborted", "reason": "producer_failure"}},
	"consumer_failure": {"strata_room_outcomes_total", map[string]string{"outcome": "aborted", "reason": "consumer_failure"}},
	"busy":             {"strata_room_refusals_total", map[string]string{"reason": "busy"}},
	"stale":            {"strata_room_refusals_total", map[string]string{"reason": "stale"}},
	"mismatch":         {"strata_room_refusals_total", map[string]string{"reason": "mismatch"}},
	"acked_bytes":      {"strata_room_acked_bytes_total", nil},
	"pinned":           {"strata_room_pinned_bytes", nil},
	"live":             {"strata_rooms_live", nil},
	"tombstones":       {"strata_room_tombstones", nil},
	"dropped":          {"strata_room_tombstones_dropped_total", nil},
	"waiting":          {"strata_room_waiting_consumers", nil},
	"loads":            {"strata_room_publish_to_ack_seconds", nil}, // the histogram's count
}

// rooms scrapes the node and returns every room sample by its name in
// roomSamples.
func rooms(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	fams := scrape(t, admin)
	out := map[string]float64{}
	for name, s := range roomSamples {
		out[name] = value(t, fams, s.family, s.labels)
	}
	return out
}

// checkRooms checks that the room samples are want, those want does not
// name at 0.
func checkRooms(t *testing.T, when string, got map[string]float64, want map[string]float64) {
	t.Helper()
	for name := range roomSamples {
		if got[name] != want[name] {
			s := roomSamples[name]
			t.Errorf("%s: %s%s = %g, want %g", when, s.family, labelText(s.labels), got[name], want[name])
		}
	}
}

// TestRoomMetrics drives the transfer rooms of a real node through every
// outcome and refusal and checks, after each step, that exactly the
// samples it should have moved did: opened and published attempts, acked
// with its bytes and its publish-to-ack time, aborted by reason, expired,
// busy, stale and mismatched calls, pinned bytes, live rooms, tombstones
// (kept and dropped), waiting consumers.
func TestRoomMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := testnode.Start(t, node.Config{HostBytes: 32 << 20,
		Transfer: transfer.Config{OpenTTL: 2 * time.Second, MaxTombstones: 3}})
	c, err := client.Dial(ctx, n.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := namespace.Descriptor{Tenant: "metrics", Model: "llama-3-8b", ModelRevision: "r1", Engine: "vllm", DType: "bf16",
		PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}
	ns, err := c.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	keys, data := chain(ns, 4)
	if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
		t.Fatal(err)
	}
	size := float64(4 * ns.PageBytes())
	admin := n.AdminAddr()
	want := map[string]float64{}
	checkRooms(t, "at start", rooms(t, admin), want)

	// A consumer waits for a room no producer has opened yet.
	granted := make(chan client.Grant, 1)
	go func() {
		g, err := c.AwaitRoom(ctx, "loaded", 0, ns)
		if err != nil {
			t.Error(err)
		}
		granted <- g
	}()
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the consumer counted waiting", func() bool {
		return rooms(t, admin)["waiting"] == 1
	})
	room, err := c.OpenRoom(ctx, "loaded")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenRoom(ctx, "loaded"); !errors.Is(err, client.ErrRoomBusy) {
		t.Fatalf("a second open: %v, want ErrRoomBusy", err)
	}
	published := time.Now()
	if _, err := c.PublishRoom(ctx, room, ns, keys, 4*16); err != nil {
		t.Fatal(err)
	}
	g := <-granted
	want = map[string]float64{"opened": 1, "busy": 1, "published": 1, "pinned": size, "live": 1}
	checkRooms(t, "published and taken", rooms(t, admin), want)

	if err := c.AckRoom(ctx, g.Room); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(published)
	if err := c.AckRoom(ctx, client.Room{Name: "loaded", Attempt: g.Room.Attempt - 1}); !errors.Is(err, client.ErrStaleAttempt) {
		t.Fatalf("an ack naming an old attempt: %v, want ErrStaleAttempt", err)
	}
	want = map[string]float64{"opened": 1, "busy": 1, "published": 1, "acked": 1, "acked_bytes": size, "loads": 1,
		"tombstones": 1, "stale": 1}
	checkRooms(t, "acknowledged", rooms(t, admin), want)
	h := scrape(t, admin)["strata_room_publish_to_ack_seconds"].GetMetric()[0].GetHistogram()
	if s := h.GetSampleSum(); s <= 0 || s > elapsed.Seconds() {
		t.Errorf("publish to ack took %gs, want within the %v between the publish call and the ack's answer", s, elapsed)
	}

	// Aborted by the user; a consumer of another namespace refused.
	room, err = c.OpenRoom(ctx, "cancelled")
	if err == nil {
		_, err = c.PublishRoom(ctx, room, ns, keys, 4*16)
	}
	if err == nil {
		_, err = c.AbortRoom(ctx, room, client.UserCancel, "the user went away")
	}
	if err != nil {
		t.Fatal(err)
	}
	room, err = c.OpenRoom(ctx, "mismatched")
	if err == nil {
		_, err = c.PublishRoom(ctx, room, ns, keys, 4*16)
	}
	if err != nil {
		t.Fatal(err)
	}
	other := d
	other.DType = "fp16"
	ons, err := c.Open(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AwaitRoom(ctx, "mismatched", 0, ons); !errors.Is(err, client.ErrNamespaceMismatch) {
		t.Fatalf("await from another namespace: %v, want ErrNamespaceMismatch", err)
	}
	want = map[string]float64{"opened": 3, "busy": 1, "published": 3, "acked": 1, "acked_bytes": size, "loads": 1,
		"tombstones": 3, "stale": 1, "user_cancel": 1, "consumer_failure": 1, "mismatch": 1}
	checkRooms(t, "aborted and mismatched", rooms(t, admin), want)

	// A producer that opens and never publishes: the attempt expires, and
	// its tombstone takes the oldest's place (MaxTombstones 3).
	if _, err := c.OpenRoom(ctx, "abandoned"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, 50*time.Millisecond, "the unpublished attempt expired and a tombstone dropped", func() bool {
		got := rooms(t, admin)
		return got["expired"] == 1 && got["dropped"] == 1
	})
	want["opened"], want["expired"], want["dropped"] = 4, 1, 1
	checkRooms(t, "expired", rooms(t, admin), want)
}

// labelText writes labels as a selector does, "" for none.
func labelText(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	var parts []string
	for k, v := range labels {
		parts = append(parts, k+"="+strconv.Quote(v))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}
