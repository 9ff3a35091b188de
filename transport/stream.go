package transport

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/stratakv/strata/proto/frame"
)

// The raw data plane's socket side: frames whose body ends with bulk bytes
// (frame.Bulk: Page, Write, Put) are written with the bulk bytes
// referenced, not copied, and a Page's bytes are read straight into the
// caller's buffer.

// Frame is one frame of a SendFrames batch.
type Frame struct {
	ID  uint64
	Msg frame.Message
	// Pieces, when not nil, are the frame's bulk bytes, written in order
	// after its head (an engine's page in its K and V halves), in place of
	// Msg's own bulk, which must then be empty.
	Pieces [][]byte
}

// SendFrames writes frames with one writev: the frames' small parts are
// encoded, the bulk bytes of Page and Write frames are referenced, not
// copied. It returns once the kernel took every byte, so the caller may
// then reuse (or unpin) them.
func (c *Conn) SendFrames(frames ...Frame) error { return c.sendFrames(false, frames) }

// SendFramesLent is SendFrames, except that the bulk of a single page of
// 64 to 256 KiB may be lent to the kernel rather than copied into the
// socket (splice_linux.go): the kernel may still read it after
// SendFramesLent returns, until the peer has read it. The caller must not
// change it before the peer has answered every frame, as a put's sender
// waits for its answers anyway. Frames carrying more than one bulk are
// written: lent, a batch of 32 pages cost 125–133 CPU-µs a page against
// 81–86 written (BenchmarkPutSend, pages=32, three runs each).
func (c *Conn) SendFramesLent(frames ...Frame) error {
	return c.sendFrames(c.bulks(frames) <= 1, frames)
}

// bulks counts the frames that carry bulk bytes.
func (c *Conn) bulks(frames []Frame) int {
	n := 0
	for _, f := range frames {
		if bm, ok := c.at(f.Msg).(frame.Bulk); ok && (len(bm.Bulk()) > 0 || piecesLen(f.Pieces) > 0) {
			n++
		}
	}
	return n
}

func (c *Conn) sendFrames(lend bool, frames []Frame) error {
	c.wbuf = c.wbuf[:0]
	var bulks [][]byte
	var ends []int // where each bulk goes: after wbuf[:ends[i]]
	for _, f := range frames {
		bm, ok := c.at(f.Msg).(frame.Bulk)
		if !ok {
			c.wbuf = frame.Append(c.wbuf, f.ID, f.Msg)
			continue
		}
		var err error
		if f.Pieces != nil {
			if len(bm.Bulk()) > 0 {
				return fmt.Errorf("op %d: bulk bytes and pieces both: %w", f.Msg.Op(), ErrOutOfRange)
			}
			if c.wbuf, err = frame.AppendHeadLen(c.wbuf, f.ID, bm, piecesLen(f.Pieces)); err != nil {
				return err
			}
			for _, p := range f.Pieces {
				if len(p) > 0 {
					bulks, ends = append(bulks, p), append(ends, len(c.wbuf))
				}
			}
			continue
		}
		if c.wbuf, err = frame.AppendHead(c.wbuf, f.ID, bm); err != nil {
			return err
		}
		if len(bm.Bulk()) > 0 {
			bulks, ends = append(bulks, bm.Bulk()), append(ends, len(c.wbuf))
		}
	}
	bufs := make(net.Buffers, 0, 2*len(bulks)+1)
	prev := 0
	for i, b := range bulks {
		if ends[i] > prev {
			bufs = append(bufs, c.wbuf[prev:ends[i]])
		}
		bufs = append(bufs, b)
		prev = ends[i]
	}
	if prev < len(c.wbuf) {
		bufs = append(bufs, c.wbuf[prev:])
	}
	if err := c.writev(lend, bufs...); err != nil {
		return fmt.Errorf("sending %d frames: %w", len(frames), err)
	}
	return nil
}

// RecvPage reads one answer to a Read. A Page frame's bytes go straight
// into the buffer pick returns for it (pick sees the page without Data; it
// returns nil for a missing page); the returned Page's Data is that buffer,
// cut to the page. Any other frame (an Error) is decoded and returned as
// m. If pick fails, the page's bytes are read and dropped, so the
// connection stays in step, and its error is returned with the page. Any
// other error means the connection cannot continue. each, if not nil, is
// handed the page's bytes piece by piece as they arrive (to checksum them
// while the rest is in flight).
func (c *Conn) RecvPage(pick func(p *frame.Page, size int) ([]byte, error), each func(piece []byte)) (id uint64, m frame.Message, err error) {
	var one [1][]byte
	size := 0
	id, m, err = c.RecvPageInto(func(p *frame.Page, n int) ([][]byte, error) {
		dst, err := pick(p, n)
		one[0], size = dst, n
		return one[:], err
	}, each)
	if p, ok := m.(*frame.Page); ok && err == nil && size > 0 {
		p.Data = one[0][:size]
	}
	return id, m, err
}

// RecvPageInto is RecvPage whose page goes into the pieces pick returns,
// filled in order (an engine's page in its K and V halves), which together
// must hold the page; the returned Page has no Data.
func (c *Conn) RecvPageInto(pick func(p *frame.Page, size int) ([][]byte, error), each func(piece []byte)) (id uint64, m frame.Message, err error) {
	var h [frame.HeaderSize + frame.PageHeadSize]byte
	n, op, id, err := c.recvHeader(h[:])
	if err != nil {
		return 0, nil, err
	}
	if op != frame.OpPage {
		return c.recvBody(n, op, id)
	}
	if n < frame.PageHeadSize {
		return 0, nil, fmt.Errorf("page frame of %d bytes: %w", n, frame.ErrMalformed)
	}
	if _, err := io.ReadFull(c.r, h[frame.HeaderSize:]); err != nil {
		return 0, nil, fmt.Errorf("reading a page header: %w", err)
	}
	p, sumLen, size, err := frame.ParsePageHead(h[frame.HeaderSize:], n)
	if err != nil {
		return 0, nil, err
	}
	if sumLen > 0 {
		p.Checksum = make([]byte, sumLen)
		if _, err := io.ReadFull(c.r, p.Checksum); err != nil {
			return 0, nil, fmt.Errorf("reading a page checksum: %w", err)
		}
	}
	dst, perr := pick(p, size)
	if have := piecesLen(dst); perr == nil && have < size {
		perr = fmt.Errorf("page %d of %d bytes, buffer %d: %w", p.Index, size, have, ErrOutOfRange)
	}
	if perr != nil {
		if _, err := io.CopyN(io.Discard, c.r, int64(size)); err != nil {
			return 0, nil, fmt.Errorf("skipping page %d: %w", p.Index, err)
		}
		return id, p, perr
	}
	got := 0
	for _, piece := range dst {
		piece = piece[:min(len(piece), size-got)]
		for off := 0; off < len(piece); {
			k, err := c.r.Read(piece[off:])
			if k > 0 && each != nil {
				each(piece[off : off+k])
			}
			off += k
			if err != nil && off < len(piece) {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, nil, fmt.Errorf("reading page %d (%d of %d bytes): %w", p.Index, got+off, size, err)
			}
		}
		got += len(piece)
	}
	return id, p, nil
}

func piecesLen(pieces [][]byte) int {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	return n
}

// RecvBulk is Recv that leaves a Put's or a Write's data in the
// connection, so that it can be read straight where it goes: the Put
// returned has no Data (its Page.Size is the data's length), the Write no
// Data (Bulk says its length), and the data waits for ReadBulk, which
// reads it into the caller's buffer, or SkipBulk, which drops what is
// left; SkipBulk must come before the next receive. Other frames are read
// whole.
func (c *Conn) RecvBulk() (id uint64, m frame.Message, err error) {
	var h [frame.HeaderSize + frame.WriteHeadSize]byte
	n, op, id, err := c.recvHeader(h[:])
	if err != nil {
		return 0, nil, err
	}
	switch {
	case n > c.maxFrame:
	case op == frame.OpPut && n > frame.PutHeadLen(c.version):
		return c.recvPutHead(n, id)
	case op == frame.OpWrite && n >= frame.WriteHeadSize:
		head := h[frame.HeaderSize : frame.HeaderSize+frame.WriteHeadSize]
		if _, err := io.ReadFull(c.r, head); err != nil {
			return 0, nil, fmt.Errorf("reading a write's head: %w", err)
		}
		w := &frame.Write{}
		if err := w.Decode(head); err != nil {
			c.bulk = n - len(head)
			return id, nil, fmt.Errorf("op %d: %w", op, err)
		}
		w.Data, c.bulk = nil, n-len(head)
		return id, w, nil
	}
	return c.recvBody(n, op, id)
}

// recvPutHead reads an n-byte Put's body up to its data (RecvBulk) and
// returns the Put, its data left in the connection: the fixed head, the
// event info (frame.ReadPutEvent), the checksum.
func (c *Conn) recvPutHead(n int, id uint64) (uint64, frame.Message, error) {
	body := c.rbuf[:0]
	body = append(body, make([]byte, frame.PutHeadLen(c.version))...)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, nil, fmt.Errorf("reading a put's head: %w", err)
	}
	body, err := frame.ReadPutEvent(body, c.version, n-len(body)-1, c.r)
	c.rbuf = body
	switch {
	case errors.Is(err, frame.ErrMalformed):
		c.bulk = n - len(body) // skipped, so the stream stays in step
		return id, nil, fmt.Errorf("op %d: %w", frame.OpPut, err)
	case err != nil:
		return 0, nil, err
	}
	var l [1]byte
	if _, err := io.ReadFull(c.r, l[:]); err != nil {
		return 0, nil, fmt.Errorf("reading a put's checksum: %w", err)
	}
	sumLen := int(l[0])
	if n < len(body)+1+sumLen {
		return 0, nil, fmt.Errorf("put of %d bytes with a %d-byte checksum: %w", n, sumLen, frame.ErrMalformed)
	}
	at := len(body)
	body = append(append(body, l[0]), make([]byte, sumLen)...)
	if _, err := io.ReadFull(c.r, body[at+1:]); err != nil {
		return 0, nil, fmt.Errorf("reading a put's checksum: %w", err)
	}
	c.rbuf = body
	p := c.at(&frame.Put{}).(*frame.Put)
	if err := p.Decode(body); err != nil {
		// The head is bad; the data is skipped so the stream stays in step.
		c.bulk = n - len(body)
		return id, nil, fmt.Errorf("op %d: %w", frame.OpPut, err)
	}
	c.bulk = n - len(body)
	p.Page.Size = int64(c.bulk)
	return id, p, nil
}

// Bulk is how many bytes of the data RecvBulk left are still to read.
func (c *Conn) Bulk() int { return c.bulk }

// ReadBulk reads len(dst) bytes of the data RecvBulk left into dst.
func (c *Conn) ReadBulk(dst []byte) error {
	if len(dst) > c.bulk {
		return fmt.Errorf("reading %d bytes of a frame's %d left: %w", len(dst), c.bulk, ErrOutOfRange)
	}
	k, err := io.ReadFull(c.r, dst)
	c.bulk -= k
	if err != nil {
		return fmt.Errorf("reading a frame's data: %w", err)
	}
	return nil
}

// SkipBulk drops the data RecvBulk left that ReadBulk did not read.
func (c *Conn) SkipBulk() error {
	if c.bulk == 0 {
		return nil
	}
	k, err := io.CopyN(io.Discard, c.r, int64(c.bulk))
	c.bulk -= int(k)
	if err != nil {
		return fmt.Errorf("skipping a frame's data: %w", err)
	}
	return nil
}
