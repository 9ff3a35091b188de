package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestTransferFaults is issue 40's faults with real processes, on three
// stratad processes: the consumer killed with kill -9 halfway through its
// load, the producer killed between its puts and its publish, and the
// room's node killed with kill -9 while a consumer waits on it. Each
// prints its outcome. The fourth fault, a partition between consumer and
// room node, is TestChaosTransferPartition (build tag chaos: it needs
// network namespaces).
func TestTransferFaults(t *testing.T) {
	x := startTransferPair(t)
	t.Run("consumer_killed_mid_load", x.consumerKilledMidLoad)
	t.Run("producer_killed_before_publish", x.producerKilledBeforePublish)
	t.Run("room_node_killed_while_consumer_waits", x.roomNodeKilled) // last: it kills a node (and restarts it)
}

// consumerKilledMidLoad: a consumer process takes a room's pages, loads
// half and is killed. Nobody acknowledges: the room stays busy (its pins
// held: the dead consumer's reads are not proven over) until the pin's
// TTL, then the attempt expires, every pin is released, the room is
// reusable and the pages stay, ordinary pages again.
func (x *transferPair) consumerKilledMidLoad(t *testing.T) {
	ctx, cl, prod, pns := t.Context(), x.cl, x.prod, x.pns
	const name, pages = "consumer-killed", 24
	keys := putPages(t, pns, 20, pages)
	owners := ownersOf(t, cl, prod, keys)
	consumer := startParty(t, "", cl.addrs(), len(cl.nodes))
	room, exp := publish(t, prod, pns, name, keys)
	if a := consumer.must("await " + name + " 10s"); a.field("attempt") != int64(room.Attempt) || a.field("keys") != pages {
		t.Fatalf("the consumer's grant: %s, want attempt %d with %d keys", a.line, room.Attempt, pages)
	}
	if a := consumer.must("load 12"); a.field("loaded") != 12 {
		t.Fatalf("the consumer loaded %s, want 12 pages", a.line)
	}
	if held := cl.leases(t); sum(held) != len(owners) {
		t.Fatalf("while the consumer loads the nodes hold leases %v, want one pin on each of the %d owners", held, len(owners))
	}
	pinned := cl.metric(t, "strata_room_pinned_bytes")
	if want := float64(pages * pns.PageBytes()); pinned != want {
		t.Fatalf("while the consumer loads the rooms pin %v bytes, want %v", pinned, want)
	}

	consumer.kill()
	died := time.Now()
	refused, info := busyUntilEnded(t, prod, name, exp)
	ended := time.Now()
	if info.GetState() != pb.RoomState_ROOM_STATE_EXPIRED || info.GetAttempt() != room.Attempt {
		t.Fatalf("the dead consumer's attempt ended %v, want attempt %d expired", info, room.Attempt)
	}
	checkAtPinTTL(t, "the dead consumer's room", ended, exp)
	next, err := prod.OpenRoom(ctx, name)
	if err != nil || next.Attempt <= room.Attempt {
		t.Fatalf("reopening the expired room: %+v, %v", next, err)
	}
	cl.waitReleased(t, "after the dead consumer's pin expired")
	released := time.Now()
	if n, err := loaded(t, pns, keys); n != pages {
		t.Fatalf("after the expiry %d of %d pages read, %v", n, pages, err)
	}
	abort(t, prod, next)
	t.Logf("fault: consumer killed mid-load: a consumer process took %d pages (pinned on %d owners, %v bytes), loaded 12 "+
		"and was killed with SIGKILL; the room stayed loading and refused %d opens (busy) until its pin expired %v after the "+
		"kill (pin TTL %v from the publish); it was EXPIRED and reusable %v after the kill (attempt %d, then %d); leases, "+
		"pins and pinned bytes 0 on every node %v after the kill; every page still read",
		pages, len(owners), pinned, refused, exp.Sub(died).Round(time.Millisecond), transferPinTTL,
		ended.Sub(died).Round(time.Millisecond), room.Attempt, next.Attempt, released.Sub(died).Round(time.Millisecond))
}

// producerKilledBeforePublish: a producer process opens a room, puts its
// pages and is killed before it publishes. A consumer waiting on the room
// hears ErrTransferExpired at the open TTL (not its own deadline, not
// never), the room is reusable, and the pages stay for prefix reuse.
func (x *transferPair) producerKilledBeforePublish(t *testing.T) {
	ctx, cl, prod, pns, cons, cns := t.Context(), x.cl, x.prod, x.pns, x.cons, x.cns
	const name, pages, seed = "producer-killed", 24, 30
	producer := startParty(t, "", cl.addrs(), len(cl.nodes))
	attempt := uint64(producer.must("open " + name).field("attempt"))
	producer.must("put 30 24")
	keys, _ := clusterPages(pns, seed, pages)

	const deadline = 30 * time.Second
	done := startAwait(t, cl, cons, cns, name, 0, deadline)
	producer.kill()
	killed := time.Now()
	awaitErr := awaitEnd(t, done, deadline, killed)
	ended := time.Now()
	info := roomState(t, prod, name)
	opened := time.UnixMilli(info.GetOpenedUnixMs())
	if !errors.Is(awaitErr, client.ErrTransferExpired) || info.GetState() != pb.RoomState_ROOM_STATE_EXPIRED ||
		info.GetAttempt() != attempt || info.GetReason() != client.ProducerFailure {
		t.Fatalf("the consumer's await after the producer's death: %v; the room %v; want ErrTransferExpired, attempt %d "+
			"expired for producer_failure", awaitErr, info, attempt)
	}
	if waited := ended.Sub(opened); waited < transferOpenTTL || waited > transferOpenTTL+transferSweep+transferSlack {
		t.Fatalf("the await ended %v after the open, want the open TTL %v (swept every %v)", waited, transferOpenTTL, transferSweep)
	}
	next, err := prod.OpenRoom(ctx, name)
	if err != nil || next.Attempt <= attempt {
		t.Fatalf("reopening the expired room: %+v, %v", next, err)
	}
	n, err := loaded(t, pns, keys)
	if n != pages {
		t.Fatalf("the dead producer's pages: %d of %d read, %v", n, pages, err)
	}
	lr, err := cns.Lookup(ctx, keys, false, 0)
	if err != nil || lr.HitPrefix != pages {
		t.Fatalf("a lookup of the dead producer's prompt: hit prefix %d of %d, %v", lr.HitPrefix, pages, err)
	}
	abort(t, prod, next)
	cl.waitReleased(t, "after the producer's attempt expired")
	t.Logf("fault: producer killed before publishing: a producer process opened room %s (attempt %d), put %d pages and "+
		"was killed with SIGKILL; the waiting consumer's await (deadline %v) ended %v after the kill, %v after the open "+
		"(open TTL %v): %v; the room was reusable at once (attempt %d); every page read and a lookup hit all %d (prefix reuse)",
		name, attempt, pages, deadline, ended.Sub(killed).Round(time.Millisecond), ended.Sub(opened).Round(time.Millisecond),
		transferOpenTTL, awaitErr, next.Attempt, lr.HitPrefix)
}

// roomNodeKilled: the node that keeps two rooms' records is killed with
// kill -9, one room published (its pages pinned on every owner), the other
// open with a consumer waiting on it. The consumer hears ErrUnavailable at
// once, not at its deadline nor the pin's TTL, and recomputes; the pages
// on the other nodes are read on; their pins expire at the pin's TTL, since
// the node that would release them is gone; restarted, the node serves
// the producer's pages it held again, and knows no room (rooms live in
// memory).
func (x *transferPair) roomNodeKilled(t *testing.T) {
	ctx, cl, prod, pns, cons, cns := t.Context(), x.cl, x.prod, x.pns, x.cons, x.cns
	const victim, pages = 2, 24
	published, waited := cl.roomOn(t, prod, "owner-killed-published", victim), cl.roomOn(t, prod, "owner-killed-waiting", victim)
	keys := putPages(t, pns, 40, pages)
	var others []namespace.Key // pages the other nodes own
	for _, k := range keys {
		if cl.nodeOf(t, prod, k) != victim {
			others = append(others, k)
		}
	}
	if len(others) == 0 || len(others) == pages {
		t.Fatalf("%d of %d pages on the other nodes: the test needs them on the victim too", len(others), pages)
	}
	room, exp := publish(t, prod, pns, published, keys)
	open, err := prod.OpenRoom(ctx, waited)
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 30 * time.Second
	done := startAwait(t, cl, cons, cns, waited, open.Attempt, deadline)
	held := cl.leases(t)
	if sum(held) != len(ownersOf(t, cl, prod, keys)) {
		t.Fatalf("the published room's pins: leases %v on the nodes, want one on each owner", held)
	}

	cl.kill(victim)
	killed := time.Now()
	awaitErr := awaitEnd(t, done, deadline, killed)
	heard := time.Since(killed)
	if !errors.Is(awaitErr, client.ErrUnavailable) || heard > 2*time.Second {
		t.Fatalf("the consumer's await across its room node's kill: %v after %v, want ErrUnavailable within 2s", awaitErr, heard)
	}
	n, err := loaded(t, cns, others)
	if n != len(others) {
		t.Fatalf("after the kill %d of the other nodes' %d pages read, %v", n, len(others), err)
	}
	survivors := cl.leases(t)
	cl.waitReleased(t, "the survivors' pins of the dead node's room")
	released := time.Since(killed)
	if time.Now().Before(exp) {
		t.Fatalf("the survivors' pins were gone %v after the kill, before their TTL (%v from the publish)", released, transferPinTTL)
	}

	cl.start(t, victim)
	waitAlive(t, cons, 3, 30*time.Second)
	waitAlive(t, prod, 3, 30*time.Second)
	n = 0
	if !poll.Within(20*time.Second, 100*time.Millisecond, func() bool { n, _ = loaded(t, cns, keys); return n == pages }) {
		t.Fatalf("after the victim's restart %d of %d pages read", n, pages)
	}
	if _, err := prod.RoomStatus(ctx, published); !errors.Is(err, client.ErrNoRoom) {
		t.Fatalf("the restarted node's record of room %s: %v, want ErrNoRoom", published, err)
	}
	t.Logf("fault: room node killed: the node keeping rooms %s (published, attempt %d: pins %v on the nodes) and %s "+
		"(a consumer waiting, deadline %v) was killed with SIGKILL; the consumer heard it %v after the kill: %v; the other "+
		"nodes' %d of %d pages read on; their pins (%v after the kill) expired %v after it (pin TTL %v from the publish); "+
		"restarted, the node served its %d pages again, all %d read; it knows no room (ErrNoRoom): the producer reopens",
		published, room.Attempt, held, waited, deadline, heard.Round(time.Microsecond), awaitErr, len(others), pages,
		survivors, released.Round(time.Millisecond), transferPinTTL, pages-len(others), pages)
}

// ownersOf is the nodes that own keys, as indices.
func ownersOf(t *testing.T, cl *transferCluster, c *client.Client, keys []namespace.Key) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	for _, k := range keys {
		out[cl.nodeOf(t, c, k)] = true
	}
	if len(out) < 2 {
		t.Fatalf("%d pages on %d node(s): the test needs them spread", len(keys), len(out))
	}
	return out
}

// publish opens room and publishes keys (committed pages of ns, 16 tokens
// each); it returns the attempt and when its pin expires.
func publish(t *testing.T, c *client.Client, ns *client.Namespace, room string, keys []namespace.Key) (client.Room, time.Time) {
	t.Helper()
	r, err := c.OpenRoom(t.Context(), room)
	if err != nil {
		t.Fatalf("opening room %s: %v", room, err)
	}
	exp, err := c.PublishRoom(t.Context(), r, ns, keys, 16*len(keys))
	if err != nil {
		t.Fatalf("publishing room %s: %v", room, err)
	}
	return r, exp
}

// abort ends an attempt the test is done with.
func abort(t *testing.T, c *client.Client, r client.Room) {
	t.Helper()
	if _, err := c.AbortRoom(t.Context(), r, client.UserCancel, "the test is done with it"); err != nil {
		t.Fatalf("aborting room %s: %v", r.Name, err)
	}
}

// busyUntilEnded looks at room until its attempt is over (at most a pin
// TTL and a sweep, and slack), checking at each look before the pin's
// expiry exp that the room is refused to a new producer (after it, the
// node's sweep may end the attempt between two calls); it returns the
// refusals and the ended record.
func busyUntilEnded(t *testing.T, c *client.Client, room string, exp time.Time) (int, *client.RoomInfo) {
	t.Helper()
	refused := 0
	var info *client.RoomInfo
	poll.Until(t, time.Until(exp)+transferSweep+5*time.Second, 50*time.Millisecond, "room "+room+"'s attempt ended", func() bool {
		if info = roomState(t, c, room); info.GetState() >= pb.RoomState_ROOM_STATE_ACKED {
			return true
		}
		if time.Until(exp) < 200*time.Millisecond {
			return false
		}
		if r, err := c.OpenRoom(t.Context(), room); !errors.Is(err, client.ErrRoomBusy) {
			t.Fatalf("room %s (%v) reopened %v before its pin's expiry: %+v, %v; want ErrRoomBusy", room, info.GetState(), time.Until(exp), r, err)
		}
		refused++
		return false
	})
	return refused, info
}

// checkAtPinTTL fails t unless an attempt seen ended at ended ended at its
// pin's expiry exp, within a sweep and slack.
func checkAtPinTTL(t *testing.T, what string, ended, exp time.Time) {
	t.Helper()
	if ended.Before(exp) || ended.Sub(exp) > transferSweep+transferSlack {
		t.Fatalf("%s ended %v after its pin's expiry, want in [0, %v]", what, ended.Sub(exp), transferSweep+transferSlack)
	}
}

// startAwait starts c's await (deadline) of room's attempt (0: any) in
// the background, and returns its error's channel once the room's node
// counts the consumer waiting.
func startAwait(t *testing.T, cl *transferCluster, c *client.Client, ns *client.Namespace, room string, attempt uint64,
	deadline time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		_, err := c.AwaitRoom(ctx, room, attempt, ns)
		done <- err
	}()
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the consumer waiting on room "+room, func() bool {
		return cl.metric(t, "strata_room_waiting_consumers") == 1
	})
	return done
}

// awaitEnd returns the background await's error; it fails t if the await
// outlives its deadline by 10 s after the fault at faulted.
func awaitEnd(t *testing.T, done <-chan error, deadline time.Duration, faulted time.Time) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline + 10*time.Second):
		t.Fatalf("the consumer's await did not end %v after the fault", time.Since(faulted))
	}
	return nil
}
