package namespace

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts is canonical:
// re-encoding gives the input back, and decoding that gives the same
// descriptor.
func FuzzDecode(f *testing.F) {
	for _, d := range testDescriptors() {
		f.Add(d.Canonical())
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`[1,2,3]`))
	f.Add([]byte(`{"tenant":"\u0000","v":1,"v":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Decode(in)
		if err != nil {
			return
		}
		out := d.Canonical()
		if !bytes.Equal(out, in) {
			t.Fatalf("Decode accepted non-canonical input\n in: %q\nout: %q", in, out)
		}
		d2, err := Decode(out)
		if err != nil || !reflect.DeepEqual(d, d2) {
			t.Fatalf("re-decoding: %v\n%+v\n%+v", err, d, d2)
		}
		if d.ID() != ID(sum256(in)) {
			t.Fatal("ID is not SHA-256 of the canonical bytes")
		}
	})
}

// FuzzKeys: the key chain agrees with the reference formula, continuing a
// chain equals hashing in one go, and keys of a token prefix are a prefix
// of the keys.
func FuzzKeys(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef"), uint8(4), uint16(3))
	f.Add([]byte{}, uint8(1), uint16(0))
	f.Add(bytes.Repeat([]byte{0xff}, 1024), uint8(16), uint16(100))
	f.Fuzz(func(t *testing.T, raw []byte, pt8 uint8, cut uint16) {
		pt := int(pt8%64) + 1
		toks := make([]uint32, len(raw)/4)
		for i := range toks {
			toks[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		id := ID(sum256(raw))
		keys := PageKeys(id, toks, pt)
		if len(keys) != len(toks)/pt {
			t.Fatalf("%d keys for %d tokens in pages of %d", len(keys), len(toks), pt)
		}
		prev := Key(id)
		for i, k := range keys {
			if want := refNextKey(prev, toks[i*pt:(i+1)*pt]); k != want {
				t.Fatalf("key %d = %s, want %s", i, k, want)
			}
			prev = k
		}
		c := min(int(cut), len(toks)) / pt * pt
		head := PageKeys(id, toks[:c], pt)
		if !slices.Equal(head, keys[:len(head)]) {
			t.Fatal("keys of a prefix are not a prefix of the keys")
		}
		last := Key(id)
		if len(head) > 0 {
			last = head[len(head)-1]
		}
		if got := AppendPageKeys(head, last, toks[c:], pt); !slices.Equal(got, keys) {
			t.Fatal("continuing the chain differs from hashing in one go")
		}
	})
}
