package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestTransferAdapterCriteria holds the transfer rooms to the seed's
// "Acceptance criteria for a backend adapter" (shared/seeds/001, issue 40),
// one subtest a criterion, and to its negative tests, on three stratad
// processes: a producer and a consumer with clients of their own (the
// consumer of criterion 5 a process of its own, killed), the pages spread
// over the nodes and pinned on each owner. rooms_test.go and
// client/transfer_test.go hold the same rules in one process; here they
// hold across the wire, the pins on other nodes included.
func TestTransferAdapterCriteria(t *testing.T) {
	x := startTransferPair(t)
	t.Run("1_abort_reasons_hold_pins_until_drain", x.abortReasons)
	t.Run("2_stale_calls_leave_successor_unchanged", x.staleCalls)
	t.Run("3_destination_failure_rolls_back", x.destinationFailure)
	t.Run("4_replay_waits_for_drain", x.replay)
	t.Run("5_missing_ack_no_early_reuse", x.missingAck)
	t.Run("negative_wrong_version_keys", x.wrongVersion)
	t.Run("negative_truncated_payload", x.truncatedPayload)
	t.Run("negative_expired_pin", x.expiredPin)
}

// published puts the pages seed names and publishes them in room.
func (x *transferPair) published(t *testing.T, room string, seed uint32, pages int) (client.Room, []namespace.Key, time.Time) {
	t.Helper()
	keys := putPages(t, x.pns, seed, pages)
	r, exp := publish(t, x.prod, x.pns, room, keys)
	return r, keys, exp
}

// loading publishes the pages seed names in room and has the consumer
// take them and load n: the attempt, its keys, its pin's expiry, the grant.
func (x *transferPair) loading(t *testing.T, room string, seed uint32, pages, n int) (client.Room, []namespace.Key, time.Time, client.Grant) {
	t.Helper()
	r, keys, exp := x.published(t, room, seed, pages)
	return r, keys, exp, x.take(t, room, r, n)
}

// take is the consumer's await of room (any attempt), which must grant
// want, and its load of the grant's first n pages, byte-exact.
func (x *transferPair) take(t *testing.T, room string, want client.Room, n int) client.Grant {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	g, err := x.cons.AwaitRoom(ctx, room, 0, x.cns)
	if err != nil || g.Room != want {
		t.Fatalf("the consumer's await of room %s: %+v, %v; want attempt %d", room, g.Room, err, want.Attempt)
	}
	if got, err := loaded(t, x.cns, g.Keys[:n]); got != n {
		t.Fatalf("the consumer loaded %d of %d pages: %v", got, n, err)
	}
	return g
}

// want fails t unless room's current attempt is a in state, for reason
// when it names one.
func (x *transferPair) want(t *testing.T, room string, a client.Room, state pb.RoomState, reason ...client.AbortReason) *client.RoomInfo {
	t.Helper()
	info := roomState(t, x.prod, room)
	if info.GetAttempt() != a.Attempt || info.GetState() != state || (len(reason) > 0 && info.GetReason() != reason[0]) {
		t.Fatalf("room %s: %v; want attempt %d %v %v", room, info, a.Attempt, state, reason)
	}
	return info
}

// abortLoading aborts the loading attempt r as side (producer or
// consumer) for reason: it must go DRAINING with every pin held. It
// returns the leases the nodes hold.
func (x *transferPair) abortLoading(t *testing.T, side *client.Client, r client.Room, reason client.AbortReason, why string) []int {
	t.Helper()
	held := x.cl.leases(t)
	if st, err := side.AbortRoom(t.Context(), r, reason, why); err != nil || st != pb.RoomState_ROOM_STATE_DRAINING {
		t.Fatalf("%v abort of room %s while the consumer loads: %v, %v; want DRAINING", reason, r.Name, st, err)
	}
	if after := x.cl.leases(t); sum(after) != sum(held) || sum(held) == 0 {
		t.Fatalf("%v abort of room %s: leases %v before, %v after: the pins must hold until the drain", reason, r.Name, held, after)
	}
	return held
}

// refused fails t unless err is sentinel.
func refused(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v, want %v", what, err, sentinel)
	}
}

// nothingGranted fails t unless a second consumer's await of room, for a
// moment, gets sentinel rather than pages.
func (x *transferPair) nothingGranted(t *testing.T, room string, sentinel error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	g, err := x.prod.AwaitRoom(ctx, room, 0, x.pns)
	if !errors.Is(err, sentinel) {
		t.Fatalf("a second consumer's await of room %s: %d keys, %v; want %v and no pages", room, len(g.Keys), err, sentinel)
	}
}

// Criterion 1: for each abort reason, source and destination allocations
// are kept until the transport proves quiescence, and nothing partial is
// published. An attempt aborted while its consumer reads is DRAINING: the
// pins on every owner hold, no other consumer is handed its pages, the
// room is not reused, until the consumer's ack says it stopped reading.
// An attempt aborted before any consumer took it has nobody to wait for.
func (x *transferPair) abortReasons(t *testing.T) {
	ctx := t.Context()
	for i, reason := range []client.AbortReason{client.UserCancel, client.Timeout, client.ProducerFailure, client.ConsumerFailure} {
		name := "c1-" + strings.ToLower(strings.TrimPrefix(reason.String(), "ABORT_REASON_"))
		r, keys, _, g := x.loading(t, name, uint32(100+i), 8, 4)
		side, by := x.prod, "producer" // the producer aborts but for the consumer's own failure
		if reason == client.ConsumerFailure {
			side, by = x.cons, "consumer"
		}
		held := x.abortLoading(t, side, r, reason, "criterion 1")
		if pinned := x.cl.metric(t, "strata_room_pinned_bytes"); pinned != float64(len(keys)*x.pns.PageBytes()) {
			t.Fatalf("%s: %v bytes pinned after the abort, want %d", reason, pinned, len(keys)*x.pns.PageBytes())
		}
		x.nothingGranted(t, name, client.ErrTransferAborted)
		_, err := x.prod.OpenRoom(ctx, name)
		refused(t, "reopening a draining room", err, client.ErrRoomBusy)
		if err := x.cons.AckRoom(ctx, g.Room); err != nil {
			t.Fatalf("%s: the consumer's drain ack: %v", reason, err)
		}
		x.want(t, name, r, pb.RoomState_ROOM_STATE_ABORTED, reason)
		x.cl.waitReleased(t, reason.String()+" after the drain")
		t.Logf("criterion 1, %v: aborted by the %s while the consumer read 4 of 8 pages: DRAINING, pins %v held on the "+
			"owners (%d bytes) and the room busy; a second consumer got ErrTransferAborted, no pages; the consumer's ack "+
			"ended it ABORTED (%v) and released every pin", reason, by, held, len(keys)*x.pns.PageBytes(), reason)
	}
	r, _, _ := x.published(t, "c1-unread", 104, 8)
	if st, err := x.prod.AbortRoom(ctx, r, client.UserCancel, "criterion 1, unread"); err != nil || st != pb.RoomState_ROOM_STATE_ABORTED {
		t.Fatalf("abort before any consumer took the pages: %v, %v; want ABORTED at once", st, err)
	}
	x.cl.waitReleased(t, "an attempt aborted before any consumer took it")
	x.nothingGranted(t, "c1-unread", client.ErrTransferAborted)
	t.Logf("criterion 1, unread: aborted before any consumer took the pages: ABORTED at once, every pin released, " +
		"a consumer then gets ErrTransferAborted")
}

// Criterion 2: duplicate completion, duplicate cancellation, a delayed
// drain and an old attempt's calls after the room's reuse leave the new
// attempt's state and pages unchanged.
func (x *transferPair) staleCalls(t *testing.T) {
	ctx := t.Context()
	const name = "c2"
	r1, keys1, _, g1 := x.loading(t, name, 200, 8, 8)
	if err := x.cons.AckRoom(ctx, g1.Room); err != nil {
		t.Fatal(err)
	}
	// Duplicate completion: a second ack is a no-op, a second publish is refused.
	if err := x.cons.AckRoom(ctx, g1.Room); err != nil {
		t.Fatalf("a duplicate ack: %v, want a no-op", err)
	}
	_, err := x.prod.PublishRoom(ctx, r1, x.pns, keys1, 128)
	refused(t, "a duplicate publish of a completed attempt", err, client.ErrTransferState)
	x.want(t, name, r1, pb.RoomState_ROOM_STATE_ACKED)

	r2, err := x.prod.OpenRoom(ctx, name)
	if err != nil || r2.Attempt <= r1.Attempt {
		t.Fatalf("reusing the room: %+v, %v", r2, err)
	}
	// The old attempt's calls after the reuse.
	stale := func(what string) {
		t.Helper()
		_, err := x.prod.PublishRoom(ctx, r1, x.pns, keys1, 128)
		refused(t, what+": the old attempt's publish", err, client.ErrStaleAttempt)
		refused(t, what+": the old attempt's ack", x.cons.AckRoom(ctx, g1.Room), client.ErrStaleAttempt)
		_, err = x.prod.AbortRoom(ctx, r1, client.UserCancel, "old")
		refused(t, what+": the old attempt's abort", err, client.ErrStaleAttempt)
		_, err = x.cons.AwaitRoom(ctx, name, r1.Attempt, x.cns)
		refused(t, what+": an await of the old attempt", err, client.ErrStaleAttempt)
	}
	stale("the new attempt open")
	if info := x.want(t, name, r2, pb.RoomState_ROOM_STATE_OPEN); info.GetPages() != 0 {
		t.Fatalf("the new attempt after the old one's calls: %v", info)
	}
	keys2 := putPages(t, x.pns, 201, 8)
	exp, err := x.prod.PublishRoom(ctx, r2, x.pns, keys2, 128)
	if err != nil {
		t.Fatal(err)
	}
	g2 := x.take(t, name, r2, 4)
	if !slices.Equal(g2.Keys, keys2) {
		t.Fatalf("the new attempt's grant holds other keys than its publish")
	}
	// Duplicate cancellation: the second abort (another reason) changes nothing.
	aborted := time.Now()
	x.abortLoading(t, x.prod, r2, client.UserCancel, "criterion 2")
	x.abortLoading(t, x.prod, r2, client.Timeout, "criterion 2, again")
	x.want(t, name, r2, pb.RoomState_ROOM_STATE_DRAINING, client.UserCancel)
	stale("the new attempt draining")
	// Delayed drain: the ack comes long after the abort, short of the pin's
	// TTL; at every look until then the room drains and is busy.
	looks := 0
	span := min(transferPinTTL/2, time.Until(exp.Add(-time.Second)))
	poll.Within(span, 100*time.Millisecond, func() bool {
		x.want(t, name, r2, pb.RoomState_ROOM_STATE_DRAINING, client.UserCancel)
		_, err := x.prod.OpenRoom(ctx, name)
		refused(t, "reopening a draining room", err, client.ErrRoomBusy)
		looks++
		return false // a span of looks, not a wait for a change
	})
	delay := time.Since(aborted)
	if err := x.cons.AckRoom(ctx, g2.Room); err != nil {
		t.Fatalf("the delayed drain ack: %v", err)
	}
	x.want(t, name, r2, pb.RoomState_ROOM_STATE_ABORTED, client.UserCancel)
	x.cl.waitReleased(t, "after the delayed drain")
	r3, err := x.prod.OpenRoom(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "the second attempt's ack after the reuse", x.cons.AckRoom(ctx, g2.Room), client.ErrStaleAttempt)
	stale("the third attempt open")
	x.want(t, name, r3, pb.RoomState_ROOM_STATE_OPEN)
	abort(t, x.prod, r3)
	t.Logf("criterion 2: a duplicate ack was a no-op and a duplicate publish refused (ErrTransferState); the old attempt's "+
		"publish, ack, abort and await after two reuses were refused (ErrStaleAttempt) and left the new attempt as it was "+
		"(open, then its own keys granted); a second abort (timeout after user_cancel) left it DRAINING for user_cancel; "+
		"the drain ack came %v after the abort (%d looks: draining and busy at each), then ABORTED and every pin released",
		delay.Round(time.Millisecond), looks)
}

// Criterion 3: the destination's allocation fails midway (the consumer
// gives up with consumer_failure after half the pages): once it drained,
// every source pin is rolled back, and the producer's KV stays readable,
// the prompt a prefix hit for a client that never took part.
func (x *transferPair) destinationFailure(t *testing.T) {
	ctx := t.Context()
	const name, pages = "c3", 16
	r, keys, _, g := x.loading(t, name, 300, pages, pages/2)
	const why = "no free KV blocks after 8 of 16 pages"
	held := x.abortLoading(t, x.cons, g.Room, client.ConsumerFailure, why)
	if err := x.cons.AckRoom(ctx, g.Room); err != nil {
		t.Fatalf("the consumer's drain ack: %v", err)
	}
	if info := x.want(t, name, r, pb.RoomState_ROOM_STATE_ABORTED, client.ConsumerFailure); !strings.Contains(info.GetDetail(), why) {
		t.Fatalf("the producer sees %q, want the consumer's reason", info.GetDetail())
	}
	x.cl.waitReleased(t, "after the failed consumer drained")
	_, fresh := x.cl.dial(t, 2, transferDesc)
	n, err := loaded(t, fresh, keys)
	lr, lerr := fresh.Lookup(ctx, keys, false, 0)
	if n != pages || lerr != nil || lr.HitPrefix != pages {
		t.Fatalf("the producer's pages after the rollback: %d of %d read (%v), hit prefix %d (%v)", n, pages, err, lr.HitPrefix, lerr)
	}
	t.Logf("criterion 3: the consumer failed to allocate after %d of %d pages and aborted (consumer_failure): DRAINING "+
		"with the source pins %v held until its ack; then ABORTED, every pin released (leases 0, 0 bytes pinned), and a "+
		"fresh client read all %d pages and hit all %d in a lookup", pages/2, pages, held, pages, lr.HitPrefix)
}

// Criterion 4: the producer is cancelled (preempted) while the consumer
// loads: its replay, a new attempt at the room, cannot proceed until the
// consumer drained (the room busy, the old attempt's publish refused),
// then succeeds with the same pages.
func (x *transferPair) replay(t *testing.T) {
	ctx := t.Context()
	const name, pages = "c4", 8
	r1, keys, _, g1 := x.loading(t, name, 400, pages, pages/2)
	held := x.abortLoading(t, x.prod, r1, client.ProducerFailure, "preempted")
	_, err := x.prod.OpenRoom(ctx, name)
	refused(t, "the replay's open before the drain", err, client.ErrRoomBusy)
	_, err = x.prod.PublishRoom(ctx, r1, x.pns, keys, 16*pages)
	refused(t, "the cancelled attempt's publish", err, client.ErrTransferAborted)
	if err := x.cons.AckRoom(ctx, g1.Room); err != nil {
		t.Fatalf("the consumer's drain ack: %v", err)
	}
	r2, exp := publish(t, x.prod, x.pns, name, keys)
	if r2.Attempt <= r1.Attempt || !exp.After(time.Now()) {
		t.Fatalf("the replay: attempt %d after %d, pin expiring %v", r2.Attempt, r1.Attempt, exp)
	}
	g2 := x.take(t, name, r2, pages)
	if err := x.cons.AckRoom(ctx, g2.Room); err != nil {
		t.Fatal(err)
	}
	x.want(t, name, r2, pb.RoomState_ROOM_STATE_ACKED)
	x.cl.waitReleased(t, "after the replay")
	t.Logf("criterion 4: the producer cancelled (producer_failure) while the consumer loaded: the replay's open was refused "+
		"(ErrRoomBusy) and the old attempt's publish too (ErrTransferAborted), its pins %v held, until the consumer's drain "+
		"ack; then the "+
		"replay opened attempt %d, published the same %d pages and the consumer loaded and acknowledged them", held, r2.Attempt, pages)
}

// Criterion 5: a missing acknowledgement does not let the room be reused
// early, and the recovery path has a deadline: a consumer process takes
// the pages and is killed mid-load, the producer times it out (an abort:
// a notification, not a proof that the reads are over); the room stays
// busy at every look until the pin's TTL, then is reusable. Its recovery
// time, from the consumer's death, is measured.
func (x *transferPair) missingAck(t *testing.T) {
	const name, pages = "c5", 8
	keys := putPages(t, x.pns, 500, pages)
	consumer := startParty(t, "", x.cl.addrs(), len(x.cl.nodes))
	r, exp := publish(t, x.prod, x.pns, name, keys)
	if a := consumer.must("await " + name + " 10s"); a.field("attempt") != int64(r.Attempt) {
		t.Fatalf("the consumer's grant: %s, want attempt %d", a.line, r.Attempt)
	}
	consumer.must("load 4")
	consumer.kill()
	died := time.Now()
	if st, err := x.prod.AbortRoom(t.Context(), r, client.Timeout, "the consumer went silent"); err != nil || st != pb.RoomState_ROOM_STATE_DRAINING {
		t.Fatalf("the producer's timeout abort: %v, %v; want DRAINING", st, err)
	}
	n, info := busyUntilEnded(t, x.prod, name, exp)
	ended := time.Now()
	if info.GetState() != pb.RoomState_ROOM_STATE_EXPIRED || info.GetReason() != client.Timeout {
		t.Fatalf("the unacknowledged attempt ended %v, want expired (aborted for timeout first)", info)
	}
	checkAtPinTTL(t, "the unacknowledged attempt", ended, exp)
	next, err := x.prod.OpenRoom(t.Context(), name)
	if err != nil {
		t.Fatalf("reopening the room after the pin's TTL: %v", err)
	}
	x.cl.waitReleased(t, "after the unacknowledged pin's TTL")
	abort(t, x.prod, next)
	t.Logf("criterion 5: a consumer process took %d pages, read 4 and was killed; the producer aborted it for timeout: "+
		"DRAINING, and %d opens were refused (busy) until the pin's TTL; recovery path: the room was reusable %v after "+
		"the consumer's death (its pin expired %v after it; pin TTL %v from the publish, rooms swept every %v), every pin "+
		"released", pages, n, ended.Sub(died).Round(time.Millisecond), exp.Sub(died).Round(time.Millisecond), transferPinTTL, transferSweep)
}

// Negative, wrong-version keys: a consumer whose namespace is the
// producer's but for the model revision is refused with
// ErrNamespaceMismatch naming model_revision, never handed the pages; the
// producer sees the refusal, the room node counts it, the pins go, and the
// consumer's namespace holds none of the prompt (no hit).
func (x *transferPair) wrongVersion(t *testing.T) {
	ctx := t.Context()
	const name, pages = "neg-version", 8
	d := transferDesc
	d.ModelRevision = "r2"
	other, err := x.cons.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	r, keys, _ := x.published(t, name, 600, pages)
	mismatches := x.cl.metric(t, "strata_room_refusals_total", `reason="mismatch"`)
	g, refusal := x.cons.AwaitRoom(ctx, name, 0, other)
	if !errors.Is(refusal, client.ErrNamespaceMismatch) || !strings.Contains(refusal.Error(), "model_revision") ||
		strings.Contains(refusal.Error(), "dtype") || len(g.Keys) != 0 {
		t.Fatalf("an await in another model revision: %d keys, %v; want ErrNamespaceMismatch naming model_revision alone", len(g.Keys), refusal)
	}
	info := x.want(t, name, r, pb.RoomState_ROOM_STATE_ABORTED, client.ConsumerFailure)
	if info.GetMismatches() != 1 || !strings.Contains(info.GetDetail(), "model_revision") {
		t.Fatalf("the producer sees %v, want the mismatch naming model_revision", info)
	}
	if m := x.cl.metric(t, "strata_room_refusals_total", `reason="mismatch"`); m != mismatches+1 {
		t.Fatalf("mismatch refusals counted %v, want %v", m, mismatches+1)
	}
	x.cl.waitReleased(t, "after the mismatch")
	theirs, _ := clusterPages(other, 600, pages)
	if theirs[0] == keys[0] {
		t.Fatal("the two revisions' namespaces give the prompt the same keys")
	}
	lr, err := other.Lookup(ctx, theirs, false, 0)
	n, gerr := loaded(t, other, keys)
	if err != nil || lr.HitPrefix != 0 || n != 0 {
		t.Fatalf("the consumer's own namespace: hit prefix %d (%v), %d of the producer's keys read (%v); want nothing", lr.HitPrefix, err, n, gerr)
	}
	t.Logf("negative, wrong-version keys: a consumer of model revision r2 awaiting an r1 producer's room got %q; the "+
		"producer saw ABORTED consumer_failure, mismatches %d, %q; counted on the room node; every pin released; the "+
		"consumer's namespace hit 0 of %d", refusal, info.GetMismatches(), info.GetDetail(), pages)
}

// Negative, truncated payload: a page whose put stream was cut halfway is
// never committed, and a publish naming it is refused (ErrPageNotPresent)
// pinning nothing: the attempt stays open, a consumer gets no grant.
func (x *transferPair) truncatedPayload(t *testing.T) {
	ctx := t.Context()
	const name, pages = "neg-truncated", 8
	keys, data := clusterPages(x.pns, 700, pages)
	if err := putChain(ctx, x.pns, keys[:pages-1], data[:pages-1]); err != nil {
		t.Fatal(err)
	}
	last := keys[pages-1]
	verdict := truncatedPut(t, x.cl.nodes[x.cl.nodeOf(t, x.prod, last)].p.Addr, x.pns, keys[pages-2], last, pages-1, data[pages-1])
	r, err := x.prod.OpenRoom(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.prod.PublishRoom(ctx, r, x.pns, keys, 16*pages)
	refused(t, "a publish naming the truncated page", err, client.ErrPageNotPresent)
	if leases, pinned := x.cl.leases(t), x.cl.metric(t, "strata_room_pinned_bytes"); sum(leases) != 0 || pinned != 0 {
		t.Fatalf("after the refused publish: leases %v, %v bytes pinned; want nothing pinned", leases, pinned)
	}
	x.want(t, name, r, pb.RoomState_ROOM_STATE_OPEN)
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	g, aerr := x.cons.AwaitRoom(actx, name, 0, x.cns)
	cancel()
	if aerr == nil || len(g.Keys) != 0 {
		t.Fatalf("a consumer's await of the refused publish: %d keys, %v; want no grant", len(g.Keys), aerr)
	}
	if n, _ := loaded(t, x.cns, keys[pages-1:]); n != 0 {
		t.Fatal("the truncated page is served")
	}
	abort(t, x.prod, r)
	t.Logf("negative, truncated payload: a put stream cut after half of page %d of %d (%s) left it uncommitted; the "+
		"publish naming it was refused: %v; nothing pinned, the attempt open, a consumer granted nothing", pages, pages, verdict, err)
}

// truncatedPut puts page key (child of parent, at depth) to the node at
// addr over a gRPC stream that carries half its bytes under a header and
// checksum of the whole page, as a producer that died mid-put leaves it,
// and returns what the node answered; the page must not commit.
func truncatedPut(t *testing.T, addr string, ns *client.Namespace, parent, key namespace.Key, depth int, data []byte) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stream, err := pb.NewStrataClient(testnode.Dial(t, addr)).Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := ns.ID()
	spec := &pb.PageSpec{Key: key[:], ParentKey: parent[:], Depth: uint32(depth), Size: uint64(len(data))}
	msg := &pb.PutRequest{NamespaceId: id[:], Header: &pb.PutHeader{Page: spec, Checksum: ns.Descriptor().Normalize().Checksum.Sum(data)},
		Data: data[:len(data)/2]}
	if err := stream.Send(msg); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return "the stream failed: " + err.Error()
	}
	for _, r := range resp.GetResults() {
		if r.GetStatus() == pb.CommitStatus_COMMIT_STATUS_COMMITTED {
			t.Fatalf("half a page committed: %v", resp.GetResults())
		}
	}
	return "the node answered " + resp.String()
}

// Negative, expired pin: a consumer that takes the pages and never
// acknowledges loses them at the pin's TTL: the attempt expires, its late
// ack and await are refused with ErrTransferExpired, every pin is
// released, and the pages stay readable as ordinary pages.
func (x *transferPair) expiredPin(t *testing.T) {
	ctx := t.Context()
	const name, pages = "neg-expired", 8
	r, keys, exp, g := x.loading(t, name, 800, pages, pages)
	_, info := busyUntilEnded(t, x.prod, name, exp)
	checkAtPinTTL(t, "the unacknowledged attempt", time.Now(), exp)
	if info.GetState() != pb.RoomState_ROOM_STATE_EXPIRED {
		t.Fatalf("the unacknowledged attempt ended %v, want expired", info)
	}
	refused(t, "an ack after the pin's TTL", x.cons.AckRoom(ctx, g.Room), client.ErrTransferExpired)
	_, err := x.cons.AwaitRoom(ctx, name, r.Attempt, x.cns)
	refused(t, "an await of the expired attempt", err, client.ErrTransferExpired)
	x.cl.waitReleased(t, "after the pin's TTL")
	if n, err := loaded(t, x.cns, keys); n != pages {
		t.Fatalf("after the pin's TTL %d of %d pages read, %v", n, pages, err)
	}
	t.Logf("negative, expired pin: a consumer took %d pages and never acknowledged; the attempt EXPIRED at the pin's TTL "+
		"(%v), its late ack and await got ErrTransferExpired, every pin was released, the pages read on", pages, transferPinTTL)
}
