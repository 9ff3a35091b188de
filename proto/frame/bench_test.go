package frame

import (
	"testing"

	"github.com/stratakv/strata/namespace"
)

// BenchmarkLookupCodec encodes and decodes a 1,000-key Lookup and its
// LookupOK, as a node and a client do for each lookup of that size: the
// key list and the answer's list of booleans are what cost.
func BenchmarkLookupCodec(b *testing.B) {
	keys := make([]namespace.Key, 1000)
	present := make([]bool, len(keys))
	for i := range keys {
		keys[i][0], keys[i][31] = byte(i), byte(i>>8)
		present[i] = i%7 != 0
	}
	req := &Lookup{NS: namespace.ID{1}, Keys: keys}
	ans := &LookupOK{HitPrefix: 7, Present: present}
	b.Run("lookup", func(b *testing.B) {
		var buf []byte
		var m Lookup
		b.ReportAllocs()
		for range b.N {
			buf = req.Append(buf[:0])
			if err := m.Decode(buf); err != nil || len(m.Keys) != len(keys) {
				b.Fatal(err, len(m.Keys))
			}
		}
	})
	b.Run("answer", func(b *testing.B) {
		var buf []byte
		var m LookupOK
		b.ReportAllocs()
		for range b.N {
			buf = ans.Append(buf[:0])
			if err := m.Decode(buf); err != nil || len(m.Present) != len(present) {
				b.Fatal(err, len(m.Present))
			}
		}
	})
}
