package frame

import (
	"fmt"

	"github.com/stratakv/strata/namespace"
)

// The messages of SPEC.md §2 but those of the raw plane (raw.go), each
// with its methods. The fields' meanings are the spec's.

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

// Hello opens a connection.
type Hello struct {
	Version uint16
	Token   string
}

func (*Hello) Op() uint8                { return OpHello }
func (m *Hello) Append(b []byte) []byte { return appendStr(appendU16(b, m.Version), m.Token) }

func (m *Hello) Decode(body []byte) error {
	r := reader{b: body}
	m.Version, m.Token = r.u16("version"), r.str("token")
	return r.done()
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

func (*Welcome) Op() uint8 { return OpWelcome }

func (m *Welcome) Append(b []byte) []byte {
	b = appendStr(appendU16(b, m.Version), m.NodeID)
	b = appendU64(appendU64(appendU64(b, m.ArenaID), uint64(m.ArenaSize)), uint64(m.GenWords))
	return appendU32(b, m.MaxBatch)
}

func (m *Welcome) Decode(body []byte) error {
	r := reader{b: body}
	m.Version, m.NodeID = r.u16("version"), r.str("node id")
	m.ArenaID, m.ArenaSize, m.GenWords = r.u64("arena id"), r.int64("arena size"), r.int64("generation words")
	m.MaxBatch = r.u32("max batch")
	return r.done()
}

// Error is an Error frame: a request the node refused.
type Error struct {
	Code    Code
	Message string
}

// Error is the refusal as people read it, on either plane: the node's
// message, then the code's name and number.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s, code %d)", e.Message, e.Code, uint16(e.Code))
}

func (*Error) Op() uint8                { return OpError }
func (m *Error) Append(b []byte) []byte { return appendStr(appendU16(b, uint16(m.Code)), m.Message) }

func (m *Error) Decode(body []byte) error {
	r := reader{b: body}
	m.Code, m.Message = Code(r.u16("code")), r.str("message")
	return r.done()
}

// Get locates pages. Pages under the caller's lease are pinned by it;
// others may be reclaimed during the copy, which the generation re-check
// turns into a miss.
type Get struct {
	NS    namespace.ID
	Lease uint64 // the caller's lease, checked live; 0 = none
	Keys  []namespace.Key
}

func (*Get) Op() uint8 { return OpGet }
func (m *Get) Append(b []byte) []byte {
	return appendKeys(appendU64(append(b, m.NS[:]...), m.Lease), m.Keys)
}

// Decode decodes into m's own key array when it is large enough.
func (m *Get) Decode(body []byte) error {
	r := reader{b: body}
	m.NS, m.Lease = namespace.ID(r.key("namespace")), r.u64("lease")
	m.Keys = r.keys(m.Keys)
	return r.done()
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

func (*GetOK) Op() uint8 { return OpGetOK }

func (m *GetOK) Append(b []byte) []byte {
	return appendList(b, m.Pages, func(b []byte, p *PageLoc) []byte {
		return appendBytes8(appendExtent(append(b, p.Status), p.Ext), p.Checksum)
	})
}

func (m *GetOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Pages = list(&r, 1+32+1, "pages", func(r *reader) PageLoc {
		return PageLoc{Status: r.u8("status"), Ext: r.extent("extent"), Checksum: r.bytes8("checksum")}
	})
	return r.done()
}

// PageSpec is one page of a Reserve, a Put or a SlotPut.
type PageSpec struct {
	Key       namespace.Key
	Parent    namespace.Key
	HasParent bool
	Depth     uint32
	Size      int64
	// ChainDepth: the deepest page of the sequence in the same put
	// (store.PageSpec.ChainDepth).
	ChainDepth uint32
	// CostHint is the writer's measured recompute cost of the page in
	// FLOPs (store.PageSpec.CostHint); 0: none, the namespace's profile
	// prices it. Carried from CostHintVersion: a connection of an older
	// version sends none (its encoding drops it, its decoding leaves 0).
	CostHint float64
	// Tokens, LoraName and ExtraKeys are the page's event info for the
	// node's KV event stream (store.PutInfo; gRPC's PageEventInfo), none
	// of it kept. Carried from EventVersion: a connection of an older
	// version sends none.
	Tokens    []uint32
	LoraName  string
	ExtraKeys []byte
}

// HasEvent reports whether p carries event info.
func (p *PageSpec) HasEvent() bool {
	return len(p.Tokens) > 0 || p.LoraName != "" || len(p.ExtraKeys) > 0
}

// appendLinks appends a page's key, parent and has parent.
func appendLinks(b []byte, p *PageSpec) []byte {
	return appendBool(append(append(b, p.Key[:]...), p.Parent[:]...), p.HasParent)
}

// links reads a page's key, parent and has parent.
func (r *reader) links() PageSpec {
	return PageSpec{Key: r.key("key"), Parent: r.key("parent"), HasParent: r.bool("has parent")}
}

// Reserve sets space aside for pages. Its layout is its version's
// (Versioned).
type Reserve struct {
	version
	NS    namespace.ID
	TTLms uint32 // the reservations' deadline; 0 = the node's default
	Pages []PageSpec
}

func (*Reserve) Op() uint8 { return OpReserve }

func (m *Reserve) Append(b []byte) []byte {
	return appendList(appendU32(append(b, m.NS[:]...), m.TTLms), m.Pages, func(b []byte, p *PageSpec) []byte {
		return appendSpec(b, p, m.version)
	})
}

func (m *Reserve) Decode(body []byte) error {
	r := reader{b: body}
	m.NS, m.TTLms = namespace.ID(r.key("namespace")), r.u32("ttl")
	m.Pages = list(&r, specSize(m.version), "pages", func(r *reader) PageSpec { return r.spec(m.version) })
	return r.done()
}

// specSize is the length of a page spec on the wire (Reserve, SlotPut) at
// version v.
func specSize(v version) int {
	n := 32 + 32 + 1 + 4 + 8 + 4
	if v.costHint() {
		n += 8
	}
	if v.events() {
		n += eventSize
	}
	return n
}

// eventSize is the least a page's event info takes on the wire: its
// tokens' count, its LoRA name's length and its extra keys' length.
const eventSize = 4 + 2 + 4

// appendSpec appends a page spec as version v lays it out: key, parent,
// has parent, depth, size, chain depth, from CostHintVersion the cost
// hint, and from EventVersion the event info.
func appendSpec(b []byte, p *PageSpec, v version) []byte {
	b = v.appendCost(appendU32(appendU64(appendU32(appendLinks(b, p), p.Depth), uint64(p.Size)), p.ChainDepth), p)
	return v.appendEvent(b, p)
}

// spec reads a page spec as version v lays it out (appendSpec).
func (r *reader) spec(v version) PageSpec {
	p := r.links()
	p.Depth, p.Size, p.ChainDepth = r.u32("depth"), r.int64("size"), r.u32("chain depth")
	r.cost(v, &p)
	r.event(v, &p)
	return p
}

// DecodeEvent reads into p a page's event info laid out as a page spec
// carries it from EventVersion (tokens, LoRA name, extra keys: the
// encoding the native library's Python callers hand it, frame.event_info).
func DecodeEvent(b []byte, p *PageSpec) error {
	r := reader{b: b}
	r.event(0, p)
	return r.done()
}

// appendEvent appends p's event info where version v carries it: tokens
// (a u32 list), LoRA name (str), extra keys (u32 length and bytes).
func (v version) appendEvent(b []byte, p *PageSpec) []byte {
	if v.events() {
		return appendBytes32(appendStr(appendU32s(b, p.Tokens), p.LoraName), p.ExtraKeys)
	}
	return b
}

// event reads p's event info where version v carries it.
func (r *reader) event(v version, p *PageSpec) {
	if v.events() {
		p.Tokens, p.LoraName, p.ExtraKeys = r.u32s("tokens"), r.str("lora name"), r.bytes32("extra keys")
	}
}

// appendCost appends p's cost hint where version v carries it.
func (v version) appendCost(b []byte, p *PageSpec) []byte {
	if v.costHint() {
		return appendF64(b, p.CostHint)
	}
	return b
}

// cost reads p's cost hint where version v carries it.
func (r *reader) cost(v version, p *PageSpec) {
	if v.costHint() {
		p.CostHint = r.f64("cost hint")
	}
}

// Slot is one page of a ReserveOK: for a reserved page (Status
// SlotReserved) the write id that names the reservation in Write, Commit
// and Abort, and the deadline (unix ms) after which the node frees it;
// for a rejected one, the reason. Mapped: Ext is in the arena (shm), else
// the bytes go in Write frames.
type Slot struct {
	Status     uint8
	WriteID    uint64
	DeadlineMs int64
	Mapped     bool
	Ext        Extent
	Reason     string
}

// ReserveOK answers a Reserve.
type ReserveOK struct{ Slots []Slot }

func (*ReserveOK) Op() uint8 { return OpReserveOK }

func (m *ReserveOK) Append(b []byte) []byte {
	return appendList(b, m.Slots, func(b []byte, s *Slot) []byte {
		b = appendU64(appendU64(append(b, s.Status), s.WriteID), uint64(s.DeadlineMs))
		return appendStr(appendExtent(appendBool(b, s.Mapped), s.Ext), s.Reason)
	})
}

func (m *ReserveOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Slots = list(&r, 1+8+8+1+32+2, "slots", func(r *reader) Slot {
		s := Slot{Status: r.u8("status"), WriteID: r.u64("write id"), DeadlineMs: int64(r.u64("deadline"))}
		s.Mapped, s.Ext, s.Reason = r.bool("mapped"), r.extent("extent"), r.str("reason")
		return s
	})
	return r.done()
}

// Commit verifies and publishes reservations.
type Commit struct {
	NS    namespace.ID
	Items []CommitItem
}

// CommitItem is one page of a Commit.
type CommitItem struct {
	WriteID  uint64
	Size     int64
	Checksum []byte
}

func (*Commit) Op() uint8 { return OpCommit }

func (m *Commit) Append(b []byte) []byte {
	return appendList(append(b, m.NS[:]...), m.Items, func(b []byte, it *CommitItem) []byte {
		return appendBytes8(appendU64(appendU64(b, it.WriteID), uint64(it.Size)), it.Checksum)
	})
}

func (m *Commit) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.Items = list(&r, 8+8+1, "items", func(r *reader) CommitItem {
		return CommitItem{WriteID: r.u64("write id"), Size: r.int64("size"), Checksum: r.bytes8("checksum")}
	})
	return r.done()
}

// CommitOK answers a Commit: a commit status (Commit*) per item.
type CommitOK struct{ Statuses []uint8 }

func (*CommitOK) Op() uint8 { return OpCommitOK }

func (m *CommitOK) Append(b []byte) []byte {
	return append(appendU32(b, uint32(len(m.Statuses))), m.Statuses...)
}

func (m *CommitOK) Decode(body []byte) error {
	r := reader{b: body}
	n := r.count(1, "statuses")
	m.Statuses = append([]uint8(nil), r.take(n, "statuses")...)
	return r.done()
}

// Abort drops reservations.
type Abort struct {
	NS       namespace.ID
	WriteIDs []uint64
}

func (*Abort) Op() uint8 { return OpAbort }

func (m *Abort) Append(b []byte) []byte {
	return appendList(append(b, m.NS[:]...), m.WriteIDs, func(b []byte, id *uint64) []byte { return appendU64(b, *id) })
}

func (m *Abort) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.WriteIDs = list(&r, 8, "write ids", func(r *reader) uint64 { return r.u64("write id") })
	return r.done()
}

// AbortOK answers an Abort.
type AbortOK struct{ Aborted uint32 }

func (*AbortOK) Op() uint8                { return OpAbortOK }
func (m *AbortOK) Append(b []byte) []byte { return appendU32(b, m.Aborted) }

func (m *AbortOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Aborted = r.u32("aborted")
	return r.done()
}

// Served reports pages a client read without a request; it has no answer.
type Served struct {
	NS    namespace.ID
	Pages uint32
	Bytes int64
}

func (*Served) Op() uint8 { return OpServed }

func (m *Served) Append(b []byte) []byte {
	return appendU64(appendU32(append(b, m.NS[:]...), m.Pages), uint64(m.Bytes))
}

func (m *Served) Decode(body []byte) error {
	r := reader{b: body}
	m.NS = namespace.ID(r.key("namespace"))
	m.Pages, m.Bytes = r.u32("pages"), r.int64("bytes")
	return r.done()
}
