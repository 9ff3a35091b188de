package frame

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/stratakv/strata/namespace"
)

// The field types of SPEC.md §1, encoded and decoded.

func appendU16(b []byte, v uint16) []byte  { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte  { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte  { return binary.LittleEndian.AppendUint64(b, v) }
func appendF64(b []byte, v float64) []byte { return appendU64(b, math.Float64bits(v)) }

func appendStr(b []byte, s string) []byte {
	s = s[:min(len(s), math.MaxUint16)]
	return append(appendU16(b, uint16(len(s))), s...)
}

func appendBytes8(b []byte, p []byte) []byte {
	p = p[:min(len(p), math.MaxUint8)]
	return append(append(b, byte(len(p))), p...)
}

func appendBytes32(b []byte, p []byte) []byte {
	return append(appendU32(b, uint32(len(p))), p...)
}

func appendU32s(b []byte, list []uint32) []byte {
	b = appendU32(b, uint32(len(list)))
	for _, v := range list {
		b = appendU32(b, v)
	}
	return b
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendExtent(b []byte, e Extent) []byte {
	b = appendU64(appendU64(b, uint64(e.Off)), uint64(e.Len))
	return appendU64(appendU64(b, e.Gen), uint64(e.GenIndex))
}

// appendKeys appends a key list: its count, then the keys.
func appendKeys(b []byte, keys []namespace.Key) []byte {
	b = slices.Grow(appendU32(b, uint32(len(keys))), len(keys)*namespace.KeySize)
	for i := range keys {
		b = append(b, keys[i][:]...)
	}
	return b
}

// appendBools appends a list of booleans: its count, then a byte each. A
// lookup's answer is one per key asked about (1,000 and more): one pass
// over bytes already grown, not an append a key.
func appendBools(b []byte, list []bool) []byte {
	b = appendU32(b, uint32(len(list)))
	n := len(b)
	b = slices.Grow(b, len(list))[:n+len(list)]
	for i, v := range list {
		var x byte
		if v {
			x = 1
		}
		b[n+i] = x
	}
	return b
}

// appendList appends a list: its count, then each element.
func appendList[T any](b []byte, list []T, each func(b []byte, e *T) []byte) []byte {
	b = appendU32(b, uint32(len(list)))
	for i := range list {
		b = each(b, &list[i])
	}
	return b
}

// reader decodes a body front to back. The first failure sticks (bad
// says what it was) and the reads after it return zero values; every
// count is checked against the bytes left before anything is allocated.
type reader struct {
	b   []byte
	bad string
}

// zeros is what take returns for a fixed-size field it could not read.
var zeros [8]byte

func (r *reader) take(n int, what string) []byte {
	if r.bad == "" && (n < 0 || n > len(r.b)) {
		r.bad = "truncated " + what
	}
	if r.bad != "" {
		return zeros[:min(max(n, 0), len(zeros))]
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// fail records why the body is malformed, unless an earlier failure is
// recorded. Callers build why only when failing: a decode that succeeds
// allocates nothing but its fields.
func (r *reader) fail(why string) {
	if r.bad == "" {
		r.bad = why
	}
}

func (r *reader) u8(what string) uint8   { return r.take(1, what)[0] }
func (r *reader) u16(what string) uint16 { return binary.LittleEndian.Uint16(r.take(2, what)) }
func (r *reader) u32(what string) uint32 { return binary.LittleEndian.Uint32(r.take(4, what)) }
func (r *reader) u64(what string) uint64 { return binary.LittleEndian.Uint64(r.take(8, what)) }

// f64 reads an f64, any bits (a NaN too: its reader judges the value).
func (r *reader) f64(what string) float64 { return math.Float64frombits(r.u64(what)) }

func (r *reader) bool(what string) bool {
	v := r.u8(what)
	if v > 1 {
		r.fail("bad boolean " + what)
	}
	return v == 1
}

func (r *reader) str(what string) string { return string(r.take(int(r.u16(what)), what)) }

func (r *reader) bytes8(what string) []byte {
	p := r.take(int(r.u8(what)), what)
	if len(p) == 0 || r.bad != "" {
		return nil
	}
	return append([]byte(nil), p...)
}

// bytes32 reads a u32 length and that many bytes (nil when none).
func (r *reader) bytes32(what string) []byte {
	p := r.take(int(r.count(1, what)), what)
	if len(p) == 0 || r.bad != "" {
		return nil
	}
	return append([]byte(nil), p...)
}

// u32s reads a list of u32s (nil when empty).
func (r *reader) u32s(what string) []uint32 {
	n := r.count(4, what)
	if n == 0 {
		return nil
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = r.u32(what)
	}
	return out
}

// int64 reads an n64: a u64 of at most math.MaxInt64.
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
	if p := r.take(len(k), what); len(p) == len(k) {
		copy(k[:], p)
	}
	return k
}

// count reads a u32 element count whose elements take at least minSize
// bytes each, failing if they cannot fit in what is left.
func (r *reader) count(minSize int, what string) int {
	n := int(r.u32(what))
	if r.bad != "" || n > len(r.b)/minSize {
		r.fail(fmt.Sprintf("%d %s in %d bytes", n, what, len(r.b)))
		return 0
	}
	return n
}

// keys reads a key list into keys' own array when that is large enough
// (Conn reuses a message's keys: no allocation per request).
func (r *reader) keys(keys []namespace.Key) []namespace.Key {
	n := r.count(namespace.KeySize, "keys")
	if cap(keys) < n {
		keys = make([]namespace.Key, n)
	}
	keys = keys[:n]
	p := r.take(n*namespace.KeySize, "keys")
	if r.bad != "" {
		return keys[:0]
	}
	for i := range keys {
		keys[i] = namespace.Key(p[i*namespace.KeySize:])
	}
	return keys
}

// bools reads a list of booleans (appendBools) in one pass over its bytes,
// failing on any byte other than 0 and 1.
func (r *reader) bools(what string) []bool {
	n := r.count(1, what)
	p := r.take(n, what)
	if r.bad != "" {
		return nil
	}
	out := make([]bool, n)
	var seen byte
	for i, v := range p {
		seen |= v
		out[i] = v == 1
	}
	if seen > 1 {
		r.fail("bad boolean " + what)
		return nil
	}
	return out
}

// rest takes every byte left (nil for none).
func (r *reader) rest() []byte {
	if r.bad != "" || len(r.b) == 0 {
		return nil
	}
	p := r.b
	r.b = nil
	return p
}

func (r *reader) done() error {
	if len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	if r.bad != "" {
		return fmt.Errorf("%s: %w", r.bad, ErrMalformed)
	}
	return nil
}

// list reads a list of elements of at least minSize bytes each.
func list[T any](r *reader, minSize int, what string, each func(r *reader) T) []T {
	out := make([]T, r.count(minSize, what))
	for i := range out {
		out[i] = each(r)
	}
	return out
}
