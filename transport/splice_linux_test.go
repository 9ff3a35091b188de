package transport

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/stacks"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
)

// TestSendFramesLent: bulks lent to the kernel (256 KiB; one that starts
// off a page boundary) and written (under lendMin; over the pipe's
// capacity) arrive whole and in order between small frames, and the
// socket lent exactly the two. (sendFrames with lending on: SendFramesLent
// itself writes a call of more than one bulk, TestSendFramesLentBatch.)
func TestSendFramesLent(t *testing.T) {
	a, b := streamPair(t)
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 2*lendPipe+7)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	bulks := [][]byte{big[:256<<10], big[3 : 3+lendMin-1], big[5:], big[9 : 9+lendPipe-11]}
	var frames []Frame
	for i, d := range bulks {
		frames = append(frames, Frame{ID: uint64(2 * i), Msg: &frame.Put{NS: namespace.ID{1}, Page: frame.PageSpec{Key: namespace.Key{byte(i)}},
			Checksum: []byte{1, 2, 3, 4}, Data: d}})
		frames = append(frames, Frame{ID: uint64(2*i + 1), Msg: &frame.AbortOK{Aborted: uint32(i)}})
	}
	sent := make(chan error, 1)
	go func() { sent <- a.sendFrames(true, frames) }()
	for i, d := range bulks {
		id, m, err := b.RecvBulk()
		p, ok := m.(*frame.Put)
		if err != nil || !ok || id != uint64(2*i) || p.Page.Size != int64(len(d)) {
			t.Fatalf("bulk %d: frame %d %T %v", i, id, m, err)
		}
		got := make([]byte, len(d))
		if err := b.ReadBulk(got); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("bulk %d of %d bytes: equal %v, %v", i, len(d), bytes.Equal(got, d), err)
		}
		if id, m, err := b.Recv(); err != nil || id != uint64(2*i+1) || m.(*frame.AbortOK).Aborted != uint32(i) {
			t.Fatalf("after bulk %d: frame %d %#v %v", i, id, m, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if l := &a.raw.lend; l.r < 0 || l.off || l.size != lendPipe || l.lent != 2 {
		t.Fatalf("pipe %d, off %v, size %d: lent %d bulks, want 2", l.r, l.off, l.size, l.lent)
	}
}

// TestSendFramesLentBatch: SendFramesLent lends the bulk of a call that
// carries one (a one-page put) and writes a call that carries several (a
// batch: BenchmarkPutSend, pages=32, costs half as much again lent), and
// every page arrives whole either way.
func TestSendFramesLentBatch(t *testing.T) {
	a, b := streamPair(t)
	page := make([]byte, 256<<10)
	for i := range page {
		page[i] = byte(i * 7)
	}
	put := func(id uint64) Frame {
		return Frame{ID: id, Msg: &frame.Put{NS: namespace.ID{1}, Checksum: []byte{1, 2, 3, 4}, Data: page}}
	}
	for _, c := range []struct {
		frames []Frame
		lent   int // the socket's count of lent bulks after the call
	}{
		{[]Frame{put(1), {ID: 2, Msg: &frame.AbortOK{}}}, 1},
		{[]Frame{put(3), put(4), put(5)}, 1},
		{[]Frame{put(6)}, 2},
	} {
		sent := make(chan error, 1)
		go func() { sent <- a.SendFramesLent(c.frames...) }()
		for _, f := range c.frames {
			id, m, err := b.RecvBulk()
			if err != nil || id != f.ID {
				t.Fatalf("frame %d: got %d %T %v", f.ID, id, m, err)
			}
			if _, ok := m.(*frame.Put); !ok {
				continue
			}
			got := make([]byte, len(page))
			if err := b.ReadBulk(got); err != nil || !bytes.Equal(got, page) {
				t.Fatalf("page of frame %d: equal %v, %v", f.ID, bytes.Equal(got, page), err)
			}
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if l := &a.raw.lend; l.off || l.lent != c.lent {
			t.Fatalf("after frames from %d: off %v, lent %d bulks, want %d", c.frames[0].ID, l.off, l.lent, c.lent)
		}
	}
}

// TestCloseDuringLentWrite: a lent write waiting for room in the socket
// (the peer reads nothing) ends with an error when the connection is
// closed, and the pipe is closed after it.
func TestCloseDuringLentWrite(t *testing.T) {
	a, _ := streamPair(t)
	data := make([]byte, 64<<20) // more than the socket buffers hold
	sent := make(chan error, 1)
	go func() {
		sent <- a.SendFramesLent(Frame{ID: 1, Msg: &frame.Put{NS: namespace.ID{1}, Checksum: []byte{1, 2, 3, 4}, Data: data}})
	}()
	poll.Within(5*time.Second, time.Millisecond, func() bool {
		return len(sent) > 0 || stacks.Blocked("transport.(*Conn).SendFramesLent", "transport.TestCloseDuringLentWrite")
	})
	select {
	case err := <-sent:
		t.Fatalf("a 64 MiB write to a peer that reads nothing returned: %v", err)
	default:
	}
	a.Close()
	select {
	case err := <-sent:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the write ended with %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write did not end when the connection closed")
	}
	if l := &a.raw.lend; l.r >= 0 || !l.shut {
		t.Fatalf("after Close: pipe %d, shut %v", l.r, l.shut)
	}
}

// BenchmarkPutSend sends Put frames of 256 KiB pages over loopback, a
// batch of pages in one call, and waits for one answer frame per page,
// the receiver reading each page into a 256 MiB arena round-robin (as a
// node reads a put into its host tier): written (SendFrames) or lent
// (SendFramesLent). One op is one page; cpu-µs/op is the process's CPU,
// both ends.
//
//	go test -run '^$' -bench PutSend -count 3 ./transport
func BenchmarkPutSend(b *testing.B) {
	for _, pages := range []int{1, 32} {
		for _, lend := range []bool{false, true} {
			b.Run(fmt.Sprintf("pages=%d/lent=%v", pages, lend), func(b *testing.B) {
				benchPutSend(b, pages, lend)
			})
		}
	}
}

func benchPutSend(b *testing.B, pages int, lend bool) {
	a, peer := streamPair(b)
	data := make([]byte, 256<<10)
	arena := make([]byte, 256<<20)
	for i := range arena { // committed, as a warm host tier is
		arena[i] = 1
	}
	done := make(chan error, 1)
	go func() {
		off := 0
		for {
			id, _, err := peer.RecvBulk()
			if err == nil {
				off = (off + len(data)) % len(arena)
				err = peer.ReadBulk(arena[off : off+len(data)])
			}
			if err == nil {
				err = peer.Queue(id, &frame.AbortOK{})
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	put := &frame.Put{NS: namespace.ID{1}, Checksum: []byte{1, 2, 3, 4}, Data: data}
	frames := make([]Frame, pages)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.SetBytes(int64(len(data)))
	send := a.SendFrames
	if lend {
		send = a.SendFramesLent
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += pages {
		for j := range frames {
			frames[j] = Frame{ID: uint64(i + j), Msg: put}
		}
		if err := send(frames...); err != nil {
			b.Fatal(err)
		}
		for range frames {
			if _, _, err := a.Recv(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	a.Close()
	<-done
}
