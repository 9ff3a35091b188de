package frame

import (
	"encoding/binary"
	"fmt"
)

// The framing, the ops and their bodies are specified in SPEC.md; this
// file has the frame-level part: header, versions, limits and the
// dispatch from op to message.

// ProtocolVersion is the newest version (SPEC.md §7): the one a Hello
// carries and a Welcome answers. A node also serves clients of
// MinProtocolVersion and up, answering their version in the Welcome, and
// takes from them only the messages their version has.
const ProtocolVersion = 6

// MinProtocolVersion is the oldest client version a node serves.
const MinProtocolVersion = 2

// CostHintVersion is the first version whose page specs carry a cost hint
// (SPEC.md §7): Reserve, Put and SlotPut are laid out by the connection's
// version, without it below this one.
const CostHintVersion = 5

// EventVersion is the first version whose page specs carry a page's event
// info (SPEC.md §7): its tokens, LoRA name and extra keys, for the node's
// KV event stream, in Reserve, Put and SlotPut.
const EventVersion = 6

// Versioned is a message whose layout depends on the connection's version
// (SPEC.md §7): Reserve, Put and SlotPut. One encodes and decodes at
// ProtocolVersion until SetVersion says otherwise; a connection sets the
// version its handshake settled on each it sends or reads
// (transport.Conn.SetVersion).
type Versioned interface {
	Message
	SetVersion(v uint16)
}

// version is the layout version of a Versioned message (0:
// ProtocolVersion); it is not on the wire.
type version uint16

// SetVersion lays the message out as version v has it.
func (v *version) SetVersion(x uint16) { *v = version(x) }

// costHint reports whether the layout carries page specs' cost hints.
func (v version) costHint() bool { return v == 0 || v >= CostHintVersion }

// events reports whether the layout carries page specs' event info.
func (v version) events() bool { return v == 0 || v >= EventVersion }

// HeaderSize is the length of a frame's header: length, op, padding, id.
const HeaderSize = 16

// DefaultMaxFrame is the default bound on a frame's length (SPEC.md §8):
// a full batch of 16,384 keys or page records is well under it.
const DefaultMaxFrame = 8 << 20

// Message is a frame body.
type Message interface {
	Op() uint8
	Append(b []byte) []byte
	Decode(body []byte) error
}

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
	case OpSlotPut:
		return &SlotPut{}
	case OpSlotPutOK:
		return &SlotPutOK{}
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

// Decode decodes one whole frame (header and body) at ProtocolVersion.
func Decode(b []byte) (id uint64, m Message, err error) { return decodeAt(b, ProtocolVersion) }

// decodeAt decodes one whole frame as a connection of version v reads it.
func decodeAt(b []byte, v uint16) (id uint64, m Message, err error) {
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
	if vm, ok := m.(Versioned); ok && v != ProtocolVersion {
		vm.SetVersion(v)
	}
	if err := m.Decode(b[HeaderSize:]); err != nil {
		return 0, nil, err
	}
	return id, m, nil
}
