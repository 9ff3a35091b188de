package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// leasesOn sums the leases and pins the nodes hold.
func leasesOn(t testing.TB, nodes []*clusterNode) int {
	t.Helper()
	n := 0
	for _, nd := range nodes {
		resp, err := pb.NewAdminClient(rawConn(t, nd.Addr())).NodeInfo(ctxT(t), &pb.NodeInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		n += int(resp.GetLeasesActive())
	}
	return n
}

// TestTransferAcrossCluster: a producer publishes pages spread over three
// nodes; a consumer with a client of its own awaits the room, reads every
// page and acknowledges; the pins on each owner hold until then.
func TestTransferAcrossCluster(t *testing.T) {
	nodes := startCluster(t, 3)
	prod, cons := dial(t, nodes[0].Addr(), ""), dial(t, nodes[2].Addr(), "")
	waitMembers(t, prod, "three alive members", alive(3))
	waitMembers(t, cons, "three alive members", alive(3))
	pns, cns := open(t, prod), open(t, cons)
	ctx := ctxT(t)

	room, err := prod.OpenRoom(ctx, "req-1")
	if err != nil || room.Attempt == 0 {
		t.Fatalf("open room: %+v, %v", room, err)
	}
	if _, err := prod.OpenRoom(ctx, "req-1"); !errors.Is(err, client.ErrRoomBusy) {
		t.Fatalf("second open: %v, want ErrRoomBusy", err)
	}
	keys := pns.PageKeys(tokens(24*16, 1))
	got := make(chan client.Grant, 1)
	go func() { // the consumer comes first and waits
		g, err := cons.AwaitRoom(ctx, "req-1", 0, cns)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	putAll(t, pns, keys)
	if owned := map[string]bool{}; len(keys) > 0 {
		for _, o := range owners(prod, keys) {
			owned[o] = true
		}
		if len(owned) < 2 {
			t.Fatalf("24 pages on %d node(s): the test needs them spread", len(owned))
		}
	}
	if _, err := prod.PublishRoom(ctx, room, pns, keys, len(keys)*16); err != nil {
		t.Fatal(err)
	}
	if n := leasesOn(t, nodes); n < 2 {
		t.Fatalf("after publish the owners hold %d pins, want one on each owner", n)
	}
	g := <-got
	if g.Room != room || len(g.Keys) != len(keys) || g.Tokens != len(keys)*16 || g.Bytes != uint64(len(keys)*cns.PageBytes()) {
		t.Fatalf("grant %+v, want room %+v with %d keys", g, room, len(keys))
	}
	bufs := buffers(len(keys), cns.PageBytes())
	found, err := cns.Get(ctx, g.Keys, bufs, nil)
	if err != nil || checkBytes(t, cns, keys, bufs, found) != len(keys) {
		t.Fatalf("the consumer read %v, %v", found, err)
	}
	if err := cons.AckRoom(ctx, g.Room); err != nil {
		t.Fatal(err)
	}
	if n := leasesOn(t, nodes); n != 0 {
		t.Fatalf("after the ack %d pins are held, want 0", n)
	}
	info, err := prod.RoomStatus(ctx, "req-1")
	if err != nil || info.GetState() != pb.RoomState_ROOM_STATE_ACKED || info.GetPages() != 24 {
		t.Fatalf("the producer sees %v, %v", info, err)
	}
	// Late calls of the ended attempt change nothing; the room is reusable.
	next, err := prod.OpenRoom(ctx, "req-1")
	if err != nil || next.Attempt <= room.Attempt {
		t.Fatalf("reopen: %+v, %v", next, err)
	}
	if err := cons.AckRoom(ctx, g.Room); !errors.Is(err, client.ErrStaleAttempt) {
		t.Fatalf("late ack: %v, want ErrStaleAttempt", err)
	}
	if _, err := prod.PublishRoom(ctx, room, pns, keys, 16); !errors.Is(err, client.ErrStaleAttempt) {
		t.Fatalf("late publish: %v, want ErrStaleAttempt", err)
	}
	if info, _ := prod.RoomStatus(ctx, "req-1"); info.GetAttempt() != next.Attempt || info.GetState() != pb.RoomState_ROOM_STATE_OPEN {
		t.Fatalf("the successor after late calls: %v", info)
	}
}

// TestTransferRefusals: a consumer in another namespace is refused with
// the differing fields and the producer sees it; a publish naming a page
// not stored pins nothing; an abort before publish makes the publish
// non-publishing; an unacknowledged pin expires and is released.
func TestTransferRefusals(t *testing.T) {
	nd := addNodeWith(t, nil, func(c *node.Config) { c.Transfer.PinTTL = 300 * time.Millisecond })
	c := dial(t, nd.Addr(), "")
	ns := open(t, c)
	ctx := ctxT(t)
	keys := ns.PageKeys(tokens(4*16, 2))
	putAll(t, ns, keys)

	t.Run("namespace mismatch", func(t *testing.T) {
		room, _ := c.OpenRoom(ctx, "mismatch")
		if _, err := c.PublishRoom(ctx, room, ns, keys, 64); err != nil {
			t.Fatal(err)
		}
		d := llama()
		d.DType, d.ModelRevision = "fp16", "r2"
		other, err := c.Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.AwaitRoom(ctx, "mismatch", 0, other)
		if !errors.Is(err, client.ErrNamespaceMismatch) || !strings.Contains(err.Error(), "dtype") || !strings.Contains(err.Error(), "model_revision") {
			t.Fatalf("await from another namespace: %v, want ErrNamespaceMismatch naming dtype and model_revision", err)
		}
		info, _ := c.RoomStatus(ctx, "mismatch")
		if info.GetState() != pb.RoomState_ROOM_STATE_ABORTED || info.GetReason() != client.ConsumerFailure ||
			info.GetMismatches() != 1 || !strings.Contains(info.GetDetail(), "dtype") {
			t.Fatalf("the producer sees %v", info)
		}
	})
	t.Run("page not stored", func(t *testing.T) {
		room, _ := c.OpenRoom(ctx, "missing")
		missing := append(append([]namespace.Key(nil), keys...), namespace.Key{0xee})
		if _, err := c.PublishRoom(ctx, room, ns, missing, 80); !errors.Is(err, client.ErrPageNotPresent) {
			t.Fatalf("publish naming a page not stored: %v, want ErrPageNotPresent", err)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := c.AwaitRoom(short, "missing", 0, ns); err == nil || errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("await of a failed publish: %v, want its deadline", err)
		}
	})
	t.Run("abort before publish", func(t *testing.T) {
		room, _ := c.OpenRoom(ctx, "aborted")
		if st, err := c.AbortRoom(ctx, room, client.UserCancel, "client went away"); err != nil || st != pb.RoomState_ROOM_STATE_ABORTED {
			t.Fatalf("abort: %v, %v", st, err)
		}
		if _, err := c.PublishRoom(ctx, room, ns, keys, 64); !errors.Is(err, client.ErrTransferAborted) {
			t.Fatalf("publish after abort: %v, want ErrTransferAborted", err)
		}
		if _, err := c.AwaitRoom(ctx, "aborted", room.Attempt, ns); !errors.Is(err, client.ErrTransferAborted) {
			t.Fatalf("await of an aborted attempt: %v, want ErrTransferAborted", err)
		}
	})
	t.Run("pin expires", func(t *testing.T) {
		room, _ := c.OpenRoom(ctx, "expires")
		if _, err := c.PublishRoom(ctx, room, ns, keys, 64); err != nil {
			t.Fatal(err)
		}
		g, err := c.AwaitRoom(ctx, "expires", 0, ns)
		if err != nil {
			t.Fatal(err)
		}
		nodes := []*clusterNode{nd}
		poll.Until(t, 10*time.Second, 20*time.Millisecond, "the unacknowledged pin expired and released", func() bool {
			info, err := c.RoomStatus(ctx, "expires")
			return err == nil && info.GetState() == pb.RoomState_ROOM_STATE_EXPIRED && leasesOn(t, nodes) == 0
		})
		if err := c.AckRoom(ctx, g.Room); !errors.Is(err, client.ErrTransferExpired) {
			t.Fatalf("ack after expiry: %v, want ErrTransferExpired", err)
		}
	})
}

// TestTransferRoomNodeCloses: a consumer waiting on a room hears at once
// when the room's node goes away, not at its deadline.
func TestTransferRoomNodeCloses(t *testing.T) {
	nd := addNodeWith(t, nil, nil)
	c := dial(t, nd.Addr(), "")
	ns := open(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.AwaitRoom(ctx, "waits", 0, ns)
		done <- err
	}()
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the consumer waits on the node", func() bool {
		return nd.Rooms().Stats().Waiting == 1
	})
	began := time.Now()
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, client.ErrUnavailable) || time.Since(began) > 20*time.Second {
		t.Fatalf("await across the room node's close: %v after %v, want ErrUnavailable well before the deadline", err, time.Since(began))
	}
}
