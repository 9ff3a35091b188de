package ntcopy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCopy checks every combination of lengths around the thresholds and
// destination and source misalignments against copy, and that no byte
// outside the destination's range changes.
func TestCopy(t *testing.T) {
	const guard = 256
	src := make([]byte, 1<<20+guard)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 63, 64, 127, MinBytes - 1, MinBytes, MinBytes + 1, MinBytes + 127, 16 << 10, 256<<10 + 5, 1 << 20}
	for _, n := range lengths {
		for _, doff := range []int{0, 1, 31, 32, 63} {
			for _, soff := range []int{0, 3, 64} {
				buf := make([]byte, n+2*guard)
				for i := range buf {
					buf[i] = 0xA5
				}
				dst := buf[guard+doff : guard+doff+n]
				if got := Copy(dst, src[soff:soff+n]); got != n {
					t.Fatalf("n=%d doff=%d soff=%d: copied %d", n, doff, soff, got)
				}
				if !bytes.Equal(dst, src[soff:soff+n]) {
					t.Fatalf("n=%d doff=%d soff=%d: bytes differ", n, doff, soff)
				}
				for i, b := range buf {
					if (i < guard+doff || i >= guard+doff+n) && b != 0xA5 {
						t.Fatalf("n=%d doff=%d soff=%d: byte %d outside the destination changed", n, doff, soff, i)
					}
				}
			}
		}
	}
}

// TestCopyShorter copies the shorter of the two, as copy does.
func TestCopyShorter(t *testing.T) {
	src := bytes.Repeat([]byte{7}, 3*MinBytes)
	dst := make([]byte, 2*MinBytes)
	if n := Copy(dst, src); n != len(dst) || !bytes.Equal(dst, src[:len(dst)]) {
		t.Fatalf("into a shorter destination: %d", n)
	}
	dst = make([]byte, 4*MinBytes)
	if n := Copy(dst, src); n != len(src) || !bytes.Equal(dst[:n], src) || dst[n] != 0 {
		t.Fatalf("from a shorter source: %d", n)
	}
}

// BenchmarkCopy copies 256 KiB pages round-robin into a 1 GiB destination
// (cold: far past the last-level cache), with copy and with Copy.
//
//	go test -run '^$' -bench Copy -benchtime 2s ./internal/ntcopy
func BenchmarkCopy(b *testing.B) {
	const page, dstBytes = 256 << 10, 1 << 30
	src := make([]byte, page)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, dstBytes)
	for i := 0; i < len(dst); i += 4096 {
		dst[i] = 1 // commit every page
	}
	for _, how := range []string{"copy", "ntcopy"} {
		b.Run(fmt.Sprintf("how=%s", how), func(b *testing.B) {
			b.SetBytes(page)
			off := 0
			for b.Loop() {
				d := dst[off : off+page]
				if how == "copy" {
					copy(d, src)
				} else {
					Copy(d, src)
				}
				off = (off + page) % dstBytes
			}
		})
	}
}
