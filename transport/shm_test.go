//go:build linux

package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/tiers"
)

func newHost(t *testing.T) (*tiers.Host, *Shm) {
	t.Helper()
	h, err := tiers.NewHost(tiers.HostConfig{Capacity: 1 << 20, SlabSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	s, err := MapShm(h.FD(), h.Size(), h.GenFD(), h.GenWords())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return h, s
}

func extentOf(h *tiers.Host, e tiers.Extent) frame.Extent {
	return frame.Extent{Off: e.Off, Len: e.Len, Gen: e.Gen, GenIndex: h.GenIndex(e)}
}

// TestShmReadWrite: bytes written through one mapping read back through the
// other; a freed extent reads as a miss and refuses writes; extents outside
// the arena and short buffers are errors.
func TestShmReadWrite(t *testing.T) {
	h, s := newHost(t)
	ctx := context.Background()
	a, _ := h.Alloc(5000)
	data := bytes.Repeat([]byte("strata"), 1000)[:5000]
	w := []Op{{Ext: extentOf(h, a), Buf: data}}
	if err := s.Write(ctx, w); err != nil || !w[0].OK {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Bytes(a), data) {
		t.Fatal("the tier does not see the bytes written through the mapping")
	}
	r := []Op{{Ext: extentOf(h, a), Buf: make([]byte, 8192)}}
	if err := s.Read(ctx, r); err != nil || !r[0].OK || !bytes.Equal(r[0].Buf[:5000], data) {
		t.Fatalf("read: ok %v, %v", r[0].OK, err)
	}
	h.Free(a)
	if err := s.Read(ctx, r); err != nil || r[0].OK {
		t.Fatalf("read of a freed extent: ok %v, %v", r[0].OK, err)
	}
	if err := s.Write(ctx, w); !errors.Is(err, ErrStale) {
		t.Fatalf("write to a freed extent: %v", err)
	}
	for _, op := range []Op{
		{Ext: frame.Extent{Off: s.Size() - 10, Len: 20}, Buf: make([]byte, 20)},
		{Ext: frame.Extent{Off: -1, Len: 1}, Buf: make([]byte, 1)},
		{Ext: frame.Extent{Off: 0, Len: 100}, Buf: make([]byte, 10)},
	} {
		if err := s.Read(ctx, []Op{op}); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("read of %+v: %v", op.Ext, err)
		}
	}
	if err := s.Read(ctx, []Op{{Ext: frame.Extent{Len: 1, GenIndex: 1 << 50}, Buf: make([]byte, 1)}}); err != nil {
		t.Fatalf("generation index outside the mapping: %v", err)
	}
}

// TestShmWriteEach: WriteEach writes what Write does and hands every byte
// it wrote to its callback once, in order, in chunks of at most WriteChunk
// bytes; a stale extent gets neither bytes nor callbacks.
func TestShmWriteEach(t *testing.T) {
	h, s := newHost(t)
	ctx := context.Background()
	sizes := []int64{1, WriteChunk, 3*WriteChunk + 7}
	ops, exts := make([]Op, len(sizes)), make([]tiers.Extent, len(sizes))
	for i, n := range sizes {
		e, err := h.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		exts[i] = e
		buf := make([]byte, n)
		for j := range buf {
			buf[j] = byte(j*7 + i)
		}
		ops[i] = Op{Ext: extentOf(h, e), Buf: buf}
	}
	seen := make([][]byte, len(ops))
	err := s.WriteEach(ctx, ops, func(i int, p []byte) {
		if len(p) == 0 || len(p) > WriteChunk {
			t.Errorf("op %d: a chunk of %d bytes", i, len(p))
		}
		seen[i] = append(seen[i], p...)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		e := exts[i]
		if !op.OK || !bytes.Equal(h.Bytes(e), op.Buf) || !bytes.Equal(seen[i], op.Buf) {
			t.Fatalf("op %d: ok %v, arena equal %v, handed equal %v", i, op.OK, bytes.Equal(h.Bytes(e), op.Buf), bytes.Equal(seen[i], op.Buf))
		}
	}
	h.Free(exts[0])
	called := false
	if err := s.WriteEach(ctx, ops[:1], func(int, []byte) { called = true }); !errors.Is(err, ErrStale) || called {
		t.Fatalf("write to a freed extent: %v, callback called %v", err, called)
	}
}

// TestShmWritePieces: a Write whose source is Pieces places them in the
// extent in order, with WriteEach handing every source byte once, in
// order; pieces that do not add up to the extent are refused unwritten.
func TestShmWritePieces(t *testing.T) {
	h, s := newHost(t)
	ctx := context.Background()
	n := int64(3*WriteChunk + 11)
	e, err := h.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, n)
	for j := range page {
		page[j] = byte(j*13 + 5)
	}
	cuts := []int64{0, 100, 100, WriteChunk + 3, n} // an empty piece among them
	var pieces [][]byte
	for k := 1; k < len(cuts); k++ {
		pieces = append(pieces, page[cuts[k-1]:cuts[k]])
	}
	ops := []Op{{Ext: extentOf(h, e), Pieces: pieces}}
	var seen []byte
	if err := s.WriteEach(ctx, ops, func(i int, p []byte) { seen = append(seen, p...) }); err != nil || !ops[0].OK {
		t.Fatalf("write from pieces: ok %v, %v", ops[0].OK, err)
	}
	if !bytes.Equal(h.Bytes(e), page) || !bytes.Equal(seen, page) {
		t.Fatalf("arena equal %v, handed equal %v", bytes.Equal(h.Bytes(e), page), bytes.Equal(seen, page))
	}
	clear(h.Bytes(e))
	if err := s.Write(ctx, ops); err != nil || !bytes.Equal(h.Bytes(e), page) {
		t.Fatalf("write from pieces without a callback: %v, arena equal %v", err, bytes.Equal(h.Bytes(e), page))
	}
	clear(h.Bytes(e))
	short := []Op{{Ext: extentOf(h, e), Pieces: pieces[:len(pieces)-1]}}
	if err := s.Write(ctx, short); !errors.Is(err, ErrOutOfRange) || short[0].OK {
		t.Fatalf("pieces short of the extent: ok %v, %v", short[0].OK, err)
	}
	if !bytes.Equal(h.Bytes(e), make([]byte, n)) {
		t.Fatal("a refused write changed the arena")
	}
}

// TestShmReadRacesReuse: one goroutine frees and reallocates the same
// slots, filling each new extent with its own byte; readers copy extents
// captured before. A copy reported OK must be all the byte its extent was
// filled with. Bounded at one second.
func TestShmReadRacesReuse(t *testing.T) {
	h, s := newHost(t)
	const size = 32 << 10
	type rec struct {
		ext  frame.Extent
		fill byte
	}
	var cur atomic.Pointer[[]rec]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var live []tiers.Extent
		fill := byte(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, e := range live {
				h.Free(e)
			}
			live = live[:0]
			var recs []rec
			for {
				e, err := h.Alloc(size)
				if err != nil {
					break
				}
				fill++
				b := h.Bytes(e)
				for i := range b {
					b[i] = fill
				}
				live = append(live, e)
				recs = append(recs, rec{extentOf(h, e), fill})
			}
			cur.Store(&recs)
		}
	})
	var reads, oks atomic.Int64
	var bad atomic.Value
	for range 2 {
		wg.Go(func() {
			buf := make([]byte, size)
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := cur.Load()
				if p == nil {
					continue
				}
				for _, r := range *p {
					ops := []Op{{Ext: r.ext, Buf: buf}}
					if err := s.Read(context.Background(), ops); err != nil {
						bad.Store(err)
						return
					}
					reads.Add(1)
					if !ops[0].OK {
						continue
					}
					oks.Add(1)
					if bytes.Count(buf, []byte{r.fill}) != size {
						bad.Store(errors.New("a copy reported OK holds bytes of another owner"))
						return
					}
				}
			}
		})
	}
	// Until the checks have something to say: copies read intact, others
	// discarded as raced.
	poll.Until(t, 30*time.Second, 10*time.Millisecond, "500 copies intact and some raced", func() bool {
		return oks.Load() >= 500 && reads.Load() > oks.Load() || bad.Load() != nil
	})
	close(stop)
	wg.Wait()
	if err, _ := bad.Load().(error); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d copies, %d intact, %d discarded as raced", reads.Load(), oks.Load(), reads.Load()-oks.Load())
	if reads.Load() == 0 {
		t.Fatal("no reads")
	}
}

// TestShmGenerationRecheck: a read whose copy overlaps its slot's reuse is
// a miss, on every run. The reader's buffer is the slot's own generation
// word, through a second, writable mapping of the generations memfd, and
// the page holds the generation the slot's next owner gets (Gen+2: freed,
// then reallocated). The first check passes, the copy itself moves the word
// on, and only the re-check after the copy can refuse it: the interleaving
// TestShmReadRacesReuse waits for by chance. The same read into an
// ordinary buffer is OK, so the miss is the re-check's.
func TestShmGenerationRecheck(t *testing.T) {
	h, s := newHost(t)
	ctx := context.Background()
	a, err := h.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	ext := extentOf(h, a)
	next := ext.Gen + 2
	binary.NativeEndian.PutUint64(h.Bytes(a), next)

	r := []Op{{Ext: ext, Buf: make([]byte, 8)}}
	if err := s.Read(ctx, r); err != nil || !r[0].OK || binary.NativeEndian.Uint64(r[0].Buf) != next {
		t.Fatalf("read into a buffer of its own: ok %v, %v", r[0].OK, err)
	}

	gens, err := unix.Mmap(h.GenFD(), 0, int(h.GenWords()*8), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(gens)
	word := gens[ext.GenIndex*8 : ext.GenIndex*8+8]
	r = []Op{{Ext: ext, Buf: word}}
	if err := s.Read(ctx, r); err != nil {
		t.Fatal(err)
	}
	if g := h.Generation(a); g != next {
		t.Fatalf("the copy left the slot's generation at %d, want %d", g, next)
	}
	if r[0].OK {
		t.Fatalf("a copy that raced its slot's reuse (generation %d to %d) is reported OK", ext.Gen, next)
	}
	binary.NativeEndian.PutUint64(word, ext.Gen) // a's again, so Free takes it
	h.Free(a)
}

// TestConnPassesFDs: a Welcome with two fds crosses a socket pair, and the
// frames after it arrive in order.
func TestConnPassesFDs(t *testing.T) {
	a, b := socketPair(t)
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &frame.Welcome{Version: 1, NodeID: "n", ArenaSize: 1, GenWords: 1}
	if err := a.SendFDs(7, w, int(f.Fd()), int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(8, &frame.AbortOK{Aborted: 3}); err != nil {
		t.Fatal(err)
	}
	id, m, fds, err := b.RecvFDs(2)
	if err != nil || id != 7 || len(fds) != 2 || m.(*frame.Welcome).NodeID != "n" {
		t.Fatalf("RecvFDs: %d %#v %v %v", id, m, fds, err)
	}
	closeFDs(fds)
	if id, m, err := b.Recv(); err != nil || id != 8 || m.(*frame.AbortOK).Aborted != 3 {
		t.Fatalf("frame after the fds: %d %#v %v", id, m, err)
	}
}

func socketPair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	path := t.TempDir() + "/p.sock"
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewConn(s, 0), NewConn(c, 0)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
