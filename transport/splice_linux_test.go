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
// socket lent exactly the two.
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
	go func() { sent <- a.SendFramesLent(frames...) }()
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

// BenchmarkPutSend sends one Put frame of a 256 KiB page over loopback
// and waits for a one-frame answer, the receiver reading the page into a
// 256 MiB arena round-robin (as a node reads a put into its host tier):
// written (SendFrames) or lent (SendFramesLent). cpu-µs/op is the
// process's CPU, both ends.
//
//	go test -run '^$' -bench PutSend -count 3 ./transport
func BenchmarkPutSend(b *testing.B) {
	for _, lend := range []bool{false, true} {
		b.Run(fmt.Sprintf("lent=%v", lend), func(b *testing.B) {
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
						err = peer.Send(id, &frame.AbortOK{})
					}
					if err != nil {
						done <- err
						return
					}
				}
			}()
			put := &frame.Put{NS: namespace.ID{1}, Checksum: []byte{1, 2, 3, 4}, Data: data}
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.SetBytes(int64(len(data)))
			send := a.SendFrames
			if lend {
				send = a.SendFramesLent
			}
			b.ResetTimer()
			for i := range b.N {
				if err := send(Frame{ID: uint64(i), Msg: put}); err != nil {
					b.Fatal(err)
				}
				if _, _, err := a.Recv(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			a.Close()
			<-done
		})
	}
}
