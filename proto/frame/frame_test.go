package frame

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// FuzzDecode: the decoder never panics, and whatever it accepts
// re-encodes to the same bytes. The golden and malformed frames seed it.
func FuzzDecode(f *testing.F) {
	for _, c := range goldenCases() {
		f.Add(Append(nil, c.id, c.msg))
	}
	for _, c := range malformed() {
		b, _ := hex.DecodeString(c.Hex)
		f.Add(b)
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
