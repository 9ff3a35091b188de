package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// MaxMetaSize is the most bytes of encoded metadata that gossip carries for
// one member: memberlist's MetaMaxSize (a test pins the two together).
// Everything in Meta but NodeID counts against it; SummaryBudget says how
// much is left for Summary.
const MaxMetaSize = 512

// TierMeta is one storage tier of a node as gossip advertises it.
type TierMeta struct {
	// Kind names the tier ("gpu", "host", "ssd").
	Kind string
	// Capacity and Used are in bytes.
	Capacity, Used int64
}

// Meta is what a member advertises about itself in gossip. The local
// member's Meta comes from Config.Meta; remote members' Meta is decoded from
// what they advertised.
type Meta struct {
	// NodeID is always the member's Config.NodeID: it travels as the
	// gossip node name, not inside the metadata, so whatever Config.Meta
	// puts here is ignored.
	NodeID string
	// GRPCAddress is where the node serves strata's gRPC API (host:port).
	GRPCAddress string
	// RawAddress is where the node serves the raw tcp data plane
	// (host:port, the host possibly unspecified); "" when it does not.
	// Clients re-learn it from the view when a node restarts on a new port.
	RawAddress string
	// Tiers are the node's storage tiers, in the node's order.
	Tiers []TierMeta
	// EventsIncarnation is the incarnation in the topics of the node's KV
	// event streams (docs/design.md §15); 0 when it publishes none. A
	// survivor clears that node's streams under it when it leaves.
	EventsIncarnation uint64
	// Summary is opaque bytes (value summaries). It is sent last and only
	// if everything fits in MaxMetaSize: when it does not, the metadata
	// goes out without Summary (never a truncated one). strata's nodes
	// leave it empty and report their summaries to the coordinator that
	// asks (Config.Report, Collect); nodes of the release before gossiped
	// them here, and the coordinator still reads them.
	Summary []byte
}

// clone returns a deep copy of m, so that callers can't alias the member
// map's slices.
func (m Meta) clone() Meta {
	m.Tiers = slices.Clone(m.Tiers)
	m.Summary = slices.Clone(m.Summary)
	return m
}

// wireMeta is what travels in memberlist's node metadata: Meta plus the
// fields this package adds. Encoding, version 1:
//
//	byte     format version (1)
//	byte     flags: bit 0 = leaving (the member is about to Leave),
//	         bit 1 = RawAddress follows the tiers
//	4 bytes  meta version (Member.Incarnation), big-endian: fixed, so that
//	         SummaryBudget is exact whatever the version
//	uvarint  len, bytes   GRPCAddress
//	uvarint  n tiers, then n × { uvarint len, bytes Kind; varint Capacity; varint Used }
//	uvarint  len, bytes   RawAddress, only with flag bit 1
//	uvarint  EventsIncarnation, only with flag bit 2
//	bytes    Summary: the rest
//
// RawAddress comes after the tiers so that a node of an older build, which
// ignores flag bit 1, still reads the address and tiers right (placement
// weights agree across a rolling upgrade); it takes the address as the
// start of the summary, which then does not decode, and goes without that
// node's summaries until it is upgraded. EventsIncarnation follows it on
// the same terms.
//
// NodeID is not encoded: it is memberlist's node name.
type wireMeta struct {
	Meta
	version uint32
	leaving bool
}

const (
	metaFormat  = 1
	flagLeaving = 1 << 0
	flagRaw     = 1 << 1
	flagEvents  = 1 << 2
)

// errBadMeta is returned by decodeMeta for bytes that are not metadata
// written by encodeMeta (truncated, an unknown format, a count larger than
// the bytes that follow).
var errBadMeta = errors.New("malformed node metadata")

// encodeMeta encodes w, or returns ErrMetaTooLarge if the result would not
// fit in MaxMetaSize.
func encodeMeta(w wireMeta) ([]byte, error) {
	b := make([]byte, 0, 64+len(w.Summary))
	b = append(b, metaFormat, 0)
	if w.leaving {
		b[1] |= flagLeaving
	}
	b = binary.BigEndian.AppendUint32(b, w.version)
	b = appendString(b, w.GRPCAddress)
	b = binary.AppendUvarint(b, uint64(len(w.Tiers)))
	for _, t := range w.Tiers {
		b = appendString(b, t.Kind)
		b = binary.AppendVarint(b, t.Capacity)
		b = binary.AppendVarint(b, t.Used)
	}
	if w.RawAddress != "" {
		b[1] |= flagRaw
		b = appendString(b, w.RawAddress)
	}
	if w.EventsIncarnation != 0 {
		b[1] |= flagEvents
		b = binary.AppendUvarint(b, w.EventsIncarnation)
	}
	b = append(b, w.Summary...)
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("encoding metadata: %d bytes, at most %d: %w", len(b), MaxMetaSize, ErrMetaTooLarge)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeMeta decodes metadata advertised by the member named name.
func decodeMeta(name string, b []byte) (wireMeta, error) {
	d := decoder{b: b}
	var w wireMeta
	w.NodeID = name
	if format := d.byte(); format != metaFormat {
		if d.err != nil {
			return wireMeta{}, d.err
		}
		return wireMeta{}, fmt.Errorf("metadata format %d: %w", format, errBadMeta)
	}
	flags := d.byte()
	w.leaving = flags&flagLeaving != 0
	w.version = d.uint32()
	w.GRPCAddress = d.string()
	n := d.uvarint()
	// Each tier takes at least three bytes: a bound before allocating.
	if n > uint64(len(d.b))/3 {
		return wireMeta{}, fmt.Errorf("metadata with %d tiers in %d bytes: %w", n, len(d.b), errBadMeta)
	}
	if n > 0 {
		w.Tiers = make([]TierMeta, n)
	}
	for i := range w.Tiers {
		w.Tiers[i] = TierMeta{Kind: d.string(), Capacity: d.varint(), Used: d.varint()}
	}
	if flags&flagRaw != 0 {
		w.RawAddress = d.string()
	}
	if flags&flagEvents != 0 {
		w.EventsIncarnation = d.uvarint()
	}
	if d.err != nil {
		return wireMeta{}, d.err
	}
	if len(d.b) > 0 {
		w.Summary = slices.Clone(d.b)
	}
	return w, nil
}

// decoder reads the fields of encoded metadata; the first error sticks and
// later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("metadata truncated in %s: %w", what, errBadMeta)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("header")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uint32() uint32 {
	if len(d.b) < 4 {
		d.fail("the version")
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) uvarint() uint64 { return varintOf(d, "a count", binary.Uvarint) }

func (d *decoder) varint() int64 { return varintOf(d, "a tier size", binary.Varint) }

// varintOf reads one variable-length number with read (binary.Uvarint or
// binary.Varint); what names it when it is missing.
func varintOf[T uint64 | int64](d *decoder, what string, read func([]byte) (T, int)) T {
	v, n := read(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("a string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// SummaryBudget returns how many bytes of Summary fit in gossip alongside
// the rest of m (its own Summary is not counted). It is negative when even
// m without Summary is too large, which Start and UpdateMeta reject with
// ErrMetaTooLarge.
func SummaryBudget(m Meta) int {
	m.Summary = nil
	b, err := encodeMeta(wireMeta{Meta: m})
	if err != nil {
		return -1
	}
	return MaxMetaSize - len(b)
}
