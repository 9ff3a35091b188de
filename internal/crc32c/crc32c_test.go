package crc32c

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"testing"
)

// refTable is the reference every result is checked against.
var refTable = crc32.MakeTable(crc32.Castagnoli)

// ref is hash/crc32's Update with the Castagnoli table.
func ref(crc uint32, p []byte) uint32 { return crc32.Update(crc, refTable, p) }

// setVector forces the vector path on or off for the rest of the test and
// restores the previous setting afterwards. Turning it on skips the test
// when this build or CPU has no vector path.
func setVector(t testing.TB, on bool) {
	t.Helper()
	if on && !HasVector {
		if runtime.GOARCH != "amd64" {
			t.Skipf("no vector implementation on GOARCH=%s", runtime.GOARCH)
		}
		t.Skip("CPU lacks VPCLMULQDQ with AVX-512F or AVX2, PCLMULQDQ or SSE4.2, or this is a purego build")
	}
	old := useVector
	useVector = on
	t.Cleanup(func() { useVector = old })
}

// forEachPath runs f once with the vector path and once with the fallback.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	for _, c := range []struct {
		name string
		on   bool
	}{{"vector", true}, {"fallback", false}} {
		t.Run(c.name, func(t *testing.T) {
			setVector(t, c.on)
			f(t)
		})
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// check compares Update(crc, p) and, for crc 0, Checksum(p) with hash/crc32.
func check(t *testing.T, crc uint32, p []byte, what string) {
	t.Helper()
	if got, want := Update(crc, p), ref(crc, p); got != want {
		t.Fatalf("%s: Update(%#08x, len %d) = %#08x, want %#08x", what, crc, len(p), got, want)
	}
	if got, want := Checksum(p), ref(0, p); got != want {
		t.Fatalf("%s: Checksum(len %d) = %#08x, want %#08x", what, len(p), got, want)
	}
}

func TestKnownValues(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		for _, c := range []struct {
			in   string
			want uint32
		}{
			{"", 0},
			{"a", 0xc1d04330},
			{"123456789", 0xe3069283},
		} {
			if got := Checksum([]byte(c.in)); got != c.want {
				t.Errorf("Checksum(%q) = %#08x, want %#08x", c.in, got, c.want)
			}
		}
		// 32 bytes of zeros and of 0xff, from RFC 3720 (iSCSI), B.4.
		zeros, ones := make([]byte, 32), make([]byte, 32)
		for i := range ones {
			ones[i] = 0xff
		}
		if got := Checksum(zeros); got != 0x8a9136aa {
			t.Errorf("Checksum(32 zeros) = %#08x, want 0x8a9136aa", got)
		}
		if got := Checksum(ones); got != 0x62a8ab43 {
			t.Errorf("Checksum(32 × 0xff) = %#08x, want 0x62a8ab43", got)
		}
	})
}

// TestEveryLength checks every length from 0 to 2048 at several alignments
// and initial values.
func TestEveryLength(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		buf := randBytes(r, 2048+64)
		for n := 0; n <= 2048; n++ {
			for _, off := range []int{0, 1 + n%63, r.IntN(64)} {
				check(t, r.Uint32(), buf[off:off+n], fmt.Sprintf("offset %d", off))
			}
			check(t, 0, buf[:n], "offset 0, crc 0")
			check(t, 0xffffffff, buf[:n], "offset 0, crc ^0")
		}
	})
}

// TestRandomLengths checks random lengths up to 1 MiB, lengths next to
// every multiple of 256 and of vectorBlock up to 48 KiB, and a few 4 MiB buffers, at random
// alignments and initial values.
func TestRandomLengths(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		buf := randBytes(r, 4<<20+64)
		var lengths []int
		for k := 1; k <= 64; k++ {
			lengths = append(lengths, 256*k-1, 256*k, 256*k+1)
			lengths = append(lengths, vectorBlock*k-1, vectorBlock*k, vectorBlock*k+1)
		}
		iters := 300
		if testing.Short() {
			iters = 50
		}
		for range iters {
			lengths = append(lengths, r.IntN(1<<20+1))
		}
		lengths = append(lengths, 1<<20, 4<<20, 4<<20-1, 4<<20-r.IntN(4096))
		for _, n := range lengths {
			off := r.IntN(64)
			check(t, r.Uint32(), buf[off:off+n], fmt.Sprintf("offset %d", off))
		}
		// All-zero and all-one inputs, where a lost XOR would not hide.
		zeros := make([]byte, 1<<16)
		check(t, 0, zeros, "zeros")
		check(t, 0x12345678, zeros, "zeros")
		ones := make([]byte, 1<<16+100)
		for i := range ones {
			ones[i] = 0xff
		}
		check(t, 0, ones, "ones")
	})
}

// TestChained checks that Update calls split at random points give the same
// result as one call over the whole buffer.
func TestChained(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		buf := randBytes(r, 1<<20+64)
		for range 200 {
			n := r.IntN(1<<20 + 1)
			if r.IntN(4) == 0 {
				n = r.IntN(8192)
			}
			off := r.IntN(64)
			p := buf[off : off+n]
			init := r.Uint32()
			want := ref(init, p)

			crc := init
			rest := p
			for len(rest) > 0 {
				var k int
				switch r.IntN(3) {
				case 0:
					k = r.IntN(len(rest) + 1)
				case 1:
					k = r.IntN(min(len(rest), 2048) + 1)
				default:
					k = min(len(rest), vectorBlock*r.IntN(20)+r.IntN(3)-1)
					k = max(k, 0)
				}
				crc = Update(crc, rest[:k])
				rest = rest[k:]
			}
			if crc != want {
				t.Fatalf("len %d offset %d init %#08x: chained = %#08x, want %#08x", n, off, init, crc, want)
			}
		}
	})
}

// TestUpdateVector calls the vector kernel directly, without the wrapper's
// tail handling, on every length it accepts up to 48 KiB.
func TestUpdateVector(t *testing.T) {
	setVector(t, true)
	r := rand.New(rand.NewPCG(7, 8))
	buf := randBytes(r, 64*vectorBlock+64)
	for n := vectorBlock; n <= 64*vectorBlock; n += vectorBlock {
		for range 4 {
			off, crc := r.IntN(64), r.Uint32()
			p := buf[off : off+n]
			if got, want := updateVector(crc, p), raw(crc, p); got != want {
				t.Fatalf("updateVector(%#08x, len %d, offset %d) = %#08x, want %#08x", crc, n, off, got, want)
			}
		}
	}
}

// TestKernels calls each assembly kernel this CPU can run directly, on
// every length it accepts up to 48 KiB, whichever of them updateVector
// picks: a machine with AVX-512 checks the 256-bit kernel too.
func TestKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	buf := randBytes(r, 48<<10+64)
	ran := 0
	for _, k := range vectorKernels() {
		t.Run(k.name, func(t *testing.T) {
			ran++
			for n := k.period; n <= 48<<10; n += k.period {
				for range 2 {
					off, crc := r.IntN(64), r.Uint32()
					p := buf[off : off+n]
					if got, want := k.update(crc, p), raw(crc, p); got != want {
						t.Fatalf("%s(%#08x, len %d, offset %d) = %#08x, want %#08x", k.name, crc, n, off, got, want)
					}
				}
			}
		})
	}
	if ran == 0 {
		t.Skip("no vector kernel runs on this machine")
	}
}

// TestVectorIsUsed makes sure the fast path is the one taken when it is
// available, so the vector tests above do not silently test the fallback.
func TestVectorIsUsed(t *testing.T) {
	if !HasVector {
		t.Skip("no vector path on this machine")
	}
	if !useVector {
		t.Fatal("HasVector is true but useVector is false")
	}
	p := make([]byte, vectorMin)
	allocs := testing.AllocsPerRun(10, func() { Checksum(p) })
	if allocs != 0 {
		t.Errorf("Checksum allocates %v times per call", allocs)
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), []byte("123456789"), uint8(0), uint16(0), uint16(0))
	f.Add(uint32(0xffffffff), []byte{0}, uint8(255), uint16(511), uint16(3))
	f.Add(uint32(0xdeadbeef), []byte("strata page"), uint8(100), uint16(700), uint16(1))
	f.Fuzz(func(t *testing.T, crc uint32, data []byte, rep uint8, split uint16, off uint16) {
		// Repeat data so that short fuzz inputs still reach the
		// vector path (which starts at vectorMin bytes).
		var p []byte
		for range int(rep) + 1 {
			p = append(p, data...)
		}
		p = p[min(int(off)%64, len(p)):]
		want := ref(crc, p)
		s := min(int(split), len(p))
		for _, on := range []bool{false, true} {
			if on && !HasVector {
				continue
			}
			useVector = on
			got := Update(crc, p)
			chained := Update(Update(crc, p[:s]), p[s:])
			useVector = HasVector
			if got != want || chained != want {
				t.Fatalf("vector=%v len %d split %d: Update = %#08x, chained = %#08x, want %#08x",
					on, len(p), s, got, chained, want)
			}
		}
	})
}

var benchSizes = []struct {
	name string
	n    int
}{{"4K", 4 << 10}, {"64K", 64 << 10}, {"256K", 256 << 10}, {"4M", 4 << 20}}

// BenchmarkChecksum compares this package with hash/crc32 at each size:
//
//	go test -run '^$' -bench Checksum ./internal/crc32c
func BenchmarkChecksum(b *testing.B) {
	for _, s := range benchSizes {
		p := randBytes(rand.New(rand.NewPCG(9, 10)), s.n)
		b.Run(s.name+"/crc32c", func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				Checksum(p)
			}
		})
		b.Run(s.name+"/hash_crc32", func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				crc32.Checksum(p, refTable)
			}
		})
	}
}

// BenchmarkShort measures the sizes around vectorMin, where the vector path
// starts to pay.
func BenchmarkShort(b *testing.B) {
	for _, n := range []int{512, 768, 1024, 1536, 2048} {
		p := randBytes(rand.New(rand.NewPCG(11, 12)), n)
		b.Run(fmt.Sprintf("%d/crc32c", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				Checksum(p)
			}
		})
		b.Run(fmt.Sprintf("%d/hash_crc32", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Checksum(p, refTable)
			}
		})
	}
}
