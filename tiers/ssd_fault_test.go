//go:build linux

package tiers

import (
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stratakv/strata/internal/testing/testlog"
)

// ssdFaultFS is an FS over the real one that fails the operations its fault
// function picks: op is "open", "read", "write", "sync" or "fallocate".
// A failed write writes the first half of its bytes first, as a disk that
// fills up midway does.
type ssdFaultFS struct {
	FS
	mu    sync.Mutex
	fault func(op, name string, off int64, n int) error // guarded by mu
}

func (fs *ssdFaultFS) set(fault func(op, name string, off int64, n int) error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.fault = fault
}

func (fs *ssdFaultFS) inject(op, name string, off int64, n int) error {
	fs.mu.Lock()
	fault := fs.fault
	fs.mu.Unlock()
	if fault == nil {
		return nil
	}
	return fault(op, name, off, n)
}

func (fs *ssdFaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := fs.inject("open", name, 0, 0); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &ssdFaultFile{File: f, fs: fs, name: name}, nil
}

type ssdFaultFile struct {
	File
	fs   *ssdFaultFS
	name string
}

func (f *ssdFaultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.inject("read", f.name, off, len(p)); err != nil {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: err}
	}
	return f.File.ReadAt(p, off)
}

func (f *ssdFaultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.inject("write", f.name, off, len(p)); err != nil {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *ssdFaultFile) Sync() error {
	if err := f.fs.inject("sync", f.name, 0, 0); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.name, Err: err}
	}
	return f.File.Sync()
}

func (f *ssdFaultFile) Fallocate(off, n int64) error {
	if err := f.fs.inject("fallocate", f.name, off, int(n)); err != nil {
		return err
	}
	return f.File.Fallocate(off, n)
}

// isHeaderWrite says whether a write is a slot header's.
func isHeaderWrite(off int64, n int) bool { return n == ssdSlotHeaderSize && off >= ssdFileHeaderSize }

// TestSSDWriteFaults injects ENOSPC and EIO into payload writes, header
// writes and syncs, in each sync mode, and checks that each failure is a
// clear error wrapping its cause, that the extent can be freed, that the
// failed page is never recovered and that pages sealed before are intact.
func TestSSDWriteFaults(t *testing.T) {
	type fault struct {
		name  string
		fault func() func(op, name string, off int64, n int) error // a fresh one per run
		// inWrite says WriteAt fails (else Seal does).
		inWrite bool
		cause   error
		modes   []SyncMode
	}
	all := []SyncMode{SyncEveryPage, SyncBatch, SyncNone}
	for _, tc := range []fault{
		{"payload ENOSPC", func() func(string, string, int64, int) error {
			return func(op, _ string, off int64, n int) error {
				if op == "write" && !isHeaderWrite(off, n) {
					return syscall.ENOSPC
				}
				return nil
			}
		}, true, syscall.ENOSPC, all},
		{"header ENOSPC", func() func(string, string, int64, int) error {
			return func(op, _ string, off int64, n int) error {
				if op == "write" && isHeaderWrite(off, n) {
					return syscall.ENOSPC
				}
				return nil
			}
		}, false, syscall.ENOSPC, all},
		{"first sync EIO", func() func(string, string, int64, int) error { return ssdFailNth("sync", 1, syscall.EIO) },
			false, syscall.EIO, []SyncMode{SyncEveryPage, SyncBatch}},
		{"second sync EIO", func() func(string, string, int64, int) error { return ssdFailNth("sync", 2, syscall.EIO) },
			false, syscall.EIO, []SyncMode{SyncEveryPage, SyncBatch}},
	} {
		for _, mode := range tc.modes {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				fs := &ssdFaultFS{FS: OSFS()}
				cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, Sync: mode, FS: fs}
				s, _, _ := openTestSSD(t, cfg)
				ssdSealMany(t, s, 4, 30_000)
				ext, err := s.Alloc(30_000)
				if err != nil {
					t.Fatal(err)
				}
				key := ssdKey(99)
				p := ssdPayload(key, 30_000)
				fs.set(tc.fault())
				err = s.WriteAt(ext, p, 0)
				if err == nil {
					err = s.Seal(ext, ssdMetaFor(key, p, ssdAlgCRC32C, 0))
				}
				fs.set(nil)
				if !errors.Is(err, tc.cause) || (strings.Contains(err.Error(), "sealing") == tc.inWrite) {
					t.Fatalf("got %v, want an error wrapping %v from %s", err, tc.cause, map[bool]string{true: "WriteAt", false: "Seal"}[tc.inWrite])
				}
				if st := s.Stats(); st.Extents != 5 {
					t.Fatalf("Stats after the failure: %+v", st)
				}
				s.Free(ext) // free-able
				mustCheckSSD(t, s)
				s, got, st := reopenSSD(t, s, SSDConfig{Capacity: cfg.Capacity, FileSize: cfg.FileSize, Sync: mode})
				if len(got) != 4 || st.Dropped != 0 {
					t.Fatalf("after reopening: %d pages, %+v", len(got), st)
				}
				if _, ok := got[key]; ok {
					t.Fatal("the failed page came back")
				}
				ssdPut(t, s, key, 30_000, ssdAlgCRC32C, true) // the tier works
			})
		}
	}
}

// ssdFailNth returns a fault failing the nth op (1-based) with err.
func ssdFailNth(op string, nth int, err error) func(string, string, int64, int) error {
	var mu sync.Mutex
	seen := 0
	return func(o, _ string, _ int64, _ int) error {
		if o != op {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		if seen == nth {
			return err
		}
		return nil
	}
}

// TestSSDSealFailureNotRecovered fails the sync after the header write:
// the header with the commit marker is in the page cache when Seal fails,
// so Seal must take it back, and the page must not be recovered even if
// the caller never frees it.
func TestSSDSealFailureNotRecovered(t *testing.T) {
	fs := &ssdFaultFS{FS: OSFS()}
	cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, FS: fs}
	s, _, _ := openTestSSD(t, cfg)
	ext, err := s.Alloc(10_000)
	if err != nil {
		t.Fatal(err)
	}
	key := ssdKey(5)
	p := ssdPayload(key, 10_000)
	if err := s.WriteAt(ext, p, 0); err != nil {
		t.Fatal(err)
	}
	fs.set(ssdFailNth("sync", 2, syscall.EIO))
	if err := s.Seal(ext, ssdMetaFor(key, p, ssdAlgCRC32C, 0)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Seal: %v", err)
	}
	fs.set(nil)
	if err := s.WriteAt(ext, p, 0); err != nil { // still writable: not sealed
		t.Fatalf("WriteAt after a failed Seal: %v", err)
	}
	_, got, st := reopenSSD(t, s, SSDConfig{Capacity: cfg.Capacity, FileSize: cfg.FileSize})
	if len(got) != 0 || st.Torn != 1 {
		t.Fatalf("after a failed Seal: %d pages, %+v", len(got), st)
	}
}

// TestSSDAllocFaults: a full disk while creating a slot file, fallocate
// unsupported, and a failed header write in Alloc.
func TestSSDAllocFaults(t *testing.T) {
	fs := &ssdFaultFS{FS: OSFS()}
	cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, FS: fs}
	s, _, _ := openTestSSD(t, cfg)

	fs.set(func(op, _ string, _ int64, _ int) error {
		if op == "fallocate" {
			return syscall.ENOSPC
		}
		return nil
	})
	_, err := s.Alloc(4096)
	if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Alloc on a full disk: %v, want ErrFull and ENOSPC", err)
	}
	if files, _ := os.ReadDir(s.dir); len(files) != 0 {
		t.Fatalf("files left by a failed create: %v", files)
	}

	fs.set(func(op, _ string, _ int64, _ int) error {
		if op == "fallocate" {
			return errors.ErrUnsupported
		}
		return nil
	})
	ssdPut(t, s, ssdKey(1), 4096, ssdAlgCRC32C, true) // falls back to ftruncate
	if cs := s.ClassStats(); len(cs) != 1 || cs[0].FileBytes != mib {
		t.Fatalf("ClassStats %+v", cs)
	}

	fs.set(func(op, _ string, off int64, n int) error {
		if op == "write" && isHeaderWrite(off, n) {
			return syscall.EIO
		}
		return nil
	})
	if _, err := s.Alloc(4096); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Alloc with a failing header write: %v", err)
	}
	fs.set(nil)
	if st := s.Stats(); st.Extents != 1 {
		t.Fatalf("Stats %+v", st)
	}
	mustCheckSSD(t, s)
	_, got, _ := reopenSSD(t, s, SSDConfig{Capacity: cfg.Capacity, FileSize: cfg.FileSize})
	if len(got) != 1 {
		t.Fatalf("%d pages", len(got))
	}
}

// TestSSDRecoverReadError: a payload that cannot be read is dropped and
// logged; the rest, read together with it at first, is recovered.
func TestSSDRecoverReadError(t *testing.T) {
	var log testlog.Buffer
	fs := &ssdFaultFS{FS: OSFS()}
	cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, Sync: SyncNone, FS: fs, Logger: log.Logger()}
	s, _, _ := openTestSSD(t, cfg)
	exts := ssdSealMany(t, s, 5, 8192)
	_, payload, _, _ := ssdWhere(t, s, exts[2])
	s.Close()
	fs.set(func(op, _ string, off int64, n int) error {
		if op == "read" && off <= payload && payload < off+int64(n) { // a bad sector
			return syscall.EIO
		}
		return nil
	})
	cfg.Dir = s.dir
	s, err := NewSSD(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Recover(func(Extent, PageMeta) error { return nil })
	if err != nil || st.Recovered != 4 || st.Dropped != 1 {
		t.Fatalf("Recover: %+v, %v", st, err)
	}
	if !strings.Contains(log.String(), "reading the payload") {
		t.Fatalf("not logged:\n%s", log.String())
	}
}

// TestSSDBadSlotQuarantined: a payload write that fails with EIO (a bad
// sector) quarantines its slot when freed, so the next Alloc gets another
// slot; a full disk (ENOSPC) does not.
func TestSSDBadSlotQuarantined(t *testing.T) {
	var log testlog.Buffer
	fs := &ssdFaultFS{FS: OSFS()}
	cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, Sync: SyncNone, FS: fs, Logger: log.Logger()}
	s, _, _ := openTestSSD(t, cfg)
	for _, tc := range []struct {
		cause error
		reuse bool
	}{{syscall.ENOSPC, true}, {syscall.EIO, false}} {
		ext, err := s.Alloc(8192)
		if err != nil {
			t.Fatal(err)
		}
		_, bad, _, _ := ssdWhere(t, s, ext)
		fs.set(func(op, _ string, off int64, _ int) error {
			if op == "write" && off == bad {
				return tc.cause
			}
			return nil
		})
		if err := s.WriteAt(ext, make([]byte, 8192), 0); !errors.Is(err, tc.cause) {
			t.Fatalf("WriteAt: %v", err)
		}
		s.Free(ext)
		fs.set(nil)
		next, _ := ssdPut(t, s, ssdKey(1), 8192, ssdAlgCRC32C, true)
		if (next.Off == ext.Off) != tc.reuse {
			t.Fatalf("after %v: next extent at %#x, failed one at %#x; want reuse %v", tc.cause, next.Off, ext.Off, tc.reuse)
		}
		s.Free(next)
		mustCheckSSD(t, s)
	}
	if !strings.Contains(log.String(), "quarantined") {
		t.Fatalf("quarantine not logged:\n%s", log.String())
	}
}
