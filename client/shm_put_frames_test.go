//go:build linux

package client_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// shmMapped says hello on the node's shm socket with token and maps the
// arena the Welcome passes, as a client does.
func shmMapped(t *testing.T, sock, token string) (*transport.Conn, *transport.Shm) {
	t.Helper()
	c, m, fds := shmHello(t, sock, token)
	defer closeTestFDs(fds)
	w, ok := m.(*frame.Welcome)
	if !ok || len(fds) != 2 {
		t.Fatalf("hello: %#v, %d fds", m, len(fds))
	}
	s, err := transport.MapShm(fds[0], w.ArenaSize, fds[1], w.GenWords)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

// TestShmCommitChecks: over the node's shm socket, a batch Commit of
// reservations whose bytes a client wrote into the arena publishes only
// the pages whose size and checksum match the bytes (a wrong checksum or
// size answers so and leaves the page unpublished); a commit, write or
// abort of a write id another connection reserved answers UNKNOWN_WRITE
// (nothing aborted) and leaves that reservation to its owner; a commit
// past the reservation's deadline answers EXPIRED; and only the pages
// committed are visible to a reader.
func TestShmCommitChecks(t *testing.T) {
	n, sock := shmNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "acme"}
		c.ShmTenants = []string{"acme"}
	})
	ctx := ctxT(t)
	reader := dial(t, n.Addr(), "token-a")
	ns, err := reader.Open(ctx, llama())
	if err != nil {
		t.Fatal(err)
	}
	keys := ns.PageKeys(tokens(16*5, 21))
	data := pagesFor(ns, keys)
	specs := make([]frame.PageSpec, len(keys))
	for i, k := range keys {
		specs[i] = frame.PageSpec{Key: k, Size: int64(ns.PageBytes())}
	}
	a, arena := shmMapped(t, sock, "token-a")
	r, ok := shmCall(t, a, 2, &frame.Reserve{NS: ns.ID(), Pages: specs[:4]}).(*frame.ReserveOK)
	if !ok || len(r.Slots) != 4 {
		t.Fatalf("reserve: %#v", r)
	}
	ops := make([]transport.Op, 4)
	for i, sl := range r.Slots {
		if sl.Status != frame.SlotReserved || !sl.Mapped {
			t.Fatalf("slot %d: %+v", i, sl)
		}
		ops[i] = transport.Op{Ext: sl.Ext, Buf: data[i]}
	}
	if err := arena.Write(ctx, ops); err != nil {
		t.Fatal(err)
	}
	sum := func(i int) []byte { return namespace.CRC32C.Sum(data[i]) }
	size := int64(ns.PageBytes())

	// Another connection of the same tenant cannot touch a's reservations.
	b, _ := shmMapped(t, sock, "token-a")
	co := shmCall(t, b, 2, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{{WriteID: r.Slots[2].WriteID, Size: size, Checksum: sum(2)}}})
	if st := co.(*frame.CommitOK).Statuses; st[0] != uint8(client.UnknownWrite) {
		t.Fatalf("commit of another connection's reservation: %v", st)
	}
	if err := b.Send(3, &frame.Write{NS: ns.ID(), WriteID: r.Slots[3].WriteID, Data: data[0]}); err != nil {
		t.Fatal(err)
	}
	if ab := shmCall(t, b, 4, &frame.Abort{NS: ns.ID(), WriteIDs: []uint64{r.Slots[3].WriteID}}); ab.(*frame.AbortOK).Aborted != 0 {
		t.Fatalf("abort of another connection's reservation: %#v", ab)
	}

	// a's one batch: a wrong checksum, a wrong size, two good pages, one of
	// them twice.
	co = shmCall(t, a, 3, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{
		{WriteID: r.Slots[0].WriteID, Size: size, Checksum: sum(1)},
		{WriteID: r.Slots[1].WriteID, Size: size - 1, Checksum: sum(1)},
		{WriteID: r.Slots[2].WriteID, Size: size, Checksum: sum(2)},
		{WriteID: r.Slots[3].WriteID, Size: size, Checksum: sum(3)},
		{WriteID: r.Slots[3].WriteID, Size: size, Checksum: sum(3)}, // repeated: no longer a's
	}})
	want := []client.PutStatus{client.ChecksumMismatch, client.SizeMismatch, client.Committed, client.Committed, client.UnknownWrite}
	sts := co.(*frame.CommitOK).Statuses
	if len(sts) != len(want) {
		t.Fatalf("%d statuses for %d items", len(sts), len(want))
	}
	for i, st := range sts {
		if client.PutStatus(st) != want[i] {
			t.Fatalf("item %d: %v, want %v", i, client.PutStatus(st), want[i])
		}
	}
	// Committed is final: the write id is no longer a's to commit.
	co = shmCall(t, a, 4, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{{WriteID: r.Slots[2].WriteID, Size: size, Checksum: sum(2)}}})
	if st := co.(*frame.CommitOK).Statuses; st[0] != uint8(client.UnknownWrite) {
		t.Fatalf("second commit: %v", st)
	}

	// A reservation past its deadline.
	r, _ = shmCall(t, a, 5, &frame.Reserve{NS: ns.ID(), TTLms: 1, Pages: specs[4:]}).(*frame.ReserveOK)
	if r == nil || r.Slots[0].Status != frame.SlotReserved {
		t.Fatalf("reserve with a 1 ms deadline: %#v", r)
	}
	time.Sleep(time.Until(time.UnixMilli(r.Slots[0].DeadlineMs)) + 2*time.Millisecond) // the deadline is the subject
	co = shmCall(t, a, 6, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{{WriteID: r.Slots[0].WriteID, Size: size, Checksum: sum(4)}}})
	if st := co.(*frame.CommitOK).Statuses; st[0] != uint8(client.Expired) {
		t.Fatalf("commit past the deadline: %v", client.PutStatus(st[0]))
	}

	bufs := pageBufs(ns, len(keys))
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if want := i == 2 || i == 3; found[i] != want || want && !bytes.Equal(bufs[i], data[i]) {
			t.Fatalf("page %d: found %v, want %v", i, found[i], want)
		}
	}
}

// TestShmPutPipelined: one Put of pages spanning more commit groups than
// may be unanswered at once (their commits pipelined behind the copies)
// publishes every page byte-exact through shared memory; a second Put of
// the same pages, half of them new, answers Exists and Committed.
func TestShmPutPipelined(t *testing.T) {
	n, _ := shmNode(t, func(c *node.Config) { c.HostBytes = 64 << 20 })
	ctx := ctxT(t)
	c := dial(t, n.Addr(), "")
	ns, err := c.Open(ctx, llama())
	if err != nil || !c.ShmActive() {
		t.Fatalf("open: %v, shm %v", err, c.ShmActive())
	}
	const pages = 700 // 16 KiB pages, 64 a group: 11 groups
	keys := ns.PageKeys(tokens(16*pages, 23))
	data := pagesFor(ns, keys)
	for i := range data {
		data[i][i%len(data[i])] ^= 0xa5
	}
	half := pages / 2
	putWant(ctx, t, ns, client.ChainPages(keys[:half], data[:half]), client.Committed, "first half")
	res, err := ns.Put(ctx, client.ChainPages(keys, data))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if want := map[bool]client.PutStatus{true: client.Exists, false: client.Committed}[i < half]; r.Status != want {
			t.Fatalf("page %d: %v %s, want %v", i, r.Status, r.Reason, want)
		}
	}
	bufs := pageBufs(ns, pages)
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if !found[i] || !bytes.Equal(bufs[i], data[i]) {
			t.Fatalf("page %d: found %v, bytes equal %v", i, found[i], bytes.Equal(bufs[i], data[i]))
		}
	}
	if !c.ShmActive() {
		t.Fatal("the session broke")
	}
}
