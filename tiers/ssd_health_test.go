//go:build linux

package tiers

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testlog"
)

// TestSSDDiskFull: with background I/O, a file system that fills up puts
// the tier in the disk-full fault (logged once), its capacity shrinks to
// what its files hold, Alloc answers ErrFull without retrying fallocate
// more than once a second, and the fault ends, logged, once a file can be
// created again.
func TestSSDDiskFull(t *testing.T) {
	var logs testlog.Buffer
	fs := &ssdFaultFS{FS: OSFS()}
	s, _, _ := openTestSSD(t, SSDConfig{Capacity: 4 * mib, FileSize: mib, FS: fs, Background: true, Logger: logs.Logger()})
	// One file's worth of 64 KiB pages: 15 slots (one block of headers).
	var fallocs atomic.Int64
	full := atomic.Bool{}
	fs.set(func(op, _ string, _ int64, _ int) error {
		if op == "fallocate" {
			fallocs.Add(1)
			if full.Load() {
				return syscall.ENOSPC
			}
		}
		return nil
	})
	ssdPut(t, s, ssdKey(0), 64<<10, ssdAlgCRC32C, true) // the first file, made by the worker
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "the worker idle", func() bool {
		s.classes[classIndex(64<<10)].mu.Lock()
		defer s.classes[classIndex(64<<10)].mu.Unlock()
		return !s.classes[classIndex(64<<10)].growing
	})
	full.Store(true)
	before := fallocs.Load()
	var n, fullErrs int
	began := time.Now()
	for i := 1; i < 200; i++ {
		ext, err := s.Alloc(64 << 10)
		if err == nil {
			n++
			_ = ext
			continue
		}
		if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Alloc %d on a full disk: %v, want ErrFull wrapping ENOSPC", i, err)
		}
		fullErrs++
	}
	took := time.Since(began)
	tries := fallocs.Load() - before
	t.Logf("full disk: %d allocations served from the file's slots, %d ErrFull, %d fallocate attempts, in %v", n, fullErrs, tries, took)
	if st := s.Fault(); st.Fault != FaultFull || !errors.Is(st.Err, syscall.ENOSPC) {
		t.Fatalf("Fault %+v, want disk-full with ENOSPC", st)
	}
	// Each growth attempt tries a whole file, then halves it down to one
	// slot (a file system with less room holds a smaller file).
	perGrow := int64(1)
	for b := s.fileSize; b/2 >= ssdFileLength(classSize(classIndex(64<<10)), 1); b /= 2 {
		perGrow++
	}
	if maxTries := (2 + int64(took/ssdGrowRetry)) * perGrow; tries > maxTries {
		t.Fatalf("%d fallocate attempts in %v on a full disk, want at most %d", tries, took, maxTries)
	}
	cs := s.ClassStats()
	if st := s.Stats(); len(cs) != 1 || st.Capacity != cs[0].FileBytes || st.Capacity >= 4*mib {
		t.Fatalf("Stats %+v, ClassStats %+v: capacity should be what the files hold", st, cs)
	}
	if got := strings.Count(logs.String(), "file system full"); got != 1 {
		t.Fatalf("%d log lines about the full file system, want 1:\n%s", got, logs.String())
	}
	full.Store(false) // allocations fail until ssdGrowRetry has passed and the worker has made a file
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "a file created after the disk has room", func() bool {
		_, err := s.Alloc(64 << 10)
		return err == nil
	})
	if st := s.Fault(); st.Fault != FaultNone {
		t.Fatalf("Fault %+v after the disk has room again", st)
	}
	if st := s.Stats(); st.Capacity != 4*mib {
		t.Fatalf("capacity %d after the fault, want %d", st.Capacity, 4*mib)
	}
	if !strings.Contains(logs.String(), "writes succeed again") {
		t.Fatalf("no log line for the end of the fault:\n%s", logs.String())
	}
}

// TestSSDReadOnly: a file system gone read-only puts the tier in the
// read-only fault: Alloc fails with ErrFailing (not ErrFull: freeing pages
// makes no room), capacity is what is used, pages on disk stay readable.
func TestSSDReadOnly(t *testing.T) {
	fs := &ssdFaultFS{FS: OSFS()}
	s, _, _ := openTestSSD(t, SSDConfig{Capacity: 4 * mib, FileSize: mib, FS: fs, Background: true})
	ext, _ := ssdPut(t, s, ssdKey(1), 4096, ssdAlgCRC32C, true)
	fs.set(func(op, _ string, _ int64, _ int) error {
		if op == "write" || op == "sync" || op == "fallocate" {
			return syscall.EROFS
		}
		return nil
	})
	if _, err := s.Alloc(4096); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("Alloc on a read-only file system: %v", err)
	}
	if st := s.Fault(); st.Fault != FaultReadOnly {
		t.Fatalf("Fault %+v, want read-only", st)
	}
	if _, err := s.Alloc(4096); !errors.Is(err, ErrFailing) || errors.Is(err, ErrFull) {
		t.Fatalf("Alloc while read-only: %v, want ErrFailing and not ErrFull", err)
	}
	if st := s.Stats(); st.Capacity != st.Used {
		t.Fatalf("Stats %+v: capacity should be what is used", st)
	}
	p := make([]byte, 4096)
	if err := s.ReadAt(ext, p, 0); err != nil || string(p) != string(ssdPayload(ssdKey(1), 4096)) {
		t.Fatalf("reading a page while read-only: %v", err)
	}
	fs.set(nil)
}

// TestSSDBackgroundFree: with background I/O, Free of a sealed page under
// SyncEveryPage returns at once and the worker clears and syncs the
// header before the slot is reused; a freed page never comes back after
// a clean close, and one that was kept does. The frees may still be
// queued when the last Put returns: the check before the reopen waits
// for the worker's round (waitSSDFrees), as a slot is "freeing" until then.
func TestSSDBackgroundFree(t *testing.T) {
	cfg := SSDConfig{Capacity: 4 * mib, FileSize: mib, Background: true}
	s, _, _ := openTestSSD(t, cfg)
	var exts []Extent
	for i := range 8 {
		ext, _ := ssdPut(t, s, ssdKey(i), 4096, ssdAlgCRC32C, true)
		exts = append(exts, ext)
	}
	for _, ext := range exts[:4] {
		s.Free(ext)
	}
	// Allocations go on (the freed slots come back once synced).
	for i := 8; i < 12; i++ {
		ssdPut(t, s, ssdKey(i), 4096, ssdAlgCRC32C, true)
	}
	waitSSDFrees(t, s)
	s, got, _ := reopenSSD(t, s, cfg)
	for i := range 12 {
		_, ok := got[ssdKey(i)]
		if want := i >= 4; ok != want {
			t.Fatalf("page %d recovered %v, want %v", i, ok, want)
		}
	}
	mustCheckSSD(t, s)
}
