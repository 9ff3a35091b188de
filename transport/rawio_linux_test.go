package transport

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/stacks"
	"github.com/stratakv/strata/proto/frame"
)

// TestRawIOLargeFrames: frames far larger than the socket's buffer, sent
// with raw writev while the peer reads slowly, arrive whole and in order
// (partial writes resume where the kernel stopped).
func TestRawIOLargeFrames(t *testing.T) {
	a, b := streamPair(t)
	if a.raw == nil || b.raw == nil {
		t.Fatal("a loopback TCP connection has no raw path")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	var pages [][]byte
	var frames []Frame
	for i := range 5 {
		p := make([]byte, 1<<20+r.IntN(3<<20))
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		pages = append(pages, p)
		frames = append(frames, Frame{ID: uint64(i), Msg: &frame.Page{Index: uint32(i), Found: true, Checksum: []byte{1, 2, 3, 4}, Data: p}})
	}
	sent := make(chan error, 1)
	go func() { sent <- a.SendFrames(frames...) }()
	for i, want := range pages {
		poll.Until(t, 5*time.Second, time.Millisecond, "the sender waiting for room, or done", func() bool {
			return len(sent) > 0 || stacks.Blocked("transport.(*RawSocket).Writev", "transport.TestRawIOLargeFrames")
		})
		buf := make([]byte, len(want))
		id, m, err := b.RecvPage(func(*frame.Page, int) ([]byte, error) { return buf, nil }, nil)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		if p := m.(*frame.Page); id != uint64(i) || !bytes.Equal(p.Data, want) {
			t.Fatalf("page %d: id %d, %d bytes, equal %v", i, id, len(p.Data), bytes.Equal(p.Data, want))
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestRawIODeadlineCloseEOF: the raw path keeps net.Conn's contract: a
// passed deadline ends a read waiting for bytes with
// os.ErrDeadlineExceeded, Close ends it with net.ErrClosed, and the peer's
// close is io.EOF.
func TestRawIODeadlineCloseEOF(t *testing.T) {
	_, b := streamPair(t)
	if err := b.SetDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.raw.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want %v", err, os.ErrDeadlineExceeded)
	}
	if err := b.SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	err := stacks.Interrupt(t, "the read waiting, then closed", 5*time.Second, func() error {
		_, err := b.raw.Read(make([]byte, 8))
		return err
	}, func() { b.Close() }, "transport.(*RawSocket).Read", "transport.TestRawIODeadlineCloseEOF")
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed connection: %v, want %v", err, net.ErrClosed)
	}
	a2, b2 := streamPair(t)
	a2.Close()
	if _, err := b2.raw.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
	if err := b2.raw.Writev(make([]byte, 8<<20)); err == nil {
		t.Fatal("an 8 MiB write to a closed peer succeeded")
	}
}

func TestAdvance(t *testing.T) {
	bufs := [][]byte{make([]byte, 3), make([]byte, 5), make([]byte, 2)}
	iovs := func() []unix.Iovec {
		var v []unix.Iovec
		for _, b := range bufs {
			i := unix.Iovec{Base: &b[0]}
			i.SetLen(len(b))
			v = append(v, i)
		}
		return v
	}
	for _, tc := range []struct {
		n         int
		left      int
		firstLen  uint64
		firstByte *byte
	}{
		{0, 3, 3, &bufs[0][0]},
		{2, 3, 1, &bufs[0][2]},
		{3, 2, 5, &bufs[1][0]},
		{7, 2, 1, &bufs[1][4]},
		{8, 1, 2, &bufs[2][0]},
		{10, 0, 0, nil},
	} {
		got := advance(iovs(), tc.n)
		if len(got) != tc.left {
			t.Fatalf("advance %d: %d iovecs left, want %d", tc.n, len(got), tc.left)
		}
		if tc.left > 0 && (got[0].Len != tc.firstLen || got[0].Base != tc.firstByte) {
			t.Fatalf("advance %d: first iovec %d bytes at %p, want %d at %p", tc.n, got[0].Len, got[0].Base, tc.firstLen, tc.firstByte)
		}
	}
}
