package frame

import (
	"fmt"

	"github.com/stratakv/strata/namespace"
)

// The messages of SPEC.md §2 but those of the raw plane (raw.go), and
// their codecs. The fields' meanings are the spec's.

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

// CommitOK answers a Commit: a commit status (Commit*) per item.
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
