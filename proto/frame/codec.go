package frame

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/stratakv/strata/namespace"
)

// Encoding.

func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func appendStr(b []byte, s string) []byte {
	s = s[:min(len(s), math.MaxUint16)]
	return append(appendU16(b, uint16(len(s))), s...)
}

func appendBytes8(b []byte, p []byte) []byte {
	p = p[:min(len(p), math.MaxUint8)]
	return append(append(b, byte(len(p))), p...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendExtent(b []byte, e Extent) []byte {
	b = appendU64(b, uint64(e.Off))
	b = appendU64(b, uint64(e.Len))
	b = appendU64(b, e.Gen)
	return appendU64(b, uint64(e.GenIndex))
}

// Decoding: a reader with a sticky error; every count is checked against
// the bytes left before anything is allocated.

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", what, ErrMalformed)
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("truncated " + what)
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8(what string) uint8 {
	if p := r.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if p := r.take(2, what); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(4, what); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(8, what); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *reader) bool(what string) bool {
	switch r.u8(what) {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad boolean " + what)
	return false
}

func (r *reader) str(what string) string { return string(r.take(int(r.u16(what)), what)) }

func (r *reader) bytes8(what string) []byte {
	p := r.take(int(r.u8(what)), what)
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (r *reader) int64(what string) int64 {
	v := r.u64(what)
	if v > math.MaxInt64 {
		r.fail("negative " + what)
	}
	return int64(v)
}

func (r *reader) extent(what string) Extent {
	return Extent{Off: r.int64(what), Len: r.int64(what), Gen: r.u64(what), GenIndex: r.int64(what)}
}

func (r *reader) key(what string) (k namespace.Key) {
	copy(k[:], r.take(len(k), what))
	return k
}

// count reads a u32 element count whose elements take at least min bytes
// each, failing if they cannot fit in what is left.
func (r *reader) count(minSize int, what string) int {
	n := int(r.u32(what))
	if r.err == nil && n > len(r.b)/minSize {
		r.fail(fmt.Sprintf("%d %s in %d bytes", n, what, len(r.b)))
		return 0
	}
	return n
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	return r.err
}
