package rdma

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/stratakv/strata/namespace"
)

// The raw data plane: the framing of frame.go over TCP, for clients on
// other hosts, with page bytes carried inline instead of through a shared
// arena. Three messages end with bulk bytes that the frame's length counts
// but that are written and read apart from the frame (Conn.SendFrames,
// Conn.RecvPage): from the arena straight to the socket with one writev,
// and from the socket straight into the caller's buffer.
//
//	Read   = ns [32] | lease u64 | n u32 | n × key [32]
//	Page   = index u32 | found u8 | checksum bytes8 | data
//	Write  = ns [32] | write id u64 | offset u64 | data          (one-way)
//	Put    = ns [32] | ttl ms u32 | key [32] | parent [32] | has parent u8 |
//	         depth u32 | chain depth u32 | checksum bytes8 | data
//	PutOK  = reserve status u8 | commit status u8 | reason str
//	Lookup   = ns [32] | lease u8 | lease ttl ms u32 | n u32 | n × key [32]
//	LookupOK = hit prefix u32 | lease id u64 | expires unix ms i64 |
//	           lease pages u32 | n u32 | n × present u8
//
// A Read is answered by n Page frames in key order (a missing page has
// found 0 and no data), or by one Error frame. Write is one-way like
// Served: its outcome shows at Commit (a reservation that missed bytes
// commits INCOMPLETE). A put is Reserve (ReserveOK never maps an extent on
// tcp), then the Writes and the Commit in one writev, then CommitOK: two
// round trips. Since protocol version 3 a put of pages up to MaxWriteChunk
// may instead be one Put frame per page, all in one writev, each answered
// by a PutOK in order: one round trip. The node reserves, writes and
// commits each page as its frame arrives; a page it already has (reserve
// status Exists) or refuses (Rejected, with the reason) costs the bytes
// sent for nothing, which is why a batch that may be mostly present asks
// with Reserve first. Version 3 also answers Lookup on the plane (lease id
// 0: no lease taken), as the gRPC Lookup does, in one frame each way. Hello and Welcome are as on the Unix socket, without fds
// (the Welcome's arena fields are zero); the token scopes requests exactly
// as for gRPC. Get (arena extents) is refused on tcp.
//
// A node advertises its raw address in the gRPC header AddrHeader of its
// OpenNamespace answers, so a client that opened a namespace knows where to
// connect; a node without the raw listener sends no header.

// AddrHeader is the gRPC response header naming a node's raw data-plane
// address (host:port); a host the client cannot use (0.0.0.0, ::) means
// the host the client reached the node's gRPC at.
const AddrHeader = "strata-raw-addr"

// MaxWriteChunk is the most data bytes a client puts in one Write frame:
// half of DefaultMaxFrame, so a Write always fits a node's frame limit.
const MaxWriteChunk = DefaultMaxFrame / 2

// Op codes of the raw data plane.
const (
	OpRead     = 13
	OpPage     = 14
	OpWrite    = 15
	OpPut      = 16
	OpPutOK    = 17
	OpLookup   = 18
	OpLookupOK = 19
)

// Read asks for pages' bytes, inline. With a lease (non-zero) it must be
// live, else the answer is an Error.
type Read struct {
	NS    namespace.ID
	Lease uint64
	Keys  []namespace.Key
}

// Page answers one key of a Read. Data is the page (empty when not Found);
// when decoded by Recv it aliases the connection's buffer, valid until the
// next Recv.
type Page struct {
	Index    uint32
	Found    bool
	Checksum []byte
	Data     []byte
}

// Write puts bytes into an open reservation at Offset. Data aliases the
// connection's buffer when decoded, valid until the next Recv.
type Write struct {
	NS      namespace.ID
	WriteID uint64
	Offset  uint64
	Data    []byte
}

// Put is one page, reserved, written and committed in one frame. Data
// aliases the connection's buffer when decoded, valid until the next Recv.
type Put struct {
	NS       namespace.ID
	TTLms    uint32   // the reservation's deadline; 0 = the node's default
	Page     PageSpec // Size is len(Data) on the wire
	Checksum []byte
	Data     []byte
}

// PutOK answers a Put: the reserve status (SlotReserved, SlotExists,
// SlotRejected), the commit status when reserved (the store's
// CommitStatus values), and why, for a rejection or a failed commit.
type PutOK struct {
	Reserve uint8
	Commit  uint8
	Reason  string
}

// Lookup asks which of Keys the node holds and how long a prefix of them
// it holds, optionally leasing that prefix.
type Lookup struct {
	NS         namespace.ID
	Lease      bool
	LeaseTTLms uint32 // 0: the node's default
	Keys       []namespace.Key
}

// LookupOK answers a Lookup. LeaseID 0: no lease was taken.
type LookupOK struct {
	HitPrefix  uint32
	LeaseID    uint64
	ExpiresMs  int64
	LeasePages uint32
	Present    []bool
}

func (*Lookup) Op() uint8   { return OpLookup }
func (*LookupOK) Op() uint8 { return OpLookupOK }

func (m *Lookup) Append(b []byte) []byte {
	b = appendU32(appendBool(append(b, m.NS[:]...), m.Lease), m.LeaseTTLms)
	b = appendU32(b, uint32(len(m.Keys)))
	for i := range m.Keys {
		b = append(b, m.Keys[i][:]...)
	}
	return b
}

func (m *Lookup) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.Lease, m.LeaseTTLms = r.bool("lease"), r.u32("lease ttl")
	m.Keys = reuseKeys(m.Keys, r.count(namespace.KeySize, "keys"))
	for i := range m.Keys {
		m.Keys[i] = r.key("key")
	}
	return r.done()
}

func (m *LookupOK) Append(b []byte) []byte {
	b = appendU32(appendU64(appendU64(appendU32(b, m.HitPrefix), m.LeaseID), uint64(m.ExpiresMs)), m.LeasePages)
	b = appendU32(b, uint32(len(m.Present)))
	for _, p := range m.Present {
		b = appendBool(b, p)
	}
	return b
}

func (m *LookupOK) Decode(body []byte) error {
	r := reader{b: body}
	m.HitPrefix, m.LeaseID, m.ExpiresMs = r.u32("hit prefix"), r.u64("lease id"), r.int64("expires")
	m.LeasePages = r.u32("lease pages")
	m.Present = make([]bool, r.count(1, "keys"))
	for i := range m.Present {
		m.Present[i] = r.bool("present")
	}
	return r.done()
}

func (*Read) Op() uint8  { return OpRead }
func (*Page) Op() uint8  { return OpPage }
func (*Write) Op() uint8 { return OpWrite }
func (*Put) Op() uint8   { return OpPut }
func (*PutOK) Op() uint8 { return OpPutOK }

// dataMessage is a message whose body ends with bulk bytes.
type dataMessage interface {
	Message
	appendHead(b []byte) []byte
	bulk() []byte
}

func (m *Read) Append(b []byte) []byte   { return (*Get)(m).Append(b) }
func (m *Read) Decode(body []byte) error { return (*Get)(m).Decode(body) }

func (m *Page) appendHead(b []byte) []byte {
	return appendBytes8(appendBool(appendU32(b, m.Index), m.Found), m.Checksum)
}
func (m *Page) bulk() []byte           { return m.Data }
func (m *Page) Append(b []byte) []byte { return append(m.appendHead(b), m.Data...) }

func (m *Page) Decode(body []byte) error {
	r := reader{b: body}
	m.Index, m.Found, m.Checksum = r.u32("index"), r.bool("found"), r.bytes8("checksum")
	m.Data = r.rest()
	if r.err == nil && !m.Found && len(m.Data) > 0 {
		r.fail("data for a missing page")
	}
	return r.done()
}

func (m *Write) appendHead(b []byte) []byte {
	return appendU64(appendU64(append(b, m.NS[:]...), m.WriteID), m.Offset)
}
func (m *Write) bulk() []byte           { return m.Data }
func (m *Write) Append(b []byte) []byte { return append(m.appendHead(b), m.Data...) }

func (m *Write) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.WriteID, m.Offset = r.u64("write id"), r.u64("offset")
	m.Data = r.rest()
	return r.done()
}

func (m *Put) appendHead(b []byte) []byte {
	b = appendU32(append(b, m.NS[:]...), m.TTLms)
	p := m.Page
	b = appendBool(append(append(b, p.Key[:]...), p.Parent[:]...), p.HasParent)
	return appendBytes8(appendU32(appendU32(b, p.Depth), p.ChainDepth), m.Checksum)
}
func (m *Put) bulk() []byte           { return m.Data }
func (m *Put) Append(b []byte) []byte { return append(m.appendHead(b), m.Data...) }

func (m *Put) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.TTLms = r.u32("ttl")
	m.Page = PageSpec{Key: r.key("key"), Parent: r.key("parent"), HasParent: r.bool("has parent"),
		Depth: r.u32("depth"), ChainDepth: r.u32("chain depth")}
	m.Checksum = r.bytes8("checksum")
	m.Data = r.rest()
	m.Page.Size = int64(len(m.Data))
	return r.done()
}

func (m *PutOK) Append(b []byte) []byte { return appendStr(append(b, m.Reserve, m.Commit), m.Reason) }

func (m *PutOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Reserve, m.Commit, m.Reason = r.u8("reserve status"), r.u8("commit status"), r.str("reason")
	return r.done()
}

// rest takes every byte left (nil for none).
func (r *reader) rest() []byte {
	if r.err != nil || len(r.b) == 0 {
		return nil
	}
	p := r.b
	r.b = nil
	return p
}

// Frame is one frame of a SendFrames batch.
type Frame struct {
	ID  uint64
	Msg Message
}

// SendFrames writes frames with one writev: the frames' small parts are
// encoded, the bulk bytes of Page and Write frames are referenced, not
// copied. It returns once the kernel took every byte, so the caller may
// then reuse (or unpin) them.
func (c *Conn) SendFrames(frames ...Frame) error {
	c.wbuf = c.wbuf[:0]
	var bulks [][]byte
	var ends []int // where each bulk goes: after wbuf[:ends[i]]
	for _, f := range frames {
		dm, ok := f.Msg.(dataMessage)
		if !ok {
			c.wbuf = AppendFrame(c.wbuf, f.ID, f.Msg)
			continue
		}
		start := len(c.wbuf)
		c.wbuf = append(c.wbuf, 0, 0, 0, 0, f.Msg.Op(), 0, 0, 0)
		c.wbuf = binary.LittleEndian.AppendUint64(c.wbuf, f.ID)
		c.wbuf = dm.appendHead(c.wbuf)
		n := len(c.wbuf) - start - 4 + len(dm.bulk())
		if n > 1<<32-1 {
			return fmt.Errorf("op %d: %d-byte frame: %w", f.Msg.Op(), n, ErrFrameTooLarge)
		}
		binary.LittleEndian.PutUint32(c.wbuf[start:], uint32(n))
		if len(dm.bulk()) > 0 {
			bulks, ends = append(bulks, dm.bulk()), append(ends, len(c.wbuf))
		}
	}
	bufs := make(net.Buffers, 0, 2*len(bulks)+1)
	prev := 0
	for i, b := range bulks {
		bufs = append(bufs, c.wbuf[prev:ends[i]], b)
		prev = ends[i]
	}
	if prev < len(c.wbuf) {
		bufs = append(bufs, c.wbuf[prev:])
	}
	if err := c.writev(bufs...); err != nil {
		return fmt.Errorf("sending %d frames: %w", len(frames), err)
	}
	return nil
}

// pageHead is the fixed part of a Page: index, found, checksum length.
const pageHead = 4 + 1 + 1

// RecvPage reads one answer to a Read. A Page frame's bytes go straight
// into the buffer pick returns for it (pick sees the page without Data; it
// returns nil for a missing page); the returned Page's Data is that buffer,
// cut to the page. Any other frame (an Error) is decoded and returned as
// m. If pick fails, the page's bytes are read and dropped, so the
// connection stays in step, and its error is returned with the page. Any
// other error means the connection cannot continue. each, if not nil, is
// handed the page's bytes piece by piece as they arrive (to checksum them
// while the rest is in flight).
func (c *Conn) RecvPage(pick func(p *Page, size int) ([]byte, error), each func(piece []byte)) (id uint64, m Message, err error) {
	var h [FrameHeader + pageHead]byte
	if _, err := io.ReadFull(c.r, h[:FrameHeader]); err != nil {
		return 0, nil, err
	}
	n, op, id, err := ParseHeader(h[:FrameHeader])
	if err != nil {
		return 0, nil, err
	}
	if op != OpPage {
		if n > c.maxFrame {
			return 0, nil, fmt.Errorf("%d-byte frame, the limit is %d: %w", n, c.maxFrame, ErrFrameTooLarge)
		}
		body, err := c.readBody(n)
		if err != nil {
			return 0, nil, err
		}
		if m = NewMessage(op); m == nil {
			return id, nil, fmt.Errorf("op %d: %w", op, ErrFrame)
		}
		if err := m.Decode(body); err != nil {
			return id, nil, fmt.Errorf("op %d: %w", op, err)
		}
		return id, m, nil
	}
	if n < pageHead {
		return 0, nil, fmt.Errorf("page frame of %d bytes: %w", n, ErrFrame)
	}
	if _, err := io.ReadFull(c.r, h[FrameHeader:]); err != nil {
		return 0, nil, fmt.Errorf("reading a page header: %w", err)
	}
	p := &Page{Index: binary.LittleEndian.Uint32(h[FrameHeader:])}
	switch h[FrameHeader+4] {
	case 0:
	case 1:
		p.Found = true
	default:
		return 0, nil, fmt.Errorf("page found flag %d: %w", h[FrameHeader+4], ErrFrame)
	}
	sumLen := int(h[FrameHeader+5])
	size := n - pageHead - sumLen
	if size < 0 || (!p.Found && size > 0) {
		return 0, nil, fmt.Errorf("page frame of %d bytes with a %d-byte checksum, found %v: %w", n, sumLen, p.Found, ErrFrame)
	}
	if sumLen > 0 {
		p.Checksum = make([]byte, sumLen)
		if _, err := io.ReadFull(c.r, p.Checksum); err != nil {
			return 0, nil, fmt.Errorf("reading a page checksum: %w", err)
		}
	}
	dst, perr := pick(p, size)
	if perr == nil && len(dst) < size {
		perr = fmt.Errorf("page %d of %d bytes, buffer %d: %w", p.Index, size, len(dst), ErrOutOfRange)
	}
	if perr != nil {
		if _, err := io.CopyN(io.Discard, c.r, int64(size)); err != nil {
			return 0, nil, fmt.Errorf("skipping page %d: %w", p.Index, err)
		}
		return id, p, perr
	}
	for got := 0; got < size; {
		k, err := c.r.Read(dst[got:size])
		if k > 0 && each != nil {
			each(dst[got : got+k])
		}
		got += k
		if err != nil && got < size {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, fmt.Errorf("reading page %d (%d of %d bytes): %w", p.Index, got, size, err)
		}
	}
	if size > 0 {
		p.Data = dst[:size]
	}
	return id, p, nil
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
