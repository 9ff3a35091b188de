package frame

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// FuzzDecode: the decoder never panics, and whatever it accepts
// re-encodes to the same bytes, read as a connection of ProtocolVersion
// reads it and as one before CostHintVersion does. The golden and
// malformed frames seed it.
func FuzzDecode(f *testing.F) {
	for _, c := range goldenCases() {
		f.Add(Append(nil, c.id, c.msg))
	}
	for _, c := range malformed() {
		b, _ := hex.DecodeString(c.Hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []uint16{ProtocolVersion, CostHintVersion - 1} {
			id, m, err := decodeAt(b, v)
			if err != nil {
				continue
			}
			if again := Append(nil, id, m); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding %T at version %d differs:\n%x\n%x", m, v, b, again)
			}
		}
	})
}
