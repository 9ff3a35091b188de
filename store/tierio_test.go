package store

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// gatedFS holds every Fallocate until the gate opens, while armed: a slot
// file being created on a slow disk.
type gatedFS struct {
	tiers.FS
	armed   atomic.Bool
	entered chan struct{} // one token per held Fallocate
	gate    chan struct{} // closed to let them through
}

func (fs *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (tiers.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, fs: fs}, nil
}

type gatedFile struct {
	tiers.File
	fs *gatedFS
}

func (f *gatedFile) Fallocate(off, n int64) error {
	if f.fs.armed.Load() {
		select {
		case f.fs.entered <- struct{}{}:
		default:
		}
		<-f.fs.gate
	}
	return f.File.Fallocate(off, n)
}

// TestNoTierIOUnderIndexLock: while the SSD tier creates a slot file (its
// fallocate held until 100 lookups are done), lookups are answered at
// once: the store does not hold its index lock across tier I/O that makes
// room. A writer that needs the new file waits for it and then commits.
func TestNoTierIOUnderIndexLock(t *testing.T) {
	fs := &gatedFS{FS: tiers.OSFS(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	ssd, err := tiers.NewSSD(tiers.SSDConfig{Dir: t.TempDir(), Capacity: 8 << 20, FileSize: 64 << 10, FS: fs, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ssd.Close() })
	s := openStore(t, Config{Tiers: []tiers.Tier{ssd}}, testNS)
	if _, err := s.Recover(); err != nil {
		t.Fatal(err)
	}
	if st := put(t, s, key(0), pageData(0)); st != CommitCommitted {
		t.Fatalf("first put: %v", st)
	}
	fs.armed.Store(true)
	done := make(chan error, 1)
	const pages = 200 // a 64 KiB file holds 48 pages of 1 KiB: several new files
	go func() {
		for i := 1; i <= pages; i++ {
			res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: key(i), Size: pageSize}}, 0)
			if err == nil && res[0].Status != Reserved {
				err = res[0].Err
			}
			if err == nil {
				err = s.Publisher().Write(testNS.ID, res[0].WriteID, 0, pageData(i))
			}
			if err == nil {
				var st CommitStatus
				st, err = s.Publisher().Commit(testNS.ID, res[0].WriteID, pageSize, testNS.Checksum.Sum(pageData(i)))
				if err == nil && st != CommitCommitted {
					t.Errorf("page %d: %v", i, st)
				}
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	<-fs.entered // a slot file is being created, its fallocate held
	var slowest time.Duration
	for range 100 {
		began := time.Now()
		if _, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0), key(1)}, false, 0); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(began))
	}
	fs.armed.Store(false)
	close(fs.gate)
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	t.Logf("slowest of 100 lookups while a slot file's fallocate was held: %v", slowest)
	if slowest > 100*time.Millisecond {
		t.Fatalf("a lookup took %v while the tier created a file: the index lock was held across tier I/O", slowest)
	}
	res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(pages)}, false, 0)
	if err != nil || res.HitPrefix != 1 {
		t.Fatalf("last page after the file was made: %+v %v", res, err)
	}
}
