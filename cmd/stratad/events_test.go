package main

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/internal/testing/poll"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// replayIndex is a router's index kept from one node's stream through its
// replay socket: the blocks its events say the node holds.
type replayIndex struct {
	held   map[string]bool
	topics map[string]int
	next   uint64 // the next sequence number of the stream now followed
}

// catchUp applies what the replay socket at addr holds from ix.next on.
func (ix *replayIndex) catchUp(t *testing.T, addr string) {
	t.Helper()
	ms, err := events.Replay(context.Background(), addr, "acme", "acme-token", ix.next)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		ix.next = m.Seq + 1
		for _, e := range m.Batch.Events {
			ix.topics[m.Topic]++
			switch e.Kind {
			case events.Stored:
				ix.held[string(e.Hashes[0])] = true
			case events.Removed:
				delete(ix.held, string(e.Hashes[0]))
			case events.Cleared:
				clear(ix.held)
			}
		}
	}
}

// acmeStream is the replay address of tenant acme's stream on the node at
// addr, the node's incarnation and its ID, as NodeInfo gives them.
func acmeStream(t *testing.T, ctx context.Context, addr string) (replay string, inc uint64, node string) {
	t.Helper()
	info, err := adminClient(t, addr).NodeInfo(ctx, &pb.NodeInfoRequest{})
	if err != nil || len(info.GetEventStreams()) != 1 {
		t.Fatalf("NodeInfo: %v, streams %v", err, info.GetEventStreams())
	}
	s := info.GetEventStreams()[0]
	return s.GetReplayAddress(), s.GetIncarnation(), info.GetNodeId()
}

// TestEventsAfterKill: a consumer's index of a real stratad's stream
// matches the node's keys after puts, and again after the node is killed
// with SIGKILL and started on its data directory: the new process clears
// the old incarnation's topic and announces what it recovered from SSD.
func TestEventsAfterKill(t *testing.T) {
	data := t.TempDir()
	args := []string{"--tenant-token", "acme=acme-token", "--events", "acme=127.0.0.1:0,127.0.0.1:0"}
	cmd, addr := startSSDNode(t, data, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer acme-token")
	d := ssdDescriptor
	d.Tenant = "acme"
	_, ns := dialOpen(t, ctx, addr, client.Options{Token: "acme-token"}, 0, d)
	toks := make([]uint32, 40*16)
	for i := range toks {
		toks[i] = uint32(i)
	}
	keys, data0 := chainOf(ns, toks)
	if _, err := ns.Put(ctx, client.ChainPages(keys, data0)); err != nil {
		t.Fatal(err)
	}
	nsID := ns.ID()
	listed := func(addr string) []string {
		var out []string
		resp, err := adminClient(t, addr).ListKeys(ctx, &pb.ListKeysRequest{NamespaceId: nsID[:], Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range resp.GetKeys() {
			out = append(out, string(k.GetKey()))
		}
		slices.Sort(out)
		return out
	}
	ix := &replayIndex{held: map[string]bool{}, topics: map[string]int{}}
	matches := func(addr, replay string) func() bool {
		return func() bool {
			ix.catchUp(t, replay)
			var got []string
			for h := range ix.held {
				got = append(got, h)
			}
			slices.Sort(got)
			return slices.Equal(got, listed(addr))
		}
	}
	replay, inc, id := acmeStream(t, ctx, addr)
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the index matching the node", matches(addr, replay))
	if len(ix.held) != len(keys) {
		t.Fatalf("%d blocks held, want the %d put", len(ix.held), len(keys))
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	ix.held["a block the killed process announced and the new one no longer has"] = true
	_, addr = startSSDNode(t, data, args...)
	replay, inc2, _ := acmeStream(t, ctx, addr)
	ix.next = 0 // a new process: a new stream
	oldTopic := events.Topic(id, inc, nsID.String())
	if !poll.Within(20*time.Second, 5*time.Millisecond, func() bool {
		return matches(addr, replay)() && ix.topics[oldTopic] == len(keys)+1
	}) {
		t.Fatalf("after the restart: %d blocks held, the node lists %d; topics %v (the old one %s)",
			len(ix.held), len(listed(addr)), ix.topics, oldTopic)
	}
	if inc2 != inc+1 || len(ix.held) != len(keys) {
		t.Fatalf("incarnation %d then %d; %d blocks held after the restart, want %d", inc, inc2, len(ix.held), len(keys))
	}
}
