package frame

import "github.com/stratakv/strata/namespace"

// The messages of a put into granted slots (SPEC.md §5b, version 4, shm
// socket only): the node grants a connection arena slots ahead of its puts,
// and a put is the copy into a slot and one SlotPut naming it, whose answer
// grants the slots that replace those used.

// SlotPut publishes pages the client wrote into slots the node granted
// this connection, each in its own slot, and asks for Want more slots. Its
// layout is its version's (Versioned).
type SlotPut struct {
	version
	NS    namespace.ID
	Want  uint32 // slots to grant with the answer; the node may grant fewer
	Pages []SlotPage
}

func (*SlotPut) Op() uint8 { return OpSlotPut }

func (m *SlotPut) Append(b []byte) []byte {
	return appendList(appendU32(append(b, m.NS[:]...), m.Want), m.Pages, func(b []byte, p *SlotPage) []byte {
		return appendBytes8(appendSpec(appendU64(b, p.WriteID), &p.Page, m.version), p.Checksum)
	})
}

func (m *SlotPut) Decode(body []byte) error {
	r := reader{b: body}
	m.NS, m.Want = namespace.ID(r.key("namespace")), r.u32("want")
	m.Pages = list(&r, 8+specSize(m.version)+1, "pages", func(r *reader) SlotPage {
		return SlotPage{WriteID: r.u64("write id"), Page: r.spec(m.version), Checksum: r.bytes8("checksum")}
	})
	return r.done()
}

// SlotPage is one page of a SlotPut: the granted slot it was written into
// (its write id), its spec (Size: the bytes written, from the slot's
// start) and its checksum.
type SlotPage struct {
	WriteID  uint64
	Page     PageSpec
	Checksum []byte
}

// Grant is a slot granted to a connection: its write id, the deadline
// (unix ms) after which the node takes it back, and its extent in the
// arena, which the client may write from its start.
type Grant struct {
	WriteID    uint64
	DeadlineMs int64
	Ext        Extent
}

// SlotPutOK answers a SlotPut: one result per page, in order (PutOK's
// fields: the reserve status, the commit status when reserved, why), and
// the slots granted.
type SlotPutOK struct {
	Results []PutOK
	Slots   []Grant
}

func (*SlotPutOK) Op() uint8 { return OpSlotPutOK }

func (m *SlotPutOK) Append(b []byte) []byte {
	b = appendList(b, m.Results, func(b []byte, p *PutOK) []byte { return p.Append(b) })
	return appendList(b, m.Slots, func(b []byte, g *Grant) []byte {
		return appendExtent(appendU64(appendU64(b, g.WriteID), uint64(g.DeadlineMs)), g.Ext)
	})
}

func (m *SlotPutOK) Decode(body []byte) error {
	r := reader{b: body}
	m.Results = list(&r, 1+1+2, "results", func(r *reader) PutOK {
		return PutOK{Reserve: r.u8("reserve status"), Commit: r.u8("commit status"), Reason: r.str("reason")}
	})
	m.Slots = list(&r, 8+8+32, "slots", func(r *reader) Grant {
		return Grant{WriteID: r.u64("write id"), DeadlineMs: int64(r.u64("deadline")), Ext: r.extent("extent")}
	})
	return r.done()
}
