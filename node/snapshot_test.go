package node_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestSnapshotThenStream: a consumer that joins a tenant's stream late,
// while puts run, takes the namespace's dump (Admin.SnapshotKeys, a few
// keys per message) and then applies the stream from the dump's sequence
// number: its index equals the node's ListKeys, every sequence number from
// the dump's on reached it, and no block was announced to it twice (each
// key's BlockStored count, the dump's included, is 1).
func TestSnapshotThenStream(t *testing.T) {
	n := testnode.Start(t, node.Config{Tiers: []string{"host"}, HostBytes: 4096 * 16 << 10, TenantTokens: tenantTokens,
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0", Replay: "127.0.0.1:0"}}}})
	d := desc
	d.Tenant = "acme"
	_, ns := openNS(t, n.Addr(), client.Options{Token: "acme-token"}, d)
	put := func(i int) {
		_, pages := chain(ns, 8*i, 8)
		if _, err := ns.Put(context.Background(), pages); err != nil {
			t.Error(err)
		}
	}
	for i := range 10 { // before the consumer
		put(i)
	}

	var puts atomic.Int64 // chains put by the writer below
	stop, wrote := make(chan struct{}), make(chan struct{})
	go func() { // puts while the consumer joins, and ten chains after
		defer close(wrote)
		for i, after := 10, 0; after < 10 && i < 400; i++ {
			select {
			case <-stop:
				after++
			default:
			}
			put(i)
			puts.Add(1)
		}
	}()
	poll.Until(t, 10*time.Second, time.Millisecond, "the writer's first puts", func() bool { return puts.Load() >= 3 })

	pub, replay := n.EventsAddrs("acme")
	sub, err := events.Subscribe(context.Background(), pub, "acme", "acme-token", "kv@")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[uint64]events.Message{} // guarded by mu: batches received live
	recvd := make(chan struct{})
	go func() {
		defer close(recvd)
		for {
			m, err := sub.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			got[m.Seq] = m
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { sub.Close(); <-recvd })

	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer acme-token")
	admin := pb.NewAdminClient(testnode.Dial(t, n.Addr()))
	id := ns.ID()
	dump, err := admin.SnapshotKeys(ctx, &pb.SnapshotKeysRequest{NamespaceId: id[:], PageSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{} // the consumer's index: BlockStored seen per key
	var seq, total uint64
	var topic string
	messages, roots := 0, 0
	for {
		r, err := dump.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		messages++
		seq, total, topic = r.GetNextSeq(), r.GetTotal(), r.GetTopic()
		for _, k := range r.GetKeys() {
			count[string(k.GetKey())]++
			if k.GetTier() != pb.Tier_TIER_HOST {
				t.Fatalf("dumped key %x in tier %v", k.GetKey(), k.GetTier())
			}
			if len(k.GetParentKey()) == 0 {
				roots++ // the first page of each put
			}
		}
	}
	close(stop)
	<-wrote
	if len(count) != int(total) || messages != (int(total)+6)/7 || total <= 80 || roots == 0 || roots == int(total) {
		t.Fatalf("a dump of %d keys in %d messages, total %d, %d without a parent", len(count), messages, total, roots)
	}

	// The rest of the stream: live, and from the replay ring where the
	// subscription had not reached the publisher yet; applied in order
	// from the dump's sequence number until the index matches the node's
	// (the last puts' events may still be queued).
	dumped := count
	var next uint64
	var stored int
	var keys, want []string
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the consumer's index to match ListKeys", func() bool {
		st, _ := n.EventsStats("acme")
		next = st.Next
		missed, err := events.Replay(context.Background(), replay, "acme", "acme-token", seq)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, m := range missed {
			if _, ok := got[m.Seq]; !ok {
				got[m.Seq] = m
			}
		}
		mu.Unlock()
		count, stored = maps.Clone(dumped), 0
		for s := seq; s < next; s++ {
			mu.Lock()
			m, ok := got[s]
			mu.Unlock()
			if !ok {
				t.Fatalf("batch %d (the dump is at %d, the stream at %d) reached the consumer neither live nor replayed", s, seq, next)
			}
			if m.Topic == topic {
				stored += apply(count, m)
			}
		}
		keys = keys[:0]
		for k, c := range count {
			if c != 1 {
				t.Fatalf("block %x announced %d times (the dump and the stream from %d)", k, c, seq)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want = nodeKeys(t, n.Addr(), "acme-token", id)
		return slices.Equal(keys, want)
	})
	if stored == 0 {
		t.Fatalf("no block stored after the dump (at %d of %d): the puts did not run while the consumer joined", seq, next)
	}
	t.Logf("dump of %d keys at sequence number %d, then %d blocks stored up to %d", total, seq, stored, next)
}

// TestSnapshotRefused: a namespace without a stream has no dump, and a
// tenant cannot dump another's namespace.
func TestSnapshotRefused(t *testing.T) {
	n := testnode.Start(t, node.Config{Tiers: []string{"host"}, TenantTokens: tenantTokens,
		Events: node.EventsConfig{Tenants: map[string]node.EventsListen{"acme": {Pub: "127.0.0.1:0"}}}})
	admin := pb.NewAdminClient(testnode.Dial(t, n.Addr()))
	d := desc
	d.Tenant = "globex"
	_, ns := openNS(t, n.Addr(), client.Options{Token: "globex-token"}, d)
	id := ns.ID()
	for token, want := range map[string]codes.Code{"globex-token": codes.FailedPrecondition, "acme-token": codes.PermissionDenied} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
		s, err := admin.SnapshotKeys(ctx, &pb.SnapshotKeysRequest{NamespaceId: id[:]})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %v", token, err, want)
		}
	}
}

// apply applies a batch to an index of BlockStored counts per key and
// returns how many blocks it stored.
func apply(count map[string]int, m events.Message) (stored int) {
	for _, e := range m.Batch.Events {
		for _, h := range e.Hashes {
			switch e.Kind {
			case events.Stored:
				count[string(h)]++
				stored++
			case events.Removed:
				delete(count, string(h))
			}
		}
		if e.Kind == events.Cleared {
			clear(count)
		}
	}
	return stored
}
