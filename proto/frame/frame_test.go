package frame

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/stratakv/strata/namespace"
)

func sampleMessages() []Message {
	k1, k2 := namespace.Key{1, 2, 3}, namespace.Key{31: 9}
	ext := Extent{Off: 1 << 20, Len: 256 << 10, Gen: 7, GenIndex: 256}
	return []Message{
		&Hello{Version: ProtocolVersion, Token: "token-a"},
		&Welcome{Version: 1, NodeID: "node-1", ArenaID: 42, ArenaSize: 1 << 30, GenWords: 1 << 18, MaxBatch: 16384},
		&Error{Code: CodeLeaseExpired, Message: "lease 3: lease expired"},
		&Get{NS: namespace.ID{5}, Lease: 3, Keys: []namespace.Key{k1, k2}},
		&GetOK{Pages: []PageLoc{{Status: PageMapped, Ext: ext, Checksum: []byte{1, 2, 3, 4}}, {}, {Status: PageElse}}},
		&Reserve{NS: namespace.ID{5}, TTLms: 100, Pages: []PageSpec{{Key: k1, Size: 4096}, {Key: k2, Parent: k1, HasParent: true, Depth: 1, Size: 4096}}},
		&ReserveOK{Slots: []Slot{{Status: SlotReserved, WriteID: 9, DeadlineMs: 1700000000000, Mapped: true, Ext: ext}, {Status: SlotRejected, Reason: "no space"}}},
		&Commit{NS: namespace.ID{5}, Items: []CommitItem{{WriteID: 9, Size: 4096, Checksum: []byte{9, 9, 9, 9}}}},
		&CommitOK{Statuses: []uint8{1, 3}},
		&Abort{NS: namespace.ID{5}, WriteIDs: []uint64{9, 10}},
		&AbortOK{Aborted: 2},
		&Served{NS: namespace.ID{5}, Pages: 3, Bytes: 3 << 18},
		&Read{NS: namespace.ID{5}, Lease: 3, Keys: []namespace.Key{k1, k2}},
		&Page{Index: 2, Found: true, Checksum: []byte{1, 2, 3, 4}, Data: []byte("page bytes")},
		&Page{Index: 3},
		&Write{NS: namespace.ID{5}, WriteID: 9, Offset: 4096, Data: []byte("more bytes")},
		&Put{NS: namespace.ID{5}, TTLms: 7, Page: PageSpec{Key: k2, Parent: k1, HasParent: true, Depth: 1, ChainDepth: 4, Size: 10},
			Checksum: []byte{1, 2, 3, 4}, Data: []byte("page bytes")},
		&PutOK{Reserve: SlotReserved, Commit: 1},
		&PutOK{Reserve: SlotRejected, Reason: "no space"},
		&Lookup{NS: namespace.ID{5}, Lease: true, LeaseTTLms: 300, Keys: []namespace.Key{k1, k2}},
		&LookupOK{HitPrefix: 1, LeaseID: 12, ExpiresMs: 1700000000000, LeasePages: 1, Present: []bool{true, false, true}},
	}
}

// TestFrameRoundTrip encodes every message and decodes it back.
func TestFrameRoundTrip(t *testing.T) {
	for i, m := range sampleMessages() {
		b := Append(nil, uint64(i+1), m)
		id, got, err := Decode(b)
		if err != nil || id != uint64(i+1) {
			t.Fatalf("%T: id %d, %v", m, id, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%T: decoded %#v, want %#v", m, got, m)
		}
	}
}

// TestFrameRejects checks truncation, trailing bytes, unknown ops and
// counts larger than the frame.
func TestFrameRejects(t *testing.T) {
	good := Append(nil, 1, &Get{NS: namespace.ID{1}, Keys: []namespace.Key{{1}, {2}}})
	lie := bytes.Clone(good)
	lie[len(lie)-2*32-4] = 200 // key count 200 in a 2-key body
	op := bytes.Clone(good)
	op[4] = 99
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short header", good[:10]},
		{"truncated body", good[:len(good)-1]},
		{"trailing byte", append(bytes.Clone(good), 0)},
		{"count too large", lie},
		{"unknown op", op},
	} {
		if _, _, err := Decode(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
	}
	// A bool that is neither 0 nor 1.
	b := Append(nil, 1, &ReserveOK{Slots: []Slot{{}}})
	b[HeaderSize+4+1+8+8] = 2
	if _, _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad boolean: %v", err)
	}
}

// FuzzDecode: the decoder never panics, and whatever it accepts
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for i, m := range sampleMessages() {
		f.Add(Append(nil, uint64(i), m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, m, err := Decode(b)
		if err != nil {
			return
		}
		if again := Append(nil, id, m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %T differs:\n%x\n%x", m, b, again)
		}
	})
}
