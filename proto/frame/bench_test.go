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
		var m Lookup
		benchCodec(b, req, &m, func() int { return len(m.Keys) }, len(keys))
	})
	b.Run("answer", func(b *testing.B) {
		var m LookupOK
		benchCodec(b, ans, &m, func() int { return len(m.Present) }, len(present))
	})
}

// benchCodec appends msg and decodes it into into, b.N times; decoded is
// how many items into holds, which must be want after each decode.
func benchCodec(b *testing.B, msg, into Message, decoded func() int, want int) {
	var buf []byte
	b.ReportAllocs()
	for range b.N {
		buf = msg.Append(buf[:0])
		if err := into.Decode(buf); err != nil || decoded() != want {
			b.Fatal(err, decoded())
		}
	}
}
