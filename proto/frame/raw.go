package frame

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/stratakv/strata/namespace"
)

// The raw data plane's messages (SPEC.md §2, §5): Read, Page, Write, Put,
// PutOK, Lookup, LookupOK. Page, Write and Put end with bulk bytes (Bulk).

// AddrHeader is the gRPC response header naming a node's raw data-plane
// address (SPEC.md §4, discovery).
const AddrHeader = "strata-raw-addr"

// MaxWriteChunk is the most data bytes a client puts in one Write frame
// or one Put (SPEC.md §8): half of DefaultMaxFrame, so it always fits a
// node's frame limit.
const MaxWriteChunk = DefaultMaxFrame / 2

// Read asks for pages' bytes, inline. With a lease (non-zero) it must be
// live, else the answer is an Error. Its body is a Get's.
type Read Get

func (*Read) Op() uint8                  { return OpRead }
func (m *Read) Append(b []byte) []byte   { return (*Get)(m).Append(b) }
func (m *Read) Decode(body []byte) error { return (*Get)(m).Decode(body) }

// Bulk is a message whose body ends with bulk bytes (Page, Write, Put):
// bytes the frame's length counts but that a sender writes apart from the
// encoded head (AppendHead) and a receiver may read straight into its own
// buffer (SPEC.md §5).
type Bulk interface {
	Message
	// AppendHead appends the body up to the bulk bytes.
	AppendHead(b []byte) []byte
	// Bulk is the bulk bytes.
	Bulk() []byte
}

// AppendHead appends m's frame up to its bulk bytes: the header, whose
// length counts them, and the body's head. The caller writes m.Bulk()
// right after. It fails with ErrTooLarge when the frame's length does not
// fit the header's u32.
func AppendHead(b []byte, id uint64, m Bulk) ([]byte, error) {
	return AppendHeadLen(b, id, m, len(m.Bulk()))
}

// AppendHeadLen is AppendHead for a frame whose bulk bytes are bulkLen
// long and are not m.Bulk() (which is empty): a sender that writes them
// from pieces of its own (a page in an engine's K and V halves).
func AppendHeadLen(b []byte, id uint64, m Bulk, bulkLen int) ([]byte, error) {
	start := len(b)
	b = m.AppendHead(appendHeader(b, m.Op(), id))
	n := len(b) - start - 4 + bulkLen
	if n > 1<<32-1 {
		return b[:start], fmt.Errorf("op %d: %d-byte frame: %w", m.Op(), n, ErrTooLarge)
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(n))
	return b, nil
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

// PageHeadSize is the fixed part of a Page body: index, found, checksum
// length.
const PageHeadSize = 4 + 1 + 1

func (*Page) Op() uint8                { return OpPage }
func (m *Page) Bulk() []byte           { return m.Data }
func (m *Page) Append(b []byte) []byte { return append(m.AppendHead(b), m.Data...) }

func (m *Page) AppendHead(b []byte) []byte {
	return appendBytes8(appendBool(appendU32(b, m.Index), m.Found), m.Checksum)
}

func (m *Page) Decode(body []byte) error {
	r := reader{b: body}
	m.Index, m.Found, m.Checksum = r.u32("index"), r.bool("found"), r.bytes8("checksum")
	m.Data = r.rest()
	if !m.Found && len(m.Data) > 0 {
		r.fail("data for a missing page")
	}
	return r.done()
}

// ParsePageHead reads the fixed part of a Page body of bodyLen bytes: the
// page without its checksum and data, the checksum's length, and the
// data's, which follow in that order.
func ParsePageHead(h []byte, bodyLen int) (p *Page, sumLen, size int, err error) {
	if bodyLen < PageHeadSize || len(h) < PageHeadSize {
		return nil, 0, 0, fmt.Errorf("page frame of %d bytes: %w", bodyLen, ErrMalformed)
	}
	r := reader{b: h[:PageHeadSize]}
	p = &Page{Index: r.u32("index"), Found: r.bool("found")}
	sumLen = int(r.u8("checksum length"))
	size = bodyLen - PageHeadSize - sumLen
	if size < 0 || (!p.Found && size > 0) {
		r.fail(fmt.Sprintf("page frame of %d bytes with a %d-byte checksum, found %v", bodyLen, sumLen, p.Found))
	}
	if err := r.done(); err != nil {
		return nil, 0, 0, err
	}
	return p, sumLen, size, nil
}

// Write puts bytes into an open reservation at Offset. Data aliases the
// connection's buffer when decoded, valid until the next Recv.
type Write struct {
	NS      namespace.ID
	WriteID uint64
	Offset  uint64
	Data    []byte
}

// WriteHeadSize is the length of a Write's body before its data.
const WriteHeadSize = 32 + 8 + 8

func (*Write) Op() uint8                { return OpWrite }
func (m *Write) Bulk() []byte           { return m.Data }
func (m *Write) Append(b []byte) []byte { return append(m.AppendHead(b), m.Data...) }

func (m *Write) AppendHead(b []byte) []byte {
	return appendU64(appendU64(append(b, m.NS[:]...), m.WriteID), m.Offset)
}

func (m *Write) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.WriteID, m.Offset = r.u64("write id"), r.u64("offset")
	m.Data = r.rest()
	return r.done()
}

// Put is one page, reserved, written and committed in one frame. Data
// aliases the connection's buffer when decoded, valid until the next Recv.
// Its layout is its version's (Versioned).
type Put struct {
	version
	NS       namespace.ID
	TTLms    uint32   // the reservation's deadline; 0 = the node's default
	Page     PageSpec // Size is len(Data) on the wire
	Checksum []byte
	Data     []byte
}

func (*Put) Op() uint8                { return OpPut }
func (m *Put) Bulk() []byte           { return m.Data }
func (m *Put) Append(b []byte) []byte { return append(m.AppendHead(b), m.Data...) }

func (m *Put) AppendHead(b []byte) []byte {
	b = appendLinks(appendU32(append(b, m.NS[:]...), m.TTLms), &m.Page)
	b = m.version.appendCost(appendU32(appendU32(b, m.Page.Depth), m.Page.ChainDepth), &m.Page)
	return appendBytes8(m.version.appendEvent(b, &m.Page), m.Checksum)
}

func (m *Put) Decode(body []byte) error {
	r := reader{b: body}
	m.NS, m.TTLms = namespace.ID(r.key("namespace")), r.u32("ttl")
	m.Page = r.links()
	m.Page.Depth, m.Page.ChainDepth = r.u32("depth"), r.u32("chain depth")
	r.cost(m.version, &m.Page)
	r.event(m.version, &m.Page)
	m.Checksum = r.bytes8("checksum")
	m.Data = r.rest()
	m.Page.Size = int64(len(m.Data))
	return r.done()
}

// PutHeadSize is the fixed part of a Put's body at ProtocolVersion, the
// longest: namespace to cost hint. From EventVersion the page's event info
// follows (ReadPutEvent), then the checksum (bytes8) and the data.
const PutHeadSize = 32 + 4 + 32 + 32 + 1 + 4 + 4 + 8

// PutHeadLen is PutHeadSize at version v (0: ProtocolVersion): a
// connection of v reads that much of a Put's body before its event info
// and checksum.
func PutHeadLen(v uint16) int {
	if version(v).costHint() {
		return PutHeadSize
	}
	return PutHeadSize - 8
}

// ReadPutEvent reads the event info of a Put of version v (none before
// EventVersion) from r, in which at most left bytes of the frame remain,
// and appends its bytes to body, which Put.Decode then reads.
func ReadPutEvent(body []byte, v uint16, left int, r io.Reader) ([]byte, error) {
	if !version(v).events() {
		return body, nil
	}
	// Three parts, each a length and that many units: tokens (u32 count
	// of 4-byte tokens), LoRA name (u16 bytes), extra keys (u32 bytes).
	for _, part := range [...]struct{ lenSize, unit int }{{4, 4}, {2, 1}, {4, 1}} {
		start := len(body)
		body = append(body, make([]byte, part.lenSize)...)
		if _, err := io.ReadFull(r, body[start:]); err != nil {
			return body, fmt.Errorf("reading a put's event info: %w", err)
		}
		var n int
		if part.lenSize == 4 {
			n = int(binary.LittleEndian.Uint32(body[start:]))
		} else {
			n = int(binary.LittleEndian.Uint16(body[start:]))
		}
		left -= part.lenSize
		if left < 0 || n > left/part.unit {
			return body, fmt.Errorf("a put's event info of %d units of %d bytes, %d bytes left: %w", n, part.unit, left, ErrMalformed)
		}
		n *= part.unit
		left -= n
		start = len(body)
		body = append(body, make([]byte, n)...)
		if _, err := io.ReadFull(r, body[start:]); err != nil {
			return body, fmt.Errorf("reading a put's event info: %w", err)
		}
	}
	return body, nil
}

// PutOK answers a Put: the reserve status (Slot*), the commit status
// when reserved (Commit*), and why, for a rejection or a failed commit.
type PutOK struct {
	Reserve uint8
	Commit  uint8
	Reason  string
}

func (*PutOK) Op() uint8                { return OpPutOK }
func (m *PutOK) Append(b []byte) []byte { return appendStr(append(b, m.Reserve, m.Commit), m.Reason) }

func (m *PutOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Reserve, m.Commit, m.Reason = r.u8("reserve status"), r.u8("commit status"), r.str("reason")
	return r.done()
}

// Lookup asks which of Keys the node holds and how long a prefix of them
// it holds, optionally leasing that prefix.
type Lookup struct {
	NS         namespace.ID
	Lease      bool
	LeaseTTLms uint32 // 0: the node's default
	Keys       []namespace.Key
}

func (*Lookup) Op() uint8 { return OpLookup }

func (m *Lookup) Append(b []byte) []byte {
	return appendKeys(appendU32(appendBool(append(b, m.NS[:]...), m.Lease), m.LeaseTTLms), m.Keys)
}

// Decode decodes into m's own key array when it is large enough.
func (m *Lookup) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.Lease, m.LeaseTTLms = r.bool("lease"), r.u32("lease ttl")
	m.Keys = r.keys(m.Keys)
	return r.done()
}

// LookupOK answers a Lookup. LeaseID 0: no lease was taken.
type LookupOK struct {
	HitPrefix  uint32
	LeaseID    uint64
	ExpiresMs  int64
	LeasePages uint32
	Present    []bool
}

func (*LookupOK) Op() uint8 { return OpLookupOK }

func (m *LookupOK) Append(b []byte) []byte {
	b = appendU32(appendU64(appendU64(appendU32(b, m.HitPrefix), m.LeaseID), uint64(m.ExpiresMs)), m.LeasePages)
	return appendBools(b, m.Present)
}

func (m *LookupOK) Decode(body []byte) error {
	r := reader{b: body}
	m.HitPrefix, m.LeaseID, m.ExpiresMs = r.u32("hit prefix"), r.u64("lease id"), r.int64("expires")
	m.LeasePages = r.u32("lease pages")
	m.Present = r.bools("present")
	return r.done()
}
