package transport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/stratakv/strata/proto/frame"
)

// Conn is one end of a framed connection: the shm control protocol over a
// Unix stream socket, or the raw data plane over TCP (stream.go). It is not
// safe for concurrent use; a client keeps a pool.
type Conn struct {
	nc       net.Conn
	uc       *net.UnixConn // nil for a connection that is not a Unix socket
	r        *bufio.Reader
	raw      *RawSocket // stream sockets on Linux: reads and writes without the runtime's blocking-call path; else nil
	wbuf     []byte
	queued   []byte // frames Queue encoded, sent with the next write
	rbuf     []byte
	maxFrame int
	deadline time.Time // the last one SetDeadline set
	// reused are the messages Recv decodes Get, Read and Lookup frames
	// into, by op: their key lists are the largest bodies a node decodes
	// (32 KB for 1,000 keys), so they are not allocated anew per request.
	reused map[uint8]frame.Message
	// bulk is how many bytes of the data of the frame RecvBulk read last
	// are still to read (ReadBulk, SkipBulk).
	bulk int
	// version is the protocol version the handshake settled (SetVersion;
	// 0: frame.ProtocolVersion).
	version uint16
}

// SetVersion makes c send and read the messages whose layout depends on
// the connection's version (frame.Versioned) as version v lays them out:
// each end calls it once its handshake settled v. Send stamps v on such a
// message it is handed.
func (c *Conn) SetVersion(v uint16) { c.version = v }

// at lays m out at the connection's version where its layout depends on it.
func (c *Conn) at(m frame.Message) frame.Message {
	if vm, ok := m.(frame.Versioned); ok && c.version != 0 {
		vm.SetVersion(c.version)
	}
	return m
}

// NewConn wraps uc; frames longer than maxFrame (0: frame.DefaultMaxFrame) fail
// to read with frame.ErrTooLarge.
// Its reads and writes after the first read (RecvFDs) go through a
// RawSocket, as a stream connection's do: an shm put or get is one small
// frame each way, whose system calls would otherwise wake the runtime's
// monitor thread.
func NewConn(uc *net.UnixConn, maxFrame int) *Conn {
	c := newConn(uc, maxFrame, 64<<10)
	c.uc = uc
	if c.raw = NewRawSocket(uc); c.raw != nil {
		c.raw.idle = c.Flush
		c.r.Reset(c.raw)
	}
	return c
}

// NewStreamConn wraps any stream connection (the raw TCP data plane); it
// cannot pass fds. Its read buffer is small (streamBuffer): page bytes
// bypass it, read straight into the caller's buffer, so the less of a page
// a frame header's read pulls in, the less is copied twice.
func NewStreamConn(nc net.Conn, maxFrame int) *Conn {
	c := newConn(nc, maxFrame, streamBuffer)
	if c.raw = NewRawSocket(nc); c.raw != nil {
		c.raw.idle = c.Flush
		c.r.Reset(c.raw)
	}
	return c
}

// streamBuffer is the read buffer of a stream connection.
const streamBuffer = 4 << 10

func newConn(nc net.Conn, maxFrame, buffer int) *Conn {
	if maxFrame <= 0 {
		maxFrame = frame.DefaultMaxFrame
	}
	c := &Conn{nc: nc, maxFrame: maxFrame}
	c.r = bufio.NewReaderSize(idleReader{c}, buffer)
	return c
}

// SetReadPoll makes c's reads poll as p allows (nil: not at all). It
// applies where c reads through a RawSocket; elsewhere reads sleep in the
// runtime's poller at once.
func (c *Conn) SetReadPoll(p *ReadPoll) {
	if c.raw != nil {
		c.raw.poll = p
	}
}

// Unix is the underlying socket; nil for a connection made by
// NewStreamConn from something else.
func (c *Conn) Unix() *net.UnixConn { return c.uc }

// Net is the underlying connection.
func (c *Conn) Net() net.Conn { return c.nc }

// SetDeadline sets the connection's read and write deadline, skipping the
// runtime's timer work when it is the one already set (the common case of
// calls without a deadline). A deadline set on Net directly is not seen.
func (c *Conn) SetDeadline(t time.Time) error {
	if t.Equal(c.deadline) {
		return nil
	}
	c.deadline = t
	return c.nc.SetDeadline(t)
}

// Send writes one frame carrying m, with one write.
func (c *Conn) Send(id uint64, m frame.Message) error {
	if _, ok := m.(frame.Bulk); ok {
		return c.SendFrames(Frame{ID: id, Msg: m})
	}
	c.wbuf = frame.Append(c.wbuf[:0], id, c.at(m))
	if err := c.writev(false, c.wbuf); err != nil {
		return fmt.Errorf("sending op %d: %w", m.Op(), err)
	}
	return nil
}

// # Answers queued behind the next request
//
// A client that pipelines requests (a batch of one-call Put frames, one
// per page, sent in one writev) used to get each answer in a write of its
// own: a system call on the node and a wake-up of the client's reader per
// page, for a few bytes. So a server queues its small answers (Queue) and
// sends them with its next write, or at the latest when a read of the
// connection finds nothing to read and would wait: the read sends them
// first (RawSocket's idle; idleReader where there is no raw socket). An
// answer is then held only while the node has more requests in hand,
// never while it waits for one, so no client waits longer for it than for
// the answers of the requests it sent before it; a client that waits for
// each answer gets it as soon as before. The check costs nothing: the
// read that finds the socket empty was made anyway.

// maxQueued bounds the answers queued (Queue) before they are sent anyway.
const maxQueued = 64 << 10

// Queue encodes a frame without bulk bytes to go out with the
// connection's next write, or by Flush (Answers queued behind the next
// request); a frame with bulk bytes is sent now, after them.
func (c *Conn) Queue(id uint64, m frame.Message) error {
	if _, ok := m.(frame.Bulk); ok {
		return c.Send(id, m)
	}
	c.queued = frame.Append(c.queued, id, c.at(m))
	if len(c.queued) >= maxQueued {
		return c.Flush()
	}
	return nil
}

// Flush sends the frames Queue holds.
func (c *Conn) Flush() error {
	if len(c.queued) == 0 {
		return nil
	}
	if err := c.writev(false); err != nil {
		return fmt.Errorf("sending queued answers: %w", err)
	}
	return nil
}

// idleReader reads a connection without a raw socket, sending the queued
// answers before each read of the connection (which may wait).
type idleReader struct{ c *Conn }

func (r idleReader) Read(p []byte) (int, error) {
	if err := r.c.Flush(); err != nil {
		return 0, err
	}
	return r.c.nc.Read(p)
}

// writev writes every byte of bufs, after the frames Queue holds: through
// the raw socket where there is one, else with one net.Buffers write.
// lend: the raw socket may lend the large ones to the kernel
// (SendFramesLent).
func (c *Conn) writev(lend bool, bufs ...[]byte) error {
	if len(c.queued) > 0 {
		bufs = append([][]byte{c.queued}, bufs...)
		defer func() { c.queued = c.queued[:0] }()
	}
	if c.raw != nil {
		if lend {
			return c.raw.writevLent(bufs...)
		}
		return c.raw.Writev(bufs...)
	}
	if b := baseOf(c.nc); b != nil {
		b.hold()
		nb := net.Buffers(bufs)
		_, err := nb.WriteTo(c.nc)
		if rerr := b.release(); err == nil {
			err = rerr
		}
		return err
	}
	nb := net.Buffers(bufs)
	_, err := nb.WriteTo(c.nc)
	return err
}

// SendFDs writes one frame carrying m with fds attached (SCM_RIGHTS).
func (c *Conn) SendFDs(id uint64, m frame.Message, fds ...int) error {
	if c.uc == nil {
		return fmt.Errorf("sending fds on a %s connection: %w", c.nc.LocalAddr().Network(), frame.ErrMalformed)
	}
	if err := c.Flush(); err != nil {
		return err
	}
	c.wbuf = frame.Append(c.wbuf[:0], id, m)
	n, _, err := c.uc.WriteMsgUnix(c.wbuf, rights(fds), nil)
	if err != nil {
		return fmt.Errorf("sending op %d with %d fds: %w", m.Op(), len(fds), err)
	}
	if n < len(c.wbuf) {
		if _, err := c.uc.Write(c.wbuf[n:]); err != nil {
			return fmt.Errorf("sending op %d: %w", m.Op(), err)
		}
	}
	return nil
}

// Recv reads one frame and decodes it. A frame over the limit or that
// does not decode is an error; the connection should then be closed. A
// Get, Read or Lookup it returns is the connection's own, valid until the
// next Recv.
func (c *Conn) Recv() (id uint64, m frame.Message, err error) {
	var h [frame.HeaderSize]byte
	n, op, id, err := c.recvHeader(h[:])
	if err != nil {
		return 0, nil, err
	}
	return c.recvBody(n, op, id)
}

// recvHeader reads a frame's header into h (at least frame.HeaderSize
// bytes) and parses it.
func (c *Conn) recvHeader(h []byte) (n int, op uint8, id uint64, err error) {
	h = h[:frame.HeaderSize]
	if _, err := io.ReadFull(c.r, h); err != nil {
		return 0, 0, 0, err
	}
	return frame.ParseHeader(h)
}

// recvBody reads and decodes the n-byte body of a frame of op and id.
func (c *Conn) recvBody(n int, op uint8, id uint64) (uint64, frame.Message, error) {
	if n > c.maxFrame {
		return 0, nil, fmt.Errorf("%d-byte frame, the limit is %d: %w", n, c.maxFrame, frame.ErrTooLarge)
	}
	body, err := c.readBody(n)
	if err != nil {
		return 0, nil, err
	}
	m := c.message(op)
	if m == nil {
		return id, nil, fmt.Errorf("op %d: %w", op, frame.ErrMalformed)
	}
	if err := m.Decode(body); err != nil {
		return id, nil, fmt.Errorf("op %d: %w", op, err)
	}
	return id, m, nil
}

func (c *Conn) readBody(n int) ([]byte, error) {
	if cap(c.rbuf) < n {
		c.rbuf = make([]byte, n)
	}
	body := c.rbuf[:n]
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, fmt.Errorf("reading a %d-byte frame: %w", n, err)
	}
	return body, nil
}

// message is the message Recv decodes a frame of op into: for Get, Read
// and Lookup the one the connection keeps for the op (valid, keys and all,
// until the next Recv: a node handles each request before it reads the
// next), else a new one; nil for an unknown op.
func (c *Conn) message(op uint8) frame.Message {
	switch op {
	case frame.OpGet, frame.OpRead, frame.OpLookup:
	default:
		return c.at(frame.NewMessage(op))
	}
	m := c.reused[op]
	if m == nil {
		if c.reused == nil {
			c.reused = make(map[uint8]frame.Message, 3)
		}
		m = frame.NewMessage(op)
		c.reused[op] = m
	}
	return m
}

// RecvFDs reads one frame carrying up to max fds (SCM_RIGHTS), which must
// come with its first bytes: the connection's first read. The caller owns
// the fds.
func (c *Conn) RecvFDs(max int) (id uint64, m frame.Message, fds []int, err error) {
	if c.uc == nil {
		return 0, nil, nil, fmt.Errorf("receiving fds on a %s connection: %w", c.nc.LocalAddr().Network(), frame.ErrMalformed)
	}
	if c.r.Buffered() > 0 {
		return 0, nil, nil, fmt.Errorf("receiving fds after buffered bytes: %w", frame.ErrMalformed)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, oobSpace(max))
	n, oobn, _, _, err := c.uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("receiving fds: %w", err)
	}
	if fds, err = parseRights(oob[:oobn]); err != nil {
		return 0, nil, nil, err
	}
	// The rest of the frame (if any) follows through the buffered reader.
	var rest io.Reader = c.uc
	if c.raw != nil {
		rest = c.raw
	}
	c.r = bufio.NewReaderSize(io.MultiReader(bytesReader(buf[:n]), rest), 64<<10)
	id, m, err = c.Recv()
	if err != nil {
		closeFDs(fds)
		return 0, nil, nil, err
	}
	return id, m, fds, nil
}

// Close closes the socket (and the pipe it lends bytes through, if any).
func (c *Conn) Close() error {
	err := c.nc.Close()
	if c.raw != nil {
		c.raw.closeLend()
	}
	return err
}
