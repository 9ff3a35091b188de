package transport

import (
	"bytes"
	"errors"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
)

// streamPair is both ends of a loopback TCP connection, as Conns.
func streamPair(t testing.TB) (a, b *Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := lis.Accept()
		accepted <- c
	}()
	nc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accepted
	if sc == nil {
		t.Fatal("accept failed")
	}
	a, b = NewStreamConn(nc, 0), NewStreamConn(sc, 0)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestSendFramesRecvPage: frames sent in one batch arrive in order; page
// bytes land in the buffers pick hands out, piece by piece through each;
// a refused page is skipped and the stream stays in step.
func TestSendFramesRecvPage(t *testing.T) {
	a, b := streamPair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640,000 bytes
	frames := []Frame{
		{ID: 7, Msg: &frame.Page{Index: 0, Found: true, Checksum: []byte{1, 2, 3, 4}, Data: big}},
		{ID: 7, Msg: &frame.Page{Index: 1}},
		{ID: 7, Msg: &frame.Page{Index: 2, Found: true, Data: []byte("refused")}},
		{ID: 8, Msg: &frame.Error{Code: frame.CodeLeaseExpired, Message: "gone"}},
		{ID: 9, Msg: &frame.Write{NS: namespace.ID{3}, WriteID: 4, Offset: 5, Data: []byte("written")}},
	}
	errc := make(chan error, 1)
	go func() { errc <- a.SendFrames(frames...) }()
	refused := errors.New("refused")
	var pieces []byte
	each := func(p []byte) { pieces = append(pieces, p...) }
	buf := make([]byte, len(big))
	pick := func(p *frame.Page, size int) ([]byte, error) {
		if p.Index == 2 {
			return nil, refused
		}
		return buf, nil
	}
	id, m, err := b.RecvPage(pick, each)
	if p, ok := m.(*frame.Page); err != nil || id != 7 || !ok || !p.Found || !bytes.Equal(p.Data, big) || !bytes.Equal(pieces, big) || !bytes.Equal(p.Checksum, []byte{1, 2, 3, 4}) {
		t.Fatalf("page 0: id %d, %v, %d piece bytes", id, err, len(pieces))
	}
	if _, m, err = b.RecvPage(pick, nil); err != nil || m.(*frame.Page).Found || m.(*frame.Page).Index != 1 || m.(*frame.Page).Data != nil {
		t.Fatalf("page 1: %#v %v", m, err)
	}
	if _, m, err = b.RecvPage(pick, nil); !errors.Is(err, refused) || m.(*frame.Page).Index != 2 {
		t.Fatalf("page 2: %#v %v", m, err)
	}
	if id, m, err = b.RecvPage(pick, nil); err != nil || id != 8 || m.(*frame.Error).Code != frame.CodeLeaseExpired {
		t.Fatalf("error frame: %d %#v %v", id, m, err)
	}
	if id, m, err = b.Recv(); err != nil || id != 9 || string(m.(*frame.Write).Data) != "written" || m.(*frame.Write).Offset != 5 {
		t.Fatalf("write frame: %d %#v %v", id, m, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestRecvPageInto: a page's bytes fill the pieces pick returns in order
// (an empty piece and room past the page left alone), each sees them as
// they arrive, and pieces too small for the page are ErrOutOfRange with
// the page skipped and the stream in step.
func TestRecvPageInto(t *testing.T) {
	a, b := streamPair(t)
	big := bytes.Repeat([]byte("fedcba9876543210"), 20000) // 320,000 bytes
	errc := make(chan error, 1)
	go func() {
		errc <- a.SendFrames(Frame{ID: 3, Msg: &frame.Page{Index: 0, Found: true, Data: big}},
			Frame{ID: 3, Msg: &frame.Page{Index: 1, Found: true, Data: big}},
			Frame{ID: 4, Msg: &frame.Page{Index: 2}})
	}()
	k, v, spare := make([]byte, 1000), make([]byte, len(big)-1000+7), byte(0xEE)
	v[len(v)-1] = spare
	var seen []byte
	id, m, err := b.RecvPageInto(func(*frame.Page, int) ([][]byte, error) { return [][]byte{k, nil, v}, nil },
		func(p []byte) { seen = append(seen, p...) })
	if p, ok := m.(*frame.Page); err != nil || id != 3 || !ok || !p.Found || p.Data != nil {
		t.Fatalf("page 0: id %d, %#v, %v", id, m, err)
	}
	if got := append(append([]byte{}, k...), v[:len(big)-1000]...); !bytes.Equal(got, big) || !bytes.Equal(seen, big) || v[len(v)-1] != spare {
		t.Fatalf("page 0: pieces equal %v, handed equal %v, room past the page kept %v", bytes.Equal(got, big),
			bytes.Equal(seen, big), v[len(v)-1] == spare)
	}
	_, m, err = b.RecvPageInto(func(*frame.Page, int) ([][]byte, error) { return [][]byte{k, k}, nil }, nil)
	if !errors.Is(err, ErrOutOfRange) || m.(*frame.Page).Index != 1 {
		t.Fatalf("page 1 into pieces too small: %#v %v", m, err)
	}
	if id, m, err = b.RecvPageInto(func(*frame.Page, int) ([][]byte, error) { return nil, nil }, nil); err != nil || id != 4 ||
		m.(*frame.Page).Index != 2 || m.(*frame.Page).Found {
		t.Fatalf("page 2 after a skipped page: %d %#v %v", id, m, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestSendFramesPieces: a frame whose bulk is in Pieces arrives as the
// same frame with the pieces' bytes, in order, as its bulk (a Put and a
// Write, batched with a plain frame); bulk bytes and pieces together are
// refused.
func TestSendFramesPieces(t *testing.T) {
	a, b := streamPair(t)
	page := bytes.Repeat([]byte("0123456789abcdef"), 30000)
	pieces := [][]byte{page[:7], nil, page[7:200000], page[200000:]}
	put := &frame.Put{NS: namespace.ID{1}, Checksum: []byte{9, 9, 9, 9}, Page: frame.PageSpec{Depth: 3}}
	put.SetVersion(frame.ProtocolVersion)
	frames := []Frame{
		{ID: 1, Msg: put, Pieces: pieces},
		{ID: 2, Msg: &frame.Write{NS: namespace.ID{2}, WriteID: 5, Offset: 64}, Pieces: pieces[2:3]},
		{ID: 3, Msg: &frame.Error{Code: frame.CodeLeaseExpired, Message: "after"}},
	}
	errc := make(chan error, 1)
	go func() { errc <- a.SendFrames(frames...) }()
	b.SetVersion(frame.ProtocolVersion)
	id, m, err := b.Recv()
	if p, ok := m.(*frame.Put); err != nil || id != 1 || !ok || !bytes.Equal(p.Data, page) || p.Page.Depth != 3 ||
		!bytes.Equal(p.Checksum, []byte{9, 9, 9, 9}) {
		t.Fatalf("put: id %d, %T, %v", id, m, err)
	}
	id, m, err = b.Recv()
	if w, ok := m.(*frame.Write); err != nil || id != 2 || !ok || !bytes.Equal(w.Data, page[7:200000]) || w.Offset != 64 {
		t.Fatalf("write: id %d, %T, %v", id, m, err)
	}
	if id, m, err = b.Recv(); err != nil || id != 3 || m.(*frame.Error).Message != "after" {
		t.Fatalf("error frame: %d %#v %v", id, m, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	both := Frame{ID: 4, Msg: &frame.Write{Data: page[:10]}, Pieces: pieces}
	if err := a.SendFrames(both); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("bulk bytes and pieces both: %v", err)
	}
}

// TestRecvPageRejects: a missing page that carries bytes, or a frame
// shorter than a page header, is ErrMalformed.
func TestRecvPageRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"missing page with bytes", frame.Append(nil, 1, &frame.Page{Index: 0, Found: false, Checksum: nil, Data: nil})},
		{"short page frame", frame.Append(nil, 1, &frame.AbortOK{Aborted: 1})},
	} {
		b := tc.b
		switch tc.name {
		case "missing page with bytes":
			b = append(b, 'x')
			b[0]++
		case "short page frame":
			b[4] = frame.OpPage
		}
		a, c := streamPair(t)
		if _, err := a.Net().Write(b); err != nil {
			t.Fatal(err)
		}
		_, _, err := c.RecvPage(func(*frame.Page, int) ([]byte, error) { return make([]byte, 8), nil }, nil)
		if !errors.Is(err, frame.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
	}
}

// TestRecvReusesKeys: Lookup and Read frames decode into the connection's
// own messages, whose key lists are reused; each decode is whole, and a
// shorter list after a longer one has only its own keys.
func TestRecvReusesKeys(t *testing.T) {
	a, b := streamPair(t)
	keys := make([]namespace.Key, 1000)
	for i := range keys {
		keys[i][0], keys[i][1] = byte(i), byte(i>>8)
	}
	want := []frame.Message{
		&frame.Lookup{NS: namespace.ID{1}, Lease: true, LeaseTTLms: 5, Keys: keys},
		&frame.Lookup{NS: namespace.ID{2}, Keys: keys[7:10]},
		&frame.Read{NS: namespace.ID{3}, Lease: 4, Keys: keys[:2]},
		&frame.Read{NS: namespace.ID{4}, Keys: keys[500:]},
	}
	errc := make(chan error, 1)
	go func() {
		for i, m := range want {
			if err := a.Send(uint64(i+1), m); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, w := range want {
		id, m, err := b.Recv()
		if err != nil || id != uint64(i+1) {
			t.Fatalf("frame %d: id %d, %v", i, id, err)
		}
		if !reflect.DeepEqual(m, w) {
			t.Fatalf("frame %d: decoded %T with %d keys, want %d", i, m, len(keysOf(m)), len(keysOf(w)))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Decoding a 1,000-key lookup into the reused message allocates nothing.
	f := frame.Append(nil, 9, want[0])
	m := b.message(frame.OpLookup)
	if allocs := testing.AllocsPerRun(20, func() {
		if err := m.Decode(f[frame.HeaderSize:]); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("decoding into the reused lookup: %.0f allocations", allocs)
	}
}

func keysOf(m frame.Message) []namespace.Key {
	switch m := m.(type) {
	case *frame.Lookup:
		return m.Keys
	case *frame.Read:
		return m.Keys
	}
	return nil
}

// TestRecvBulk: a Put's data stays in the connection for ReadBulk (read
// in pieces) or SkipBulk; a Put whose head does not decode is refused with
// its data skippable; other frames are read whole; the stream stays in
// step throughout.
func TestRecvBulk(t *testing.T) {
	a, b := streamPair(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<12) // 64 KiB
	put := &frame.Put{NS: namespace.ID{1}, TTLms: 7, Page: frame.PageSpec{Key: namespace.Key{2}, Depth: 3, ChainDepth: 4},
		Checksum: []byte{1, 2, 3, 4}, Data: data}
	bad := frame.Append(nil, 3, put)
	bad[frame.HeaderSize+32+4+32+32] = 2 // has parent: not a bool
	if err := a.SendFrames(Frame{ID: 1, Msg: put}, Frame{ID: 2, Msg: put}, Frame{ID: 4, Msg: &frame.AbortOK{Aborted: 9}}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.writev(false, bad, frame.Append(nil, 5, &frame.AbortOK{Aborted: 5})) }()

	id, m, err := b.RecvBulk()
	p, ok := m.(*frame.Put)
	if err != nil || id != 1 || !ok || p.Data != nil || p.Page.Size != int64(len(data)) || p.TTLms != 7 || p.Page.ChainDepth != 4 {
		t.Fatalf("first put: %d %#v %v", id, m, err)
	}
	got := make([]byte, len(data))
	if err := b.ReadBulk(got[:100]); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadBulk(got[100:]); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read in place: equal %v, %v", bytes.Equal(got, data), err)
	}
	if err := b.ReadBulk(got[:1]); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("a read past the data: %v", err)
	}
	if id, _, err := b.RecvBulk(); err != nil || id != 2 {
		t.Fatalf("second put: %d %v", id, err)
	}
	if err := b.SkipBulk(); err != nil {
		t.Fatal(err)
	}
	if id, m, err := b.RecvBulk(); err != nil || id != 4 || m.(*frame.AbortOK).Aborted != 9 {
		t.Fatalf("after the skipped data: %d %#v %v", id, m, err)
	}
	if id, m, err := b.RecvBulk(); !errors.Is(err, frame.ErrMalformed) || id != 3 || m != nil {
		t.Fatalf("a bad head: %d %#v %v", id, m, err)
	}
	if err := b.SkipBulk(); err != nil {
		t.Fatal(err)
	}
	if id, m, err := b.RecvBulk(); err != nil || id != 5 || m.(*frame.AbortOK).Aborted != 5 {
		t.Fatalf("after the bad put: %d %#v %v", id, m, err)
	}
}

// TestRecvBulkWrite: a Write's data stays in the connection too, its
// length told by Bulk, and the frames after it are read in step whether
// the data was read or skipped.
func TestRecvBulkWrite(t *testing.T) {
	a, b := streamPair(t)
	data := bytes.Repeat([]byte("fedcba9876543210"), 1<<12) // 64 KiB
	w := &frame.Write{NS: namespace.ID{1}, WriteID: 77, Offset: 4096, Data: data}
	if err := a.SendFrames(Frame{ID: 1, Msg: w}, Frame{ID: 2, Msg: w}, Frame{ID: 3, Msg: &frame.Write{NS: namespace.ID{1}, WriteID: 78}},
		Frame{ID: 4, Msg: &frame.AbortOK{Aborted: 9}}); err != nil {
		t.Fatal(err)
	}
	id, m, err := b.RecvBulk()
	got, ok := m.(*frame.Write)
	if err != nil || id != 1 || !ok || got.Data != nil || got.NS != w.NS || got.WriteID != 77 || got.Offset != 4096 || b.Bulk() != len(data) {
		t.Fatalf("first write: %d %#v (bulk %d) %v", id, m, b.Bulk(), err)
	}
	in := make([]byte, len(data))
	if err := b.ReadBulk(in); err != nil || !bytes.Equal(in, data) || b.Bulk() != 0 {
		t.Fatalf("read in place: equal %v, bulk %d, %v", bytes.Equal(in, data), b.Bulk(), err)
	}
	if id, _, err := b.RecvBulk(); err != nil || id != 2 || b.Bulk() != len(data) {
		t.Fatalf("second write: %d %v", id, err)
	}
	if err := b.SkipBulk(); err != nil {
		t.Fatal(err)
	}
	if id, m, err := b.RecvBulk(); err != nil || id != 3 || m.(*frame.Write).WriteID != 78 || b.Bulk() != 0 {
		t.Fatalf("an empty write: %d %#v %v", id, m, err)
	}
	if id, m, err := b.RecvBulk(); err != nil || id != 4 || m.(*frame.AbortOK).Aborted != 9 {
		t.Fatalf("after the writes: %d %#v %v", id, m, err)
	}
}

// TestQueuedAnswers: frames Queue holds are not sent until the next
// write, which sends them first, in order, or Flush, or a read of the
// connection that finds nothing to read.
func TestQueuedAnswers(t *testing.T) {
	a, b := streamPair(t)
	for i := range 3 {
		if err := a.Queue(uint64(i+1), &frame.AbortOK{Aborted: uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Net().SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Recv(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("queued frames reached the peer before a write: %v", err)
	}
	if err := b.Net().SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(4, &frame.AbortOK{Aborted: 3}); err != nil { // sends the queue first
		t.Fatal(err)
	}
	for i := range 4 {
		id, m, err := b.Recv()
		if ok, isOK := m.(*frame.AbortOK); err != nil || id != uint64(i+1) || !isOK || ok.Aborted != uint32(i) {
			t.Fatalf("frame %d: id %d, %#v, %v", i, id, m, err)
		}
	}
	if err := a.Queue(5, &frame.AbortOK{Aborted: 5}); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if id, m, err := b.Recv(); err != nil || id != 5 || m.(*frame.AbortOK).Aborted != 5 {
		t.Fatalf("flushed frame: id %d, %#v, %v", id, m, err)
	}
	// A read of a that finds nothing sends what a queued, then waits.
	if err := a.Queue(6, &frame.AbortOK{Aborted: 6}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, _, err := a.Recv()
		got <- err
	}()
	if id, m, err := b.Recv(); err != nil || id != 6 || m.(*frame.AbortOK).Aborted != 6 {
		t.Fatalf("frame sent by a's read: id %d, %#v, %v", id, m, err)
	}
	if err := b.Send(7, &frame.AbortOK{}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
