package crc32c

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// This file derives the folding constants of crc32c_amd64.s from the
// polynomial and checks them against the DATA lines of that file. It also
// checks the folding rule itself with a software carry-less multiply, so the
// math is tested on every architecture.

// poly is the CRC-32C polynomial 0x1EDC6F41 in bit-reflected form: bit i
// holds the coefficient of x^(31-i) of x^32 mod P.
const poly uint32 = 0x82F63B78

// xpow returns x^n mod P in bit-reflected form (bit i is the coefficient of
// x^(31-i)), by multiplying 1 by x n times: a reflected shift right, and a
// reduction by P whenever a term x^32 appears.
func xpow(n int) uint32 {
	v := uint32(1 << 31) // x^0
	for range n {
		if v&1 != 0 { // x^31 term: becomes x^32 ≡ poly
			v = v>>1 ^ poly
		} else {
			v >>= 1
		}
	}
	return v
}

// foldPair returns the constant pair that moves a 128-bit lane forward by
// the given number of bytes: x^(N+31) mod P for the low quadword and
// x^(N-33) mod P for the high quadword, N = 8·bytes (see crc32c_amd64.s).
func foldPair(bytes int) [2]uint64 {
	n := 8 * bytes
	return [2]uint64{uint64(xpow(n + 31)), uint64(xpow(n - 33))}
}

// wantConsts lists, for each constant table of crc32c_amd64.s, the fold
// distances in bytes of its pairs; 0 means a zero pair.
var wantConsts = map[string][]int{
	"k768":   {768},           // one period of the main loop
	"k64":    {64},            // the second accumulator of each group
	"k576":   {576},           // group 0 onto group 3
	"k384":   {384},           // group 1 onto group 3
	"k192":   {192},           // group 2 onto group 3
	"klanes": {48, 32, 16, 0}, // lanes 0-3 onto lane 3
	// The 256-bit kernel: one 512-byte period, and the lanes of the last
	// period onto its last lane.
	"k512": {512},
	"kymm": {432, 416, 400, 384, 304, 288, 272, 256, 176, 160, 144, 128, 48, 32, 16, 0},
}

func TestXpow(t *testing.T) {
	if got := xpow(0); got != 1<<31 {
		t.Errorf("x^0 = %#08x, want 0x80000000", got)
	}
	if got := xpow(31); got != 1 {
		t.Errorf("x^31 = %#08x, want 1", got)
	}
	// x^32 mod P is P without its x^32 term: the polynomial itself.
	if got := xpow(32); got != poly {
		t.Errorf("x^32 mod P = %#08x, want %#08x", got, poly)
	}
	// Multiplying by x^n is what a CRC does to a zero input of n bits,
	// so x^(32+8k) mod P is the raw CRC of a 1 bit followed by k zero
	// bytes. The first bit of a message is bit 0 of its first byte.
	for k := 0; k < 40; k++ {
		msg := make([]byte, 1+k)
		msg[0] = 1
		if got, want := raw(0, msg), xpow(32+8*k+7); got != want {
			t.Errorf("k=%d: CRC = %#08x, x^%d mod P = %#08x", k, got, 32+8*k+7, want)
		}
	}
}

var dataLine = regexp.MustCompile(`(?m)^DATA\s+(\w+)<>\+0x([0-9a-fA-F]+)\(SB\)/8,\s*\$(0x[0-9a-fA-F]+|0)\b`)

// TestFoldConstants recomputes the constants of crc32c_amd64.s and compares
// them with its DATA lines. On a mismatch it prints the lines that belong
// there.
func TestFoldConstants(t *testing.T) {
	src, err := os.ReadFile("crc32c_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[int]uint64{}
	for _, m := range dataLine.FindAllStringSubmatch(string(src), -1) {
		off, _ := strconv.ParseUint(m[2], 16, 32)
		v, err := strconv.ParseUint(m[3], 0, 64)
		if err != nil {
			t.Fatalf("bad DATA value %q", m[3])
		}
		if got[m[1]] == nil {
			got[m[1]] = map[int]uint64{}
		}
		got[m[1]][int(off)] = v
	}
	for name, dists := range wantConsts {
		if len(got[name]) != 2*len(dists) {
			t.Errorf("%s: %d DATA quadwords, want %d", name, len(got[name]), 2*len(dists))
		}
		for i, d := range dists {
			var want [2]uint64
			if d != 0 {
				want = foldPair(d)
			}
			for j := range 2 {
				off := 16*i + 8*j
				if v, ok := got[name][off]; !ok || v != want[j] {
					t.Errorf("%s+%#02x = %#08x, want DATA %s<>+0x%02x(SB)/8, $%#08x (fold by %d bytes)",
						name, off, v, name, off, want[j], d)
				}
			}
		}
	}
	for name := range got {
		if _, ok := wantConsts[name]; !ok {
			t.Errorf("%s: constant table not checked by this test", name)
		}
	}
}

// raw is the CRC-32C of p from register value crc, without the inversions
// of the finished form; unlike ref it is linear in p.
func raw(crc uint32, p []byte) uint32 { return ^ref(^crc, p) }

// clmul returns the 128-bit carry-less product of a and b (hi, lo).
func clmul(a, b uint64) (hi, lo uint64) {
	for i := range 64 {
		if b>>i&1 != 0 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return hi, lo
}

// TestFoldRule checks, in software, the rule the assembly relies on: a
// 16-byte lane X folded forward by N bytes with foldPair(N) gives a Y whose
// CRC equals that of X followed by N zero bytes.
func TestFoldRule(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{16, 32, 48, 64, 192, 384, 576, 768, 1000} {
		k := foldPair(n)
		for range 20 {
			x := make([]byte, 16+n)
			lo, hi := r.Uint64(), r.Uint64()
			binary.LittleEndian.PutUint64(x, lo)
			binary.LittleEndian.PutUint64(x[8:], hi)
			h1, l1 := clmul(lo, k[0])
			h2, l2 := clmul(hi, k[1])
			y := binary.LittleEndian.AppendUint64(nil, l1^l2)
			y = binary.LittleEndian.AppendUint64(y, h1^h2)
			if got, want := raw(0, y), raw(0, x); got != want {
				t.Fatalf("fold by %d bytes: CRC(Y) = %#08x, CRC(X, zeros) = %#08x", n, got, want)
			}
		}
	}
}
