package frame

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/stratakv/strata/namespace"
)

// The shm control protocol: compact binary frames on a Unix stream socket,
// little-endian throughout.
//
//	frame  = length u32 | op u8 | 0 u8 | 0 u16 | request id u64 | body
//
// length counts the bytes after itself (12 + body). A client sends one
// request and reads its answer (the same request id) before the next on
// the same connection (Served excepted).
//
//	Hello      = version u16 | token str
//	Welcome    = version u16 | node id str | arena id u64 | arena size u64 |
//	             generation words u64 | max batch u32          (+ 2 fds: arena, gens)
//	Error      = code u16 | message str
//	Get        = ns [32] | lease u64 | n u32 | n × key [32]
//	GetOK      = n u32 | n × (status u8 | extent | checksum bytes8)
//	Reserve    = ns [32] | ttl ms u32 | n u32 |
//	             n × (key [32] | parent [32] | has parent u8 | depth u32 | size u64 |
//	             chain depth u32)
//	ReserveOK  = n u32 | n × (status u8 | write id u64 | deadline unix ms i64 |
//	             mapped u8 | extent | reason str)
//	Commit     = ns [32] | n u32 | n × (write id u64 | size u64 | checksum bytes8)
//	CommitOK   = n u32 | n × status u8
//	Abort      = ns [32] | n u32 | n × write id u64
//	AbortOK    = aborted u32
//	Served     = ns [32] | pages u32 | bytes u64                 (one-way)
//
// Served is the one message without an answer: the client reports pages it
// copied from its location cache without asking (client/shm_cache.go), so
// the node's transfer metrics still count them.
//
// The raw data plane over TCP adds Read, Page and Write (raw.go).
//
//	extent = offset u64 | length u64 | generation u64 | generation index u64
//	str    = u16 length | bytes;  bytes8 = u8 length | bytes

// ProtocolVersion is the version a Hello carries and a Welcome answers.
// Version 2 added a Reserve page's chain depth; version 3 the one-frame
// Put and the Lookup of the tcp plane (raw.go). A node also serves clients of
// MinProtocolVersion and up, answering their version in the Welcome, and
// takes from them only the messages their version has.
const ProtocolVersion = 3

// MinProtocolVersion is the oldest client version a node serves.
const MinProtocolVersion = 2

// HeaderSize is the length of a frame's header: length, op, padding, id.
const HeaderSize = 16

// DefaultMaxFrame bounds a frame: a full batch of 16,384 keys or page
// records is well under it.
const DefaultMaxFrame = 8 << 20

// Extent is where a page lies in a node's host arena, as the node reports
// it under a lease or reservation.
type Extent struct {
	Off int64  // byte offset in the arena
	Len int64  // page length
	Gen uint64 // the extent's generation while live
	// GenIndex is the index of the extent's generation word in the
	// generations mapping.
	GenIndex int64
}

// Op codes.
const (
	OpHello     = 1
	OpWelcome   = 2
	OpError     = 3
	OpGet       = 4
	OpGetOK     = 5
	OpReserve   = 6
	OpReserveOK = 7
	OpCommit    = 8
	OpCommitOK  = 9
	OpAbort     = 10
	OpAbortOK   = 11
	OpServed    = 12
)

// Page statuses in GetOK.
const (
	PageMissing = 0 // not published
	PageMapped  = 1 // in the arena, at the extent
	PageElse    = 2 // published in another tier: read it over tcp
)

// Reserve statuses in ReserveOK (the store's values).
const (
	SlotReserved = 1
	SlotExists   = 2
	SlotRejected = 3
)

// Code says why a request failed, in an Error frame.
type Code uint16

// Error codes.
const (
	CodeInternal Code = iota + 1
	CodeBadRequest
	CodeUnauthenticated
	CodeDenied
	CodeNamespaceNotFound
	CodeLeaseExpired
	CodeLeaseNotFound
	CodeLeaseLimit
	CodeBatchTooLarge
	CodeNoSpace
	CodeVersion
	CodeShuttingDown
	CodeWriteUnknown
	CodeWriteExpired
	CodeWriteClosed
)

// Error is an Error frame: a request the node refused.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("shm: %s (code %d)", e.Message, e.Code) }

// Hello opens a connection.
type Hello struct {
	Version uint16
	Token   string
}

// Welcome answers a Hello; the arena and generation fds ride with it.
type Welcome struct {
	Version   uint16
	NodeID    string
	ArenaID   uint64 // differs between arenas (node restarts)
	ArenaSize int64
	GenWords  int64
	MaxBatch  uint32
}

// Get locates pages. Pages under the caller's lease are pinned by it;
// others may be reclaimed during the copy, which the generation re-check
// turns into a miss.
type Get struct {
	NS    namespace.ID
	Lease uint64 // the caller's lease, checked live; 0 = none
	Keys  []namespace.Key
}

// PageLoc is one page of a GetOK.
type PageLoc struct {
	Status   uint8
	Ext      Extent
	Checksum []byte
}

// GetOK answers a Get.
type GetOK struct {
	Pages []PageLoc
}

// PageSpec is one page of a Reserve.
type PageSpec struct {
	Key       namespace.Key
	Parent    namespace.Key
	HasParent bool
	Depth     uint32
	Size      int64
	// ChainDepth: the deepest page of the sequence in the same put
	// (store.PageSpec.ChainDepth).
	ChainDepth uint32
}

// Reserve sets space aside for pages.
type Reserve struct {
	NS    namespace.ID
	TTLms uint32 // the reservations' deadline; 0 = the node's default
	Pages []PageSpec
}

// Slot is one page of a ReserveOK.
type Slot struct {
	Status     uint8
	WriteID    uint64
	DeadlineMs int64
	Mapped     bool // Ext is in the arena; else write over tcp
	Ext        Extent
	Reason     string
}

// ReserveOK answers a Reserve.
type ReserveOK struct{ Slots []Slot }

// CommitItem is one page of a Commit.
type CommitItem struct {
	WriteID  uint64
	Size     int64
	Checksum []byte
}

// Commit verifies and publishes reservations.
type Commit struct {
	NS    namespace.ID
	Items []CommitItem
}

// CommitOK answers a Commit: the store's commit status per item.
type CommitOK struct{ Statuses []uint8 }

// Abort drops reservations.
type Abort struct {
	NS       namespace.ID
	WriteIDs []uint64
}

// AbortOK answers an Abort.
type AbortOK struct{ Aborted uint32 }

// Served reports pages a client read without a request; it has no answer.
type Served struct {
	NS    namespace.ID
	Pages uint32
	Bytes int64
}

// Message is a frame body.
type Message interface {
	Op() uint8
	Append(b []byte) []byte
	Decode(body []byte) error
}

func (*Hello) Op() uint8     { return OpHello }
func (*Welcome) Op() uint8   { return OpWelcome }
func (*Error) Op() uint8     { return OpError }
func (*Get) Op() uint8       { return OpGet }
func (*GetOK) Op() uint8     { return OpGetOK }
func (*Reserve) Op() uint8   { return OpReserve }
func (*ReserveOK) Op() uint8 { return OpReserveOK }
func (*Commit) Op() uint8    { return OpCommit }
func (*CommitOK) Op() uint8  { return OpCommitOK }
func (*Abort) Op() uint8     { return OpAbort }
func (*AbortOK) Op() uint8   { return OpAbortOK }
func (*Served) Op() uint8    { return OpServed }

// NewMessage returns an empty message for op, or nil for an unknown op.
func NewMessage(op uint8) Message {
	switch op {
	case OpHello:
		return &Hello{}
	case OpWelcome:
		return &Welcome{}
	case OpError:
		return &Error{}
	case OpGet:
		return &Get{}
	case OpGetOK:
		return &GetOK{}
	case OpReserve:
		return &Reserve{}
	case OpReserveOK:
		return &ReserveOK{}
	case OpCommit:
		return &Commit{}
	case OpCommitOK:
		return &CommitOK{}
	case OpAbort:
		return &Abort{}
	case OpAbortOK:
		return &AbortOK{}
	case OpServed:
		return &Served{}
	case OpRead:
		return &Read{}
	case OpPage:
		return &Page{}
	case OpWrite:
		return &Write{}
	case OpPut:
		return &Put{}
	case OpPutOK:
		return &PutOK{}
	case OpLookup:
		return &Lookup{}
	case OpLookupOK:
		return &LookupOK{}
	}
	return nil
}

// Append appends a whole frame carrying m to b.
func Append(b []byte, id uint64, m Message) []byte {
	start := len(b)
	b = m.Append(appendHeader(b, m.Op(), id))
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// appendHeader appends a header for op and id whose length the caller
// fills in.
func appendHeader(b []byte, op uint8, id uint64) []byte {
	return binary.LittleEndian.AppendUint64(append(b, 0, 0, 0, 0, op, 0, 0, 0), id)
}

// ParseHeader reads a frame header: the body length that follows, the op
// and the request id.
func ParseHeader(h []byte) (bodyLen int, op uint8, id uint64, err error) {
	if len(h) < HeaderSize {
		return 0, 0, 0, fmt.Errorf("header of %d bytes: %w", len(h), ErrMalformed)
	}
	n := binary.LittleEndian.Uint32(h)
	if n < HeaderSize-4 {
		return 0, 0, 0, fmt.Errorf("frame length %d: %w", n, ErrMalformed)
	}
	if h[5] != 0 || h[6] != 0 || h[7] != 0 {
		return 0, 0, 0, fmt.Errorf("padding %x: %w", h[5:8], ErrMalformed)
	}
	return int(n) - (HeaderSize - 4), h[4], binary.LittleEndian.Uint64(h[8:]), nil
}

// Decode decodes one whole frame (header and body).
func Decode(b []byte) (id uint64, m Message, err error) {
	n, op, id, err := ParseHeader(b)
	if err != nil {
		return 0, nil, err
	}
	if n != len(b)-HeaderSize {
		return 0, nil, fmt.Errorf("frame says %d body bytes, has %d: %w", n, len(b)-HeaderSize, ErrMalformed)
	}
	if m = NewMessage(op); m == nil {
		return 0, nil, fmt.Errorf("op %d: %w", op, ErrMalformed)
	}
	if err := m.Decode(b[HeaderSize:]); err != nil {
		return 0, nil, err
	}
	return id, m, nil
}

// Encoding.

func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func appendStr(b []byte, s string) []byte {
	s = s[:min(len(s), math.MaxUint16)]
	return append(appendU16(b, uint16(len(s))), s...)
}

func appendBytes8(b []byte, p []byte) []byte {
	p = p[:min(len(p), math.MaxUint8)]
	return append(append(b, byte(len(p))), p...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendExtent(b []byte, e Extent) []byte {
	b = appendU64(b, uint64(e.Off))
	b = appendU64(b, uint64(e.Len))
	b = appendU64(b, e.Gen)
	return appendU64(b, uint64(e.GenIndex))
}

func (m *Hello) Append(b []byte) []byte { return appendStr(appendU16(b, m.Version), m.Token) }

func (m *Welcome) Append(b []byte) []byte {
	b = appendStr(appendU16(b, m.Version), m.NodeID)
	b = appendU64(appendU64(appendU64(b, m.ArenaID), uint64(m.ArenaSize)), uint64(m.GenWords))
	return appendU32(b, m.MaxBatch)
}

func (m *Error) Append(b []byte) []byte { return appendStr(appendU16(b, uint16(m.Code)), m.Message) }

func (m *Get) Append(b []byte) []byte {
	b = appendU64(append(b, m.NS[:]...), m.Lease)
	b = appendU32(b, uint32(len(m.Keys)))
	for i := range m.Keys {
		b = append(b, m.Keys[i][:]...)
	}
	return b
}

func (m *GetOK) Append(b []byte) []byte {
	b = appendU32(b, uint32(len(m.Pages)))
	for _, p := range m.Pages {
		b = appendBytes8(appendExtent(append(b, p.Status), p.Ext), p.Checksum)
	}
	return b
}

func (m *Reserve) Append(b []byte) []byte {
	b = appendU32(appendU32(append(b, m.NS[:]...), m.TTLms), uint32(len(m.Pages)))
	for _, p := range m.Pages {
		b = appendBool(append(append(b, p.Key[:]...), p.Parent[:]...), p.HasParent)
		b = appendU32(appendU64(appendU32(b, p.Depth), uint64(p.Size)), p.ChainDepth)
	}
	return b
}

func (m *ReserveOK) Append(b []byte) []byte {
	b = appendU32(b, uint32(len(m.Slots)))
	for _, s := range m.Slots {
		b = appendU64(appendU64(append(b, s.Status), s.WriteID), uint64(s.DeadlineMs))
		b = appendStr(appendExtent(appendBool(b, s.Mapped), s.Ext), s.Reason)
	}
	return b
}

func (m *Commit) Append(b []byte) []byte {
	b = appendU32(append(b, m.NS[:]...), uint32(len(m.Items)))
	for _, it := range m.Items {
		b = appendBytes8(appendU64(appendU64(b, it.WriteID), uint64(it.Size)), it.Checksum)
	}
	return b
}

func (m *CommitOK) Append(b []byte) []byte {
	return append(appendU32(b, uint32(len(m.Statuses))), m.Statuses...)
}

func (m *Abort) Append(b []byte) []byte {
	b = appendU32(append(b, m.NS[:]...), uint32(len(m.WriteIDs)))
	for _, id := range m.WriteIDs {
		b = appendU64(b, id)
	}
	return b
}

func (m *AbortOK) Append(b []byte) []byte { return appendU32(b, m.Aborted) }

func (m *Served) Append(b []byte) []byte {
	return appendU64(appendU32(append(b, m.NS[:]...), m.Pages), uint64(m.Bytes))
}

// Decoding: a reader with a sticky error; every count is checked against
// the bytes left before anything is allocated.

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", what, ErrMalformed)
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("truncated " + what)
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8(what string) uint8 {
	if p := r.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if p := r.take(2, what); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(4, what); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(8, what); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *reader) bool(what string) bool {
	switch r.u8(what) {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad boolean " + what)
	return false
}

func (r *reader) str(what string) string { return string(r.take(int(r.u16(what)), what)) }

func (r *reader) bytes8(what string) []byte {
	p := r.take(int(r.u8(what)), what)
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (r *reader) int64(what string) int64 {
	v := r.u64(what)
	if v > math.MaxInt64 {
		r.fail("negative " + what)
	}
	return int64(v)
}

func (r *reader) extent(what string) Extent {
	return Extent{Off: r.int64(what), Len: r.int64(what), Gen: r.u64(what), GenIndex: r.int64(what)}
}

func (r *reader) key(what string) (k namespace.Key) {
	copy(k[:], r.take(len(k), what))
	return k
}

// count reads a u32 element count whose elements take at least min bytes
// each, failing if they cannot fit in what is left.
func (r *reader) count(minSize int, what string) int {
	n := int(r.u32(what))
	if r.err == nil && n > len(r.b)/minSize {
		r.fail(fmt.Sprintf("%d %s in %d bytes", n, what, len(r.b)))
		return 0
	}
	return n
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	return r.err
}

func (m *Hello) Decode(body []byte) error {
	r := reader{b: body}
	m.Version, m.Token = r.u16("version"), r.str("token")
	return r.done()
}

func (m *Welcome) Decode(body []byte) error {
	r := reader{b: body}
	m.Version, m.NodeID = r.u16("version"), r.str("node id")
	m.ArenaID, m.ArenaSize, m.GenWords = r.u64("arena id"), r.int64("arena size"), r.int64("generation words")
	m.MaxBatch = r.u32("max batch")
	return r.done()
}

func (m *Error) Decode(body []byte) error {
	r := reader{b: body}
	m.Code, m.Message = Code(r.u16("code")), r.str("message")
	return r.done()
}

func (m *Get) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.Lease = r.u64("lease")
	m.Keys = reuseKeys(m.Keys, r.count(namespace.KeySize, "keys"))
	for i := range m.Keys {
		m.Keys[i] = r.key("key")
	}
	return r.done()
}

// reuseKeys is keys cut to n, in its own array when that is large enough.
func reuseKeys(keys []namespace.Key, n int) []namespace.Key {
	if cap(keys) < n {
		return make([]namespace.Key, n)
	}
	return keys[:n]
}

func (m *GetOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Pages = make([]PageLoc, r.count(1+32+1, "pages"))
	for i := range m.Pages {
		m.Pages[i] = PageLoc{Status: r.u8("status"), Ext: r.extent("extent"), Checksum: r.bytes8("checksum")}
	}
	return r.done()
}

func (m *Reserve) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.TTLms = r.u32("ttl")
	m.Pages = make([]PageSpec, r.count(32+32+1+4+8+4, "pages"))
	for i := range m.Pages {
		m.Pages[i] = PageSpec{Key: r.key("key"), Parent: r.key("parent"), HasParent: r.bool("has parent"),
			Depth: r.u32("depth"), Size: r.int64("size"), ChainDepth: r.u32("chain depth")}
	}
	return r.done()
}

func (m *ReserveOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Slots = make([]Slot, r.count(1+8+8+1+32+2, "slots"))
	for i := range m.Slots {
		s := &m.Slots[i]
		s.Status, s.WriteID, s.DeadlineMs = r.u8("status"), r.u64("write id"), int64(r.u64("deadline"))
		s.Mapped, s.Ext, s.Reason = r.bool("mapped"), r.extent("extent"), r.str("reason")
	}
	return r.done()
}

func (m *Commit) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.Items = make([]CommitItem, r.count(8+8+1, "items"))
	for i := range m.Items {
		m.Items[i] = CommitItem{WriteID: r.u64("write id"), Size: r.int64("size"), Checksum: r.bytes8("checksum")}
	}
	return r.done()
}

func (m *CommitOK) Decode(body []byte) error {
	r := reader{b: body}
	n := r.count(1, "statuses")
	m.Statuses = append([]uint8(nil), r.take(n, "statuses")...)
	return r.done()
}

func (m *Abort) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.WriteIDs = make([]uint64, r.count(8, "write ids"))
	for i := range m.WriteIDs {
		m.WriteIDs[i] = r.u64("write id")
	}
	return r.done()
}

func (m *AbortOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Aborted = r.u32("aborted")
	return r.done()
}

func (m *Served) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.Pages, m.Bytes = r.u32("pages"), r.int64("bytes")
	return r.done()
}
