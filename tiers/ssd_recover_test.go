//go:build linux

package tiers

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/corrupt"
	"github.com/stratakv/strata/internal/testing/testlog"
)

// ssdWhere returns the file and the payload and header offsets of ext.
func ssdWhere(t testing.TB, s *SSD, ext Extent) (path string, payload, header int64, slot int32) {
	t.Helper()
	cl, err := s.classOf(ext)
	if err != nil {
		t.Fatal(err)
	}
	cl.mu.Lock()
	f, slot, err := cl.locateLocked(ext)
	cl.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return f.path, f.payloadOff(slot), f.headerOff(slot), slot
}

// ssdSealMany seals pages 0..n-1 of size bytes and returns their extents.
func ssdSealMany(t testing.TB, s *SSD, n int, size int64) []Extent {
	exts := make([]Extent, n)
	for i := range exts {
		exts[i], _ = ssdPut(t, s, ssdKey(i), size, uint8(ssdAlgCRC32C+i%2), true)
	}
	return exts
}

// TestSSDCorruption flips one byte of a sealed page, in its payload or in
// its header, and checks that the page alone is dropped, counted and
// logged with its file and slot, that the rest comes back, and that the
// dropped slot is cleared (not dropped again) and reusable.
func TestSSDCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		at     func(payload, header int64) int64
		reason string
	}{
		{"payload first byte", func(p, h int64) int64 { return p }, "payload checksum mismatch"},
		{"payload last byte", func(p, h int64) int64 { return p + 20_000 - 1 }, "payload checksum mismatch"},
		{"header magic", func(p, h int64) int64 { return h }, "bad magic"},
		{"header key", func(p, h int64) int64 { return h + 100 }, "header CRC mismatch"},
		{"header length", func(p, h int64) int64 { return h + 32 }, "header CRC mismatch"},
		{"header state", func(p, h int64) int64 { return h + 8 }, "header CRC mismatch"},
		{"header CRC", func(p, h int64) int64 { return h + 253 }, "header CRC mismatch"},
		{"header version", func(p, h int64) int64 { return h + 5 }, ""}, // unknown version: free
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log testlog.Buffer
			cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, Sync: SyncNone, Logger: log.Logger()}
			s, _, _ := openTestSSD(t, cfg)
			exts := ssdSealMany(t, s, 10, 20_000)
			path, payload, header, slot := ssdWhere(t, s, exts[3])
			s.Close()
			corrupt.Flip(t, path, tc.at(payload, header), 0xff)
			cfg.Dir = s.dir
			s, got, st := openTestSSD(t, cfg)
			wantDropped := 1
			if tc.reason == "" {
				wantDropped = 0
			}
			if st.Recovered != 9 || st.Dropped != wantDropped || len(got) != 9 {
				t.Fatalf("RecoveryStats %+v, want 9 recovered, %d dropped", st, wantDropped)
			}
			if _, ok := got[ssdKey(3)]; ok {
				t.Fatal("the corrupted page came back")
			}
			line := fmt.Sprintf("file=%s slot=%d", path, slot)
			if tc.reason != "" && (!strings.Contains(log.String(), line) || !strings.Contains(log.String(), tc.reason)) {
				t.Fatalf("log lacks %q and %q:\n%s", line, tc.reason, log.String())
			}
			// The slot was cleared: the next restart is clean, and it
			// serves a new page.
			s, got, st = reopenSSD(t, s, cfg)
			if st.Dropped != 0 || len(got) != 9 {
				t.Fatalf("second reopen: %+v", st)
			}
			ext, _ := ssdPut(t, s, ssdKey(3), 20_000, ssdAlgCRC32C, true)
			if ext.Off != exts[3].Off {
				t.Fatalf("new page at %#x, want the cleared slot %#x", ext.Off, exts[3].Off)
			}
			_, got, _ = reopenSSD(t, s, cfg)
			if len(got) != 10 {
				t.Fatalf("%d pages after reusing the slot", len(got))
			}
		})
	}
}

// TestSSDTruncated truncates a slot file inside a payload, inside the
// slot header region and inside the file header.
func TestSSDTruncated(t *testing.T) {
	for _, tc := range []struct {
		name             string
		cut              func(exts []Extent, s *SSD) int64
		recovered, drops int
		fileGone         bool
	}{
		{"mid payload", func(exts []Extent, s *SSD) int64 {
			_, p, _, _ := ssdWhere(t, s, exts[6])
			return p + 1000
		}, 6, 4, false},
		{"mid header region", func(exts []Extent, s *SSD) int64 {
			_, _, h, _ := ssdWhere(t, s, exts[3])
			return h + 10 // slot 3's header torn: dropped too
		}, 0, 4, false},
		{"file header", func([]Extent, *SSD) int64 { return 40 }, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log testlog.Buffer
			cfg := SSDConfig{Capacity: 2 * mib, FileSize: 2 * mib, Sync: SyncNone, Logger: log.Logger()}
			s, _, _ := openTestSSD(t, cfg)
			exts := ssdSealMany(t, s, 10, 64*kib)
			path, _, _, _ := ssdWhere(t, s, exts[0])
			cut := tc.cut(exts, s)
			s.Close()
			if err := os.Truncate(path, cut); err != nil {
				t.Fatal(err)
			}
			cfg.Dir = s.dir
			s, got, st := openTestSSD(t, cfg)
			if st.Recovered != tc.recovered || st.Dropped != tc.drops || len(got) != tc.recovered {
				t.Fatalf("RecoveryStats %+v, want %d recovered, %d dropped", st, tc.recovered, tc.drops)
			}
			for i := range tc.recovered {
				if _, ok := got[ssdKey(i)]; !ok {
					t.Fatalf("page %d before the cut lost", i)
				}
			}
			if tc.drops > 0 && !strings.Contains(log.String(), "truncated") {
				t.Fatalf("truncation not logged:\n%s", log.String())
			}
			files := ssdFiles(t, s.dir)
			if tc.fileGone != (len(files) == 0) {
				t.Fatalf("files after open: %v", files)
			}
			if !tc.fileGone {
				fi, _ := os.Stat(path)
				if fi.Size() <= cut {
					t.Fatalf("file not extended: %d bytes", fi.Size())
				}
			}
			// The tier is usable: it fills up to where it was.
			for i := len(got); i < 10; i++ {
				ssdPut(t, s, ssdKey(i), 64*kib, ssdAlgCRC32C, true)
			}
			_, got, st = reopenSSD(t, s, cfg)
			if len(got) != 10 || st.Dropped != 0 {
				t.Fatalf("after refilling: %d pages, %+v", len(got), st)
			}
		})
	}
}

// TestSSDCapacityChange restarts with a smaller capacity (the oldest files
// that fit are kept with their pages, the others removed) and then a larger
// one (everything kept, the tier grows again).
func TestSSDCapacityChange(t *testing.T) {
	var log testlog.Buffer
	// 64 KiB pages in 1 MiB files: 15 slots, 991,232 bytes a file; 4 MiB
	// holds 4 such files and one of 3 slots (204,800 bytes).
	cfg := SSDConfig{Capacity: 4 * mib, FileSize: mib, Sync: SyncNone, Logger: log.Logger()}
	s, _, _ := openTestSSD(t, cfg)
	fileOf := map[[32]byte]uint32{}
	for i := 0; ; i++ {
		ext, err := s.Alloc(64 * kib)
		if err != nil {
			break
		}
		s.Free(ext)
		ext, m := ssdPut(t, s, ssdKey(i), 64*kib, ssdAlgCRC32C, true)
		fileOf[m.Key] = uint32(ext.Off >> ssdOffShift)
	}
	if len(fileOf) != 63 || len(ssdFiles(t, s.dir)) != 5 {
		t.Fatalf("%d pages in %d files, want 63 in 5", len(fileOf), len(ssdFiles(t, s.dir)))
	}

	// 2 MiB: files 0 and 1 fit (1,982,464 bytes); 2 and 3 do not, nor
	// does 4 after them.
	small := cfg
	small.Capacity = 2 * mib
	s, got, st := reopenSSD(t, s, small)
	if st.Recovered != 30 || st.Dropped != 0 || len(got) != 30 {
		t.Fatalf("smaller capacity: %+v", st)
	}
	for key, id := range fileOf {
		if _, ok := got[key]; ok != (id <= 1) {
			t.Fatalf("page in file %d: recovered %v", id, ok)
		}
	}
	if files := ssdFiles(t, s.dir); len(files) != 2 {
		t.Fatalf("files after shrinking: %v", files)
	}
	if n := strings.Count(log.String(), "beyond Capacity"); n != 3 || !strings.Contains(log.String(), "sealed_pages=15") {
		t.Fatalf("%d removals logged:\n%s", n, log.String())
	}
	// What is left of the capacity (114,688 bytes) makes a 1-slot file.
	ssdPut(t, s, ssdKey(100), 64*kib, ssdAlgCRC32C, true)
	if _, err := s.Alloc(64 * kib); !errors.Is(err, ErrFull) {
		t.Fatalf("Alloc in a full tier: %v", err)
	}
	if st := s.Stats(); st.Extents != 31 {
		t.Fatalf("Stats %+v", st)
	}

	// 8 MiB, and 2 MiB files: everything is kept, the old files keep their
	// geometry, and the tier grows with files of the new size.
	large := cfg
	large.Capacity, large.FileSize = 8*mib, 2*mib
	s, got, st = reopenSSD(t, s, large)
	if st.Recovered != 31 || len(got) != 31 {
		t.Fatalf("larger capacity: %+v", st)
	}
	for i := range 40 {
		ssdPut(t, s, ssdKey(200+i), 64*kib, ssdAlgCRC32C, true)
	}
	// 2 files of 15 slots and 1 of 1 before; 9 more pages fill them, 31
	// more take two 2 MiB files of 31 slots.
	if cs := s.ClassStats(); len(cs) != 1 || cs[0].Files != 5 || cs[0].Slots != 15+15+1+31+31 {
		t.Fatalf("ClassStats after growing: %+v", cs)
	}
	_, got, _ = reopenSSD(t, s, large)
	if len(got) != 71 {
		t.Fatalf("%d pages after growing, want 71", len(got))
	}
}
