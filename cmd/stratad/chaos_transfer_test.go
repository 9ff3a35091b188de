//go:build chaos

package main

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/scrape"
	"github.com/stratakv/strata/internal/testing/testnode"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestChaosTransferPartition is issue 40's fourth transfer fault: a
// partition between a consumer and the room's node. etcd, three nodes and
// the producer run in the first network namespace runPartitioned makes,
// the consumer, a party process (TestTransferParty), in the second; the
// fault sets the second namespace's end of the link down (packets vanish:
// a silent partition, the consumer cut off from every node).
//
// Two experiments, each printed. The consumer's await during the cut
// fails within its deadline; healed, a new attempt is granted, loaded and
// acknowledged. Then a grant lost in the cut: the consumer waits on the
// node, the link goes down, the producer publishes and the node hands the
// grant to a consumer it cannot tell is gone; the attempt is Loading with
// nobody to acknowledge it, so the room is safe but busy until the pin's
// TTL (the producer's abort does not free it), and the consumer, healed,
// cannot take the attempt again. Both end with a new attempt loaded.
func TestChaosTransferPartition(t *testing.T) { runPartitioned(t, "TestChaosTransferPartitionInside") }

// partPinTTL is the nodes' --transfer-pin-ttl: longer than the lost
// grant's cut and the consumer's reconnection after it, so that the
// consumer comes back while the attempt is still loading.
const partPinTTL = 8 * time.Second

// TestChaosTransferPartitionInside is not a test on its own:
// TestChaosTransferPartition runs it inside its first network namespace.
func TestChaosTransferPartitionInside(t *testing.T) {
	nsB, linkB, bin := os.Getenv(envPartNetnsB), os.Getenv(envPartLinkB), os.Getenv(envPartStratad)
	if nsB == "" {
		t.Skip("runs only inside the network namespace TestChaosTransferPartition makes")
	}
	etcdURL := freeEtcdURL(t)
	startEtcd(t, t.TempDir(), etcdURL)
	nodes := make([]*chaosNode, 3)
	var seeds []string
	for i := range nodes {
		// Every listener on the veth address, which the consumer reaches;
		// no shared-memory socket, which would reach across the cut.
		listen := net.JoinHostPort(partHostA, strconv.Itoa(testnode.FreePort(t)))
		nodes[i] = &chaosNode{bin: bin, dir: t.TempDir(), etcd: etcdURL, listen: listen,
			extra: []string{"--gossip-addr", partHostA + ":0", "--shm-socket", "off",
				"--transfer-pin-ttl", partPinTTL.String(), "--transfer-open-ttl", "1m"}}
		nodes[i].start(t)
		seeds = append(seeds, nodes[i].addr)
	}
	ctx := t.Context()
	prod, pns := dialOpen(t, ctx, seeds[0], client.Options{Seeds: seeds[1:], NoShm: true}, len(nodes), transferDesc)
	const room, pages = "partitioned", 16
	keys := putPages(t, pns, 900, pages)
	consumer := startParty(t, nsB, seeds, len(nodes))
	link := func(state string) {
		if out, err := exec.Command("ip", "-n", nsB, "link", "set", linkB, state).CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s link set %s %s: %v: %s", nsB, linkB, state, err, out)
		}
	}
	waiting := func() float64 {
		var n float64
		for _, nd := range nodes {
			n += scrape.Sum(scrape.Metrics(t, nd.admin), "strata_room_waiting_consumers")
		}
		return n
	}
	// loads is the consumer's part once healed: the new attempt r granted
	// (within 30 s: the consumer's connections come back first), loaded
	// and acknowledged; it returns how long after healed.
	loads := func(r client.Room, healed time.Time) time.Duration {
		t.Helper()
		if a := consumer.must("await " + room + " 30s"); a.field("attempt") != int64(r.Attempt) {
			t.Fatalf("the consumer's await after the heal: %s, want attempt %d", a.line, r.Attempt)
		}
		if a := consumer.must("load 16"); a.field("loaded") != pages {
			t.Fatalf("the consumer loaded %s, want %d pages", a.line, pages)
		}
		consumer.must("ack")
		took := time.Since(healed)
		if info := roomState(t, prod, room); info.GetAttempt() != r.Attempt || info.GetState() != pb.RoomState_ROOM_STATE_ACKED {
			t.Fatalf("the new attempt after the consumer's ack: %v", info)
		}
		return took
	}

	// The consumer's await during the cut.
	r1, err := prod.OpenRoom(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 3 * time.Second
	link("down")
	a := consumer.do("await " + room + " " + deadline.String())
	if a.ok || time.Duration(a.ms)*time.Millisecond > deadline+chaosSlack {
		link("up")
		t.Fatalf("the consumer's await (deadline %v) during the cut: %s; want a failure within the deadline", deadline, a.line)
	}
	link("up")
	healed := time.Now()
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "no consumer left waiting on the nodes", func() bool { return waiting() == 0 })
	if st, err := prod.AbortRoom(ctx, r1, client.Timeout, "the consumer is unreachable"); err != nil || st != pb.RoomState_ROOM_STATE_ABORTED {
		t.Fatalf("aborting the attempt nobody took: %v, %v", st, err)
	}
	r2, _ := publish(t, prod, pns, room, keys)
	took := loads(r2, healed)
	t.Logf("chaos transfer partition: the consumer's await (deadline %v) during the cut failed after %d ms (%s); after the "+
		"link came up the producer aborted the unpublished attempt and published attempt %d, which the consumer took, loaded "+
		"(%d pages) and acknowledged %v after the heal", deadline, a.ms, a.class, r2.Attempt, pages, took.Round(time.Millisecond))

	// A grant lost in the cut.
	r3, err := prod.OpenRoom(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	const lostDeadline = 2 * time.Second
	consumer.send("await " + room + " " + lostDeadline.String())
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the consumer waiting on the room", func() bool { return waiting() == 1 })
	link("down")
	exp, err := prod.PublishRoom(ctx, r3, pns, keys, 16*pages)
	if err != nil {
		link("up")
		t.Fatal(err)
	}
	granted := roomState(t, prod, room)
	lost := consumer.answer()
	link("up")
	healed = time.Now()
	if granted.GetState() != pb.RoomState_ROOM_STATE_LOADING || lost.ok {
		t.Fatalf("the publish into the cut: room %v, the consumer's await %s; want the grant handed out (loading) and lost", granted, lost.line)
	}
	// Healed, the consumer's next await names the same taker (its client):
	// it is handed the grant it never received, instead of the room
	// waiting for the pin's TTL.
	took = loads(r3, healed)
	leases := -1
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "every pin released", func() bool {
		leases = 0
		for _, nd := range nodes {
			leases += int(nodeInfo(t, nd.addr).GetLeasesActive())
		}
		return leases == 0
	})
	t.Logf("chaos transfer partition, a grant lost in the cut: the producer published attempt %d while the waiting "+
		"consumer was cut off; the node handed it the grant (LOADING) and the consumer's await failed after %d ms (%s); "+
		"healed, the consumer's next await (the same taker) was handed that grant again, loaded and acknowledged %v "+
		"after the heal, well before the pin's TTL (%v from the publish, at %v)", r3.Attempt, lost.ms, lost.class,
		took.Round(time.Millisecond), partPinTTL, exp.Format(time.TimeOnly))
}
