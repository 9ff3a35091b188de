//go:build linux

package client_test

import (
	"net"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
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
// (nothing aborted) and leaves that reservation to its owner; a repeated
// commit, in the same batch, later or from another connection, answers
// the first outcome (SPEC.md §2, Repeated commits); a commit past the
// reservation's deadline answers EXPIRED; and only the pages committed
// are visible to a reader.
func TestShmCommitChecks(t *testing.T) {
	n, sock := shmNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "acme"}
		c.ShmTenants = []string{"acme"}
	})
	ctx := ctxT(t)
	reader := dial(t, n.Addr(), "token-a")
	ns := open(t, reader)
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
	// them twice (the second a repeat: the first's outcome).
	co = shmCall(t, a, 3, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{
		{WriteID: r.Slots[0].WriteID, Size: size, Checksum: sum(1)},
		{WriteID: r.Slots[1].WriteID, Size: size - 1, Checksum: sum(1)},
		{WriteID: r.Slots[2].WriteID, Size: size, Checksum: sum(2)},
		{WriteID: r.Slots[3].WriteID, Size: size, Checksum: sum(3)},
		{WriteID: r.Slots[3].WriteID, Size: size, Checksum: sum(3)}, // repeated: no longer a's
	}})
	want := []client.PutStatus{client.ChecksumMismatch, client.SizeMismatch, client.Committed, client.Committed, client.Committed}
	sts := co.(*frame.CommitOK).Statuses
	if len(sts) != len(want) {
		t.Fatalf("%d statuses for %d items", len(sts), len(want))
	}
	for i, st := range sts {
		if client.PutStatus(st) != want[i] {
			t.Fatalf("item %d: %v, want %v", i, client.PutStatus(st), want[i])
		}
	}
	// A repeated commit, by a or by b, answers the first outcome and
	// changes nothing, whatever it declares.
	co = shmCall(t, a, 4, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{
		{WriteID: r.Slots[2].WriteID, Size: size, Checksum: sum(2)},
		{WriteID: r.Slots[0].WriteID, Size: size, Checksum: sum(0)},
	}})
	if st := co.(*frame.CommitOK).Statuses; client.PutStatus(st[0]) != client.Committed || client.PutStatus(st[1]) != client.ChecksumMismatch {
		t.Fatalf("repeated commits: %v", st)
	}
	co = shmCall(t, b, 5, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{{WriteID: r.Slots[1].WriteID, Size: size, Checksum: sum(1)}}})
	if st := co.(*frame.CommitOK).Statuses; client.PutStatus(st[0]) != client.SizeMismatch {
		t.Fatalf("another connection's repeated commit: %v", client.PutStatus(st[0]))
	}

	// A reservation past its deadline.
	r, _ = shmCall(t, a, 5, &frame.Reserve{NS: ns.ID(), TTLms: 1, Pages: specs[4:]}).(*frame.ReserveOK)
	if r == nil || r.Slots[0].Status != frame.SlotReserved {
		t.Fatalf("reserve with a 1 ms deadline: %#v", r)
	}
	time.Sleep(time.Until(time.UnixMilli(r.Slots[0].DeadlineMs)) + 2*time.Millisecond) // the deadline is the subject: only the clock passes it
	co = shmCall(t, a, 6, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{{WriteID: r.Slots[0].WriteID, Size: size, Checksum: sum(4)}}})
	if st := co.(*frame.CommitOK).Statuses; st[0] != uint8(client.Expired) {
		t.Fatalf("commit past the deadline: %v", client.PutStatus(st[0]))
	}

	readsOnly(ctx, t, ns, keys, data, func(i int) bool { return i == 2 || i == 3 })
}

// TestShmPutPipelined: one Put of pages spanning more commit groups than
// may be unanswered at once (their commits pipelined behind the copies)
// publishes every page byte-exact through shared memory; a second Put of
// the same pages, half of them new, answers Exists and Committed.
func TestShmPutPipelined(t *testing.T) {
	n, _ := shmNode(t, func(c *node.Config) { c.HostBytes = 64 << 20 })
	ctx := ctxT(t)
	c, ns := openShm(t, n)
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
	readsBack(ctx, t, ns, keys, data)
	if !c.ShmActive() {
		t.Fatal("the session broke")
	}
}

// slotPut sends a SlotPut on c and returns its answer, failing on any
// other.
func slotPut(t *testing.T, c *transport.Conn, id uint64, m *frame.SlotPut) *frame.SlotPutOK {
	t.Helper()
	ok, isOK := shmCall(t, c, id, m).(*frame.SlotPutOK)
	if !isOK || len(ok.Results) != len(m.Pages) {
		t.Fatalf("slot put %d: %#v", id, ok)
	}
	return ok
}

// TestShmSlotPutChecks: over the node's shm socket, a page written into a
// slot the node granted is published only when the slot is this
// connection's, unused, of the page's size and the checksum matches its
// bytes; a published key answers EXISTS and leaves the slot for another
// page; a slot is no reservation to Commit; and only the pages published
// are visible to a reader.
func TestShmSlotPutChecks(t *testing.T) {
	n, sock := shmNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "acme"}
		c.ShmTenants = []string{"acme"}
		c.MaxBatch = 8
	})
	ctx := ctxT(t)
	ns, err := dial(t, n.Addr(), "token-a").Open(ctx, llama())
	if err != nil {
		t.Fatal(err)
	}
	keys := ns.PageKeys(tokens(16*4, 31))
	data := pagesFor(ns, keys)
	size := int64(ns.PageBytes())
	sum := func(i int) []byte { return namespace.CRC32C.Sum(data[i]) }
	page := func(g frame.Grant, i int, sz int64, s []byte) frame.SlotPage {
		return frame.SlotPage{WriteID: g.WriteID, Page: frame.PageSpec{Key: keys[i], Size: sz}, Checksum: s}
	}
	a, arena := shmMapped(t, sock, "token-a")
	write := func(g frame.Grant, i int) {
		t.Helper()
		if err := arena.Write(ctx, []transport.Op{{Ext: g.Ext, Buf: data[i]}}); err != nil {
			t.Fatal(err)
		}
	}

	wantCode(t, "no pages, no slots", shmCall(t, a, 2, &frame.SlotPut{NS: ns.ID()}), frame.CodeBadRequest)
	wantCode(t, "too many slots", shmCall(t, a, 3, &frame.SlotPut{NS: ns.ID(), Want: 9}), frame.CodeBatchTooLarge)
	slots := slotPut(t, a, 4, &frame.SlotPut{NS: ns.ID(), Want: 5}).Slots
	if len(slots) != 5 {
		t.Fatalf("%d slots granted of 5", len(slots))
	}
	for _, g := range slots {
		if g.Ext.Len != size {
			t.Fatalf("a slot of %d bytes for %d-byte pages", g.Ext.Len, size)
		}
	}

	// Another connection of the same tenant cannot use a's slots; a
	// Commit of a slot is an unknown write; and neither spends it.
	b, _ := shmMapped(t, sock, "token-a")
	write(slots[0], 0)
	if r := slotPut(t, b, 2, &frame.SlotPut{NS: ns.ID(), Pages: []frame.SlotPage{page(slots[0], 0, size, sum(0))}}).Results[0]; r.Commit != frame.CommitUnknownWrite {
		t.Fatalf("another connection's slot: %+v", r)
	}
	co := shmCall(t, a, 5, &frame.Commit{NS: ns.ID(), Items: []frame.CommitItem{{WriteID: slots[0].WriteID, Size: size, Checksum: sum(0)}}})
	if st := co.(*frame.CommitOK).Statuses; st[0] != frame.CommitUnknownWrite {
		t.Fatalf("commit of a slot: %v", st)
	}
	// A malformed page refuses the whole request: nothing is spent.
	own := frame.SlotPage{WriteID: slots[0].WriteID, Page: frame.PageSpec{Key: keys[0], Parent: keys[0], HasParent: true, Size: size}, Checksum: sum(0)}
	wantCode(t, "a page its own parent", shmCall(t, a, 6, &frame.SlotPut{NS: ns.ID(), Pages: []frame.SlotPage{own}}), frame.CodeBadRequest)

	// One SlotPut: a good page, a wrong checksum, a wrong size, the good
	// slot again (spent), and a key just published (EXISTS).
	write(slots[1], 1)
	write(slots[2], 2)
	write(slots[3], 0)
	ok := slotPut(t, a, 7, &frame.SlotPut{NS: ns.ID(), Want: 2, Pages: []frame.SlotPage{
		page(slots[0], 0, size, sum(0)),
		page(slots[1], 1, size, sum(2)),
		page(slots[2], 2, size-1, sum(2)),
		page(slots[0], 3, size, sum(0)),
		page(slots[3], 0, size, sum(0)),
	}})
	want := []frame.PutOK{
		{Reserve: frame.SlotReserved, Commit: frame.CommitCommitted},
		{Reserve: frame.SlotReserved, Commit: frame.CommitChecksumMismatch, Reason: "checksum mismatch"},
		{Reserve: frame.SlotReserved, Commit: frame.CommitSizeMismatch, Reason: "size mismatch"},
		{Reserve: frame.SlotReserved, Commit: frame.CommitUnknownWrite, Reason: "unknown write"},
		{Reserve: frame.SlotExists},
	}
	for i, r := range ok.Results {
		if r != want[i] {
			t.Fatalf("page %d: %+v, want %+v", i, r, want[i])
		}
	}
	if len(ok.Slots) != 2 {
		t.Fatalf("%d slots granted of 2", len(ok.Slots))
	}
	// The slot that answered EXISTS is still a's; the refused ones are not.
	write(slots[3], 3)
	ok = slotPut(t, a, 8, &frame.SlotPut{NS: ns.ID(), Pages: []frame.SlotPage{page(slots[3], 3, size, sum(3)), page(slots[1], 1, size, sum(1))}})
	if ok.Results[0].Commit != frame.CommitCommitted || ok.Results[1].Commit != frame.CommitUnknownWrite {
		t.Fatalf("after the first SlotPut: %+v", ok.Results)
	}

	readsOnly(ctx, t, ns, keys, data, func(i int) bool { return i == 0 || i == 3 })

	// A connection that said hello with protocol 3 may not send a SlotPut.
	uc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	old := transport.NewConn(uc.(*net.UnixConn), 0)
	defer old.Close()
	if err := old.Send(1, &frame.Hello{Version: 3, Token: "token-a"}); err != nil {
		t.Fatal(err)
	}
	if _, w, fds, err := old.RecvFDs(2); err != nil || w.(*frame.Welcome).Version != 3 {
		t.Fatalf("hello with 3: %#v %v", w, err)
	} else {
		closeTestFDs(fds)
	}
	wantCode(t, "slot put on protocol 3", shmCall(t, old, 2, &frame.SlotPut{NS: ns.ID(), Want: 1}), frame.CodeBadRequest)
}

// TestShmSlotsTakenBack: the slots a connection holds are the arena's again
// once it closes, and a connection is granted no slot from an arena with
// no free extent (nothing is evicted for one).
func TestShmSlotsTakenBack(t *testing.T) {
	n, sock := shmNode(t, func(c *node.Config) { // 64 pages of 16 KiB, every one a slot of one tenant
		c.HostBytes, c.ReserveShare = 1<<20, 1
	})
	ctx := ctxT(t)
	_, ns := openShm(t, n)
	pages := int((1 << 20) / ns.PageBytes())
	a, _ := shmMapped(t, sock, "")
	if got := slotPut(t, a, 2, &frame.SlotPut{NS: ns.ID(), Want: uint32(pages)}).Slots; len(got) != pages {
		t.Fatalf("%d slots of a %d-page arena", len(got), pages)
	}
	b, _ := shmMapped(t, sock, "")
	if got := slotPut(t, b, 2, &frame.SlotPut{NS: ns.ID(), Want: 1}).Slots; len(got) != 0 {
		t.Fatalf("a slot granted from a full arena: %+v", got)
	}
	// A put through c reserves instead, and is refused: the arena is all
	// granted and holds no page to evict; no slot of a's is spent on it.
	keys := ns.PageKeys(tokens(16, 41))
	res, err := ns.Put(ctx, client.ChainPages(keys, pagesFor(ns, keys)))
	if err != nil || res[0].Status == client.Committed {
		t.Fatalf("a put into an arena all granted: %+v %v", res, err)
	}
	a.Close()
	var got []frame.Grant
	if !poll.Within(10*time.Second, 10*time.Millisecond, func() bool { // the node notices the close on its own
		if len(got) > 0 {
			if ab := shmCall(t, b, 4, &frame.Abort{NS: ns.ID(), WriteIDs: grantIDs(got)}); ab.(*frame.AbortOK).Aborted != uint32(len(got)) {
				t.Fatalf("abort of own slots: %#v", ab)
			}
		}
		got = slotPut(t, b, 3, &frame.SlotPut{NS: ns.ID(), Want: uint32(pages)}).Slots
		return len(got) == pages
	}) {
		t.Fatalf("%d slots of %d after the holder closed", len(got), pages)
	}
}

func grantIDs(gs []frame.Grant) []uint64 {
	ids := make([]uint64, len(gs))
	for i, g := range gs {
		ids[i] = g.WriteID
	}
	return ids
}

// TestShmPutOneRequest: after its first put, which asks for slots, a
// client's put through shared memory is one request (a SlotPut whose
// answer replaces the slot it used), every page byte-exact; a put of more
// pages than it holds slots for asks for the missing ones first.
func TestShmPutOneRequest(t *testing.T) {
	n, _ := shmNode(t, nil)
	ctx := ctxT(t)
	c, ns := openShm(t, n)
	keys := ns.PageKeys(tokens(16*40, 43))
	data := pagesFor(ns, keys)
	putWant(ctx, t, ns, client.ChainPages(keys[:1], data[:1]), client.Committed, "first put")
	req0, slot0 := c.ShmRequests()
	for i := 1; i < 20; i++ {
		putWant(ctx, t, ns, []client.Page{{Key: keys[i], Parent: keys[i-1], HasParent: true, Depth: uint32(i), Data: data[i]}}, client.Committed, "put")
	}
	if req, slots := c.ShmRequests(); req-req0 != 19 || slots-slot0 != 19 {
		t.Fatalf("19 one-page puts: %d requests, %d into slots", req-req0, slots-slot0)
	}
	// 20 pages with 1 slot held: one request for 19 more slots, then one
	// SlotPut per commit group (64 pages of 16 KiB: one).
	putWant(ctx, t, ns, client.ChainPages(keys[20:40], data[20:40]), client.Committed, "20 pages")
	if req, slots := c.ShmRequests(); req-req0 != 21 || slots-slot0 != 20 {
		t.Fatalf("then a put of 20: %d requests, %d into slots", req-req0-19, slots-slot0-19)
	}
	readsBack(ctx, t, ns, keys, data)
	if !c.ShmActive() {
		t.Fatal("the session broke")
	}
}
