//go:build linux

package tiers

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ssdBenchRing is how many pages a write benchmark keeps live: it frees the
// oldest to make room, so slots are reused as under a cache's churn.
const ssdBenchRing = 32

var ssdBenchSizes = []struct {
	name string
	size int64
}{{"256KiB", 256 * kib}, {"2MiB", 2 * mib}}

// newBenchSSD returns a recovered tier in b.TempDir() holding ring pages of
// size bytes (per goroutine, for par goroutines) in one file per class.
func newBenchSSD(b *testing.B, mode SyncMode, size int64, pages int) *SSD {
	capacity := ssdFileLength(classSize(classIndex(size)), int32(pages))
	s, err := NewSSD(SSDConfig{Dir: b.TempDir(), Capacity: capacity, FileSize: capacity, Sync: mode})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Recover(func(Extent, PageMeta) error { return nil }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// ssdBenchPage returns size random bytes and their meta.
func ssdBenchPage(size int64) ([]byte, PageMeta) {
	p := make([]byte, size)
	rand.NewChaCha8([32]byte{1}).Read(p)
	return p, ssdMetaFor([32]byte{1}, p, ssdAlgCRC32C, 0)
}

// BenchmarkSSDWriteSeal measures Alloc+WriteAt+Seal of one page per op in
// each sync mode, next to the raw file system doing the same bytes in the
// same directory: "raw=pwrite+fdatasync" writes each page at the next of
// ssdBenchRing offsets of a preallocated file and fdatasyncs it (what
// every-page and batch compare with), "raw=pwrite" only writes (what none
// compares with); the parallel runs have 8 goroutines do the same at once.
// Freeing the pages runs outside the timer, a ring at a time, except in
// the parallel runs. Compare MB/s:
//
//	go test ./tiers/ -run '^$' -bench SSDWriteSeal -count 5
//
// Medians of 5 on a 2-vCPU VM, ext4 on a virtio disk whose flush costs
// 1-2 ms (runs vary by up to 2x), as a fraction of the raw figure:
//
//	                        256 KiB   2 MiB
//	every-page / raw+sync     0.26     0.42
//	batch / raw+sync          0.21     0.41   (one writer: no batching)
//	none / raw write          0.89     0.93
//	every-page, 8 writers     0.40     0.74   (over raw+sync, 8 writers)
//	batch, 8 writers          0.59     0.62   (likewise)
//
// every-page pays two flushes per Seal where raw pays one, so the sync
// modes cost flush latency, not bandwidth: on a drive whose flush is cheap
// (power-loss-protected NVMe) the ratios approach none's.
func BenchmarkSSDWriteSeal(b *testing.B) {
	for _, sz := range ssdBenchSizes {
		for _, raw := range []bool{true, false} {
			name := "raw=pwrite+fdatasync"
			if !raw {
				name = "raw=pwrite"
			}
			b.Run(fmt.Sprintf("size=%s/%s", sz.name, name), func(b *testing.B) { benchRawWrite(b, sz.size, raw) })
		}
		for _, mode := range []SyncMode{SyncEveryPage, SyncBatch, SyncNone} {
			b.Run(fmt.Sprintf("size=%s/sync=%s", sz.name, mode), func(b *testing.B) {
				s := newBenchSSD(b, mode, sz.size, ssdBenchRing)
				p, m := ssdBenchPage(sz.size)
				b.SetBytes(sz.size)
				b.ReportAllocs()
				var ring [ssdBenchRing]Extent
				for i := 0; b.Loop(); i++ {
					if i%len(ring) == 0 && i > 0 {
						// Free the lap's pages off the clock, a lap at a time
						// (StopTimer reads the memory stats: costly per op).
						b.StopTimer()
						for _, r := range ring {
							s.Free(r)
						}
						b.StartTimer()
					}
					ring[i%len(ring)] = benchPut(b, s, p, m)
				}
			})
		}
		b.Run(fmt.Sprintf("size=%s/raw=pwrite+fdatasync/parallel=8", sz.name), func(b *testing.B) {
			f := benchRawFile(b, sz.size*ssdBenchRing)
			p, _ := ssdBenchPage(sz.size)
			var slot atomic.Int64
			b.SetBytes(sz.size)
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := f.WriteAt(p, (slot.Add(1)%ssdBenchRing)*sz.size); err != nil {
						b.Error(err)
						return
					}
					if err := unix.Fdatasync(int(f.Fd())); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		for _, mode := range []SyncMode{SyncEveryPage, SyncBatch} {
			b.Run(fmt.Sprintf("size=%s/sync=%s/parallel=8", sz.name, mode), func(b *testing.B) {
				const perG = 4
				s := newBenchSSD(b, mode, sz.size, 8*perG*2)
				p, m := ssdBenchPage(sz.size)
				b.SetBytes(sz.size)
				b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					var ring [perG]Extent
					for i := 0; pb.Next(); i++ {
						if r := &ring[i%len(ring)]; r.Gen != 0 {
							s.Free(*r)
						}
						ring[i%len(ring)] = benchPut(b, s, p, m)
					}
				})
			})
		}
	}
}

func benchPut(b *testing.B, s *SSD, p []byte, m PageMeta) Extent {
	ext, err := sealPage(s, p, m)
	if err != nil {
		b.Fatal(err)
	}
	return ext
}

// sealPage writes p into a new extent of s and seals it with m.
func sealPage(s *SSD, p []byte, m PageMeta) (Extent, error) {
	ext, err := s.Alloc(int64(len(p)))
	if err == nil {
		err = s.WriteAt(ext, p, 0)
	}
	if err == nil {
		err = s.Seal(ext, m)
	}
	return ext, err
}

// benchRawWrite writes size-byte pages round a preallocated file of
// ssdBenchRing pages, with an fdatasync after each if sync.
func benchRawWrite(b *testing.B, size int64, sync bool) {
	f := benchRawFile(b, size*ssdBenchRing)
	p, _ := ssdBenchPage(size)
	b.SetBytes(size)
	for i := 0; b.Loop(); i++ {
		if _, err := f.WriteAt(p, int64(i%ssdBenchRing)*size); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchRawFile(b *testing.B, length int64) *os.File {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if err := unix.Fallocate(int(f.Fd()), 0, 0, length); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkSSDRead measures ReadAt of a sealed page against pread of the
// same bytes from a plain file in the same directory. "warm" reads from the
// page cache (the pages were just written); "cold" drops each page from the
// cache first (posix_fadvise DONTNEED, in both), so the disk serves it.
//
//	go test ./tiers/ -run '^$' -bench SSDRead -count 5
//
// Medians on the VM above, SSD tier over raw: warm 1.03 (256 KiB) and 0.68
// (2 MiB, memory-bandwidth noise), cold 1.11 and 1.16: a read is one pread
// and two lock-protected generation checks.
func BenchmarkSSDRead(b *testing.B) {
	for _, sz := range ssdBenchSizes {
		for _, cold := range []bool{false, true} {
			temp := "warm"
			if cold {
				temp = "cold"
			}
			b.Run(fmt.Sprintf("size=%s/%s/raw", sz.name, temp), func(b *testing.B) {
				f := benchRawFile(b, sz.size*ssdBenchRing)
				p, _ := ssdBenchPage(sz.size)
				for i := range ssdBenchRing {
					f.WriteAt(p, int64(i)*sz.size)
				}
				unix.Fdatasync(int(f.Fd()))
				b.SetBytes(sz.size)
				for i := 0; b.Loop(); i++ {
					off := int64(i%ssdBenchRing) * sz.size
					if cold {
						unix.Fadvise(int(f.Fd()), off, sz.size, unix.FADV_DONTNEED)
					}
					if _, err := f.ReadAt(p, off); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("size=%s/%s/ssd", sz.name, temp), func(b *testing.B) {
				s := newBenchSSD(b, SyncNone, sz.size, ssdBenchRing)
				p, m := ssdBenchPage(sz.size)
				var ring [ssdBenchRing]Extent
				for i := range ring {
					ring[i] = benchPut(b, s, p, m)
				}
				s.files[0].f.Sync()
				dn := s.files[0].f.(ssdDontNeeder)
				b.SetBytes(sz.size)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					ext := ring[i%ssdBenchRing]
					if cold {
						dn.dontNeed(ext.Off&(ssdMaxFileLen-1), sz.size)
					}
					if err := s.ReadAt(ext, p, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// ssdFillForRecovery writes pages pages of size bytes (under SyncNone, four
// writers, payloads a shared random buffer stamped with the page number)
// into a new tier in dir and closes it.
func ssdFillForRecovery(tb testing.TB, dir string, pages int, size int64) SSDConfig {
	slot := classSize(classIndex(size))
	cfg := SSDConfig{Dir: dir, Capacity: int64(pages)*(slot+ssdSlotHeaderSize) + 64*mib, Sync: SyncNone}
	s, err := NewSSD(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := s.Recover(func(Extent, PageMeta) error { return nil }); err != nil {
		tb.Fatal(err)
	}
	base, _ := ssdBenchPage(size)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			p := append([]byte(nil), base...)
			for i := next.Add(1) - 1; i < int64(pages); i = next.Add(1) - 1 {
				copy(p, strconv.AppendInt(p[:0:0], i, 10))
				var sum [32]byte
				m := PageMeta{Key: ssdKey(int(i)), Len: size, ChecksumAlg: ssdAlgCRC32C,
					Checksum: slices.Clone(ssdChecksum(sum[:], ssdAlgCRC32C, p))}
				if _, err := sealPage(s, p, m); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// ssdDropCache drops dir's slot files from the page cache.
func ssdDropCache(tb testing.TB, dir string) {
	for _, path := range ssdFiles(tb, dir) {
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}

// ssdTimeRecovery opens cfg's directory, recovers it and returns how long
// that took.
func ssdTimeRecovery(tb testing.TB, cfg SSDConfig, want int) time.Duration {
	start := time.Now()
	s, err := NewSSD(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := s.Recover(func(Extent, PageMeta) error { return nil })
	took := time.Since(start)
	if err != nil || st.Recovered != want || st.Dropped != 0 {
		tb.Fatalf("Recover: %+v, %v; want %d pages", st, err, want)
	}
	s.Close()
	return took
}

// ssdTimeRead reads dir's slot files sequentially, 8 MiB a read, as cat
// does, and returns how long it took: the disk's rate for the same bytes.
func ssdTimeRead(tb testing.TB, dir string) time.Duration {
	start := time.Now()
	buf := make([]byte, 8<<20)
	for _, path := range ssdFiles(tb, dir) {
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		for off := int64(0); ; off += int64(len(buf)) {
			if n, _ := f.ReadAt(buf, off); n < len(buf) {
				break
			}
		}
		f.Close()
	}
	return time.Since(start)
}

// TestSSDRecoveryTime measures recovery (open, read every header, read and
// verify every payload) from a cold page cache, and a plain sequential
// read of the same files for comparison. By default a
// small case that keeps the test fast; set STRATA_SSD_RECOVERY to a list of
// PAGESxSIZE for the real figures, e.g.
//
//	STRATA_SSD_RECOVERY=100000x65536,100000x16384,10000x262144 \
//	    go test ./tiers/ -run TestSSDRecoveryTime -v -timeout 30m
func TestSSDRecoveryTime(t *testing.T) {
	cases := os.Getenv("STRATA_SSD_RECOVERY")
	if cases == "" {
		cases = "500x65536"
	}
	for c := range strings.SplitSeq(cases, ",") {
		var pages int
		var size int64
		if _, err := fmt.Sscanf(c, "%dx%d", &pages, &size); err != nil {
			t.Fatalf("STRATA_SSD_RECOVERY entry %q: want PAGESxSIZE", c)
		}
		dir := t.TempDir()
		start := time.Now()
		cfg := ssdFillForRecovery(t, dir, pages, size)
		fill := time.Since(start)
		ssdDropCache(t, dir)
		took := ssdTimeRecovery(t, cfg, pages)
		ssdDropCache(t, dir)
		raw := ssdTimeRead(t, dir)
		gib := float64(int64(pages)*size) / (1 << 30)
		t.Logf("%d pages x %d bytes (%.2f GiB, %d files): filled in %v; cold recovery %v: %.2f GiB/s, %.0f pages/s; "+
			"reading the files sequentially (cat) %v: recovery takes %.2fx",
			pages, size, gib, len(ssdFiles(t, dir)), fill.Round(time.Millisecond),
			took.Round(time.Millisecond), gib/took.Seconds(), float64(pages)/took.Seconds(),
			raw.Round(time.Millisecond), took.Seconds()/raw.Seconds())
		os.RemoveAll(dir)
	}
}

// BenchmarkSSDRecover measures a cold recovery of N 64 KiB pages.
//
//	go test ./tiers/ -run '^$' -bench SSDRecover -benchtime 3x
func BenchmarkSSDRecover(b *testing.B) {
	for _, pages := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pages=%d/size=64KiB", pages), func(b *testing.B) {
			cfg := ssdFillForRecovery(b, b.TempDir(), pages, 64*kib)
			b.SetBytes(int64(pages) * 64 * kib)
			for b.Loop() {
				b.StopTimer()
				ssdDropCache(b, cfg.Dir)
				b.StartTimer()
				ssdTimeRecovery(b, cfg, pages)
			}
			b.ReportMetric(float64(pages)*float64(b.N)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}
