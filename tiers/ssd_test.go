//go:build linux

package tiers

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/panics"
	"github.com/stratakv/strata/internal/testing/testlog"
)

// ssdTestNS is the namespace of every test page.
var ssdTestNS = [32]byte{'t', 'e', 's', 't'}

// ssdKey returns test page i's key.
func ssdKey(i int) [32]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	return sha256.Sum256(b[:])
}

// ssdPayload returns the n bytes of the page named key: derived from the
// key, so that any reader can check a page byte for byte.
func ssdPayload(key [32]byte, n int64) []byte {
	p := make([]byte, n)
	rand.NewChaCha8(key).Read(p)
	return p
}

// ssdMetaFor returns the meta of a page with key and payload p.
func ssdMetaFor(key [32]byte, p []byte, alg uint8, depth uint32) PageMeta {
	var sum [32]byte
	m := PageMeta{
		Namespace:   ssdTestNS,
		Key:         key,
		Depth:       depth,
		Len:         int64(len(p)),
		ChecksumAlg: alg,
		Checksum:    slices.Clone(ssdChecksum(sum[:], alg, p)),
		Created:     time.Unix(1_700_000_000, int64(depth)).UTC(),
	}
	if depth > 0 {
		m.Parent, m.HasParent = ssdKey(int(depth)-1), true
	}
	return m
}

func ssdMetaEqual(a, b PageMeta) bool {
	return a.Namespace == b.Namespace && a.Key == b.Key && a.Parent == b.Parent &&
		a.HasParent == b.HasParent && a.Depth == b.Depth && a.Len == b.Len &&
		a.ChecksumAlg == b.ChecksumAlg && bytes.Equal(a.Checksum, b.Checksum) && a.Created.Equal(b.Created) &&
		a.Cost == b.Cost
}

// ssdRecovered is what a Recover handed back, by key.
type ssdRecovered map[[32]byte]ssdPage

type ssdPage struct {
	ext  Extent
	meta PageMeta
}

// openTestSSD opens cfg (a fresh t.TempDir() if cfg.Dir is empty),
// recovers it and returns the tier, which is checked and closed when the
// test ends, and what it recovered. Every recovered page is read back and
// checked against its key.
func openTestSSD(t testing.TB, cfg SSDConfig) (*SSD, ssdRecovered, RecoveryStats) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := NewSSD(cfg)
	if err != nil {
		t.Fatalf("NewSSD(%+v): %v", cfg, err)
	}
	checkAndCloseAtEnd(t, &s.closed, func() error { return checkSSD(s) }, s.Close)
	got := ssdRecovered{}
	st, err := s.Recover(func(ext Extent, m PageMeta) error {
		if _, dup := got[m.Key]; dup {
			return fmt.Errorf("key %x twice", m.Key[:4])
		}
		got[m.Key] = ssdPage{ext, m}
		return nil
	})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	for key, pg := range got {
		p := make([]byte, pg.ext.Len)
		if err := s.ReadAt(pg.ext, p, 0); err != nil {
			t.Fatalf("reading recovered page %x: %v", key[:4], err)
		}
		if !bytes.Equal(p, ssdPayload(key, pg.ext.Len)) {
			t.Fatalf("recovered page %x: bytes differ from what was written", key[:4])
		}
	}
	if err := checkSSD(s); err != nil {
		t.Fatalf("after Recover: %v", err)
	}
	return s, got, st
}

// reopenSSD closes s and opens its directory again with cfg (Dir set to
// s's).
func reopenSSD(t testing.TB, s *SSD, cfg SSDConfig) (*SSD, ssdRecovered, RecoveryStats) {
	t.Helper()
	if err := checkSSD(s); err != nil {
		t.Fatalf("before reopening: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cfg.Dir = s.dir
	return openTestSSD(t, cfg)
}

// waitSSDFrees waits until s's worker has finished every Free it queued
// (SSDConfig.Background): a queued Free returns before its slot is free
// again, so a consistency check, which wants a quiescent tier, must come
// after this. It waits on the worker's end-of-round signal and fails t
// after 10 s.
func waitSSDFrees(t testing.TB, s *SSD) {
	t.Helper()
	if s.worker == nil {
		t.Fatal("waitSSDFrees: the tier has no background worker")
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		// Take the signal before looking, so a round that ends in
		// between still wakes us.
		sig := s.worker.signal()
		pending := 0
		for cls := range s.classes {
			cl := &s.classes[cls]
			cl.mu.Lock()
			pending += cl.pendingFrees
			cl.mu.Unlock()
		}
		if pending == 0 {
			return
		}
		select {
		case <-sig:
		case <-timeout.C:
			t.Fatalf("%d queued frees not done within 10s", pending)
		}
	}
}

// ssdPut allocates, writes and (if seal) seals page key of n bytes.
func ssdPut(t testing.TB, s *SSD, key [32]byte, n int64, alg uint8, seal bool) (Extent, PageMeta) {
	t.Helper()
	ext, err := s.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	p := ssdPayload(key, n)
	// Two writes, to exercise offsets.
	if err := s.WriteAt(ext, p[:n/2], 0); err != nil {
		t.Fatalf("WriteAt: %v", err)
	}
	if err := s.WriteAt(ext, p[n/2:], n/2); err != nil {
		t.Fatalf("WriteAt: %v", err)
	}
	m := ssdMetaFor(key, p, alg, uint32(n%7))
	if seal {
		if err := s.Seal(ext, m); err != nil {
			t.Fatalf("Seal: %v", err)
		}
	}
	return ext, m
}

// checkSSD verifies the tier's internal invariants and its files' lengths.
// The tier must be quiescent (with a background worker: waitSSDFrees after
// the last Free); it takes the locks only to satisfy the race detector.
func checkSSD(s *SSD) error {
	s.poolMu.Lock()
	files := slices.Clone(s.files)
	fileBytes := s.fileBytes
	s.poolMu.Unlock()
	var sum, extents, used int64
	for i, f := range files {
		sum += f.length
		if i > 0 && files[i-1].id >= f.id {
			return fmt.Errorf("files out of id order: %d then %d", files[i-1].id, f.id)
		}
		st, err := f.f.Stat()
		if err != nil || st.Size() < f.length {
			return fmt.Errorf("%s: stat %v, %v; want at least %d bytes", f.path, st, err, f.length)
		}
	}
	if sum != fileBytes || sum > s.capacity {
		return fmt.Errorf("files take %d bytes, pool says %d, capacity %d", sum, fileBytes, s.capacity)
	}
	for cls := range s.classes {
		cl := &s.classes[cls]
		cl.mu.Lock()
		err := checkSSDClass(s, cls, cl)
		extents += cl.extents
		used += cl.extents * cl.size
		cl.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if st := s.Stats(); st.Extents != extents || st.Used != used {
		return fmt.Errorf("Stats %+v; classes hold %d extents, %d bytes", st, extents, used)
	}
	return nil
}

func checkSSDClass(s *SSD, cls int, cl *ssdClass) error {
	var live int64
	for i, f := range cl.files {
		if f.class != cls || f.slotSize != cl.size {
			return fmt.Errorf("%s in class %d (%d bytes)", f.path, cls, cl.size)
		}
		if i > 0 && cl.files[i-1].id >= f.id {
			return fmt.Errorf("class %d: files out of id order", cl.size)
		}
		onFree := make([]bool, f.slots)
		for _, slot := range f.free {
			if onFree[slot] {
				return fmt.Errorf("%s: slot %d twice on the free stack", f.path, slot)
			}
			onFree[slot] = true
		}
		var n int32
		for slot, st := range f.state {
			if st == ssdSlotBad {
				if onFree[slot] || f.gens[slot] != 0 {
					return fmt.Errorf("%s: bad slot %d on the free stack or with a generation", f.path, slot)
				}
				continue
			}
			switch {
			case st == ssdSlotFree && s.ready.Load() && !onFree[slot]:
				return fmt.Errorf("%s: free slot %d not on the free stack", f.path, slot)
			case st != ssdSlotFree && onFree[slot]:
				return fmt.Errorf("%s: slot %d in state %d on the free stack", f.path, slot, st)
			case st == ssdSlotSealing || st == ssdSlotFreeing:
				return fmt.Errorf("%s: slot %d in transient state %d", f.path, slot, st)
			case st != ssdSlotFree && f.gens[slot] == 0, st == ssdSlotFree && f.gens[slot] != 0:
				return fmt.Errorf("%s: slot %d state %d generation %d", f.path, slot, st, f.gens[slot])
			case st != ssdSlotFree:
				n++
				if f.gens[slot] > s.gen.Load() {
					return fmt.Errorf("%s: slot %d generation %d above the counter %d", f.path, slot, f.gens[slot], s.gen.Load())
				}
			}
		}
		if n != f.live {
			return fmt.Errorf("%s: %d slots not free, live says %d", f.path, n, f.live)
		}
		live += int64(n)
	}
	if live != cl.extents {
		return fmt.Errorf("class %d: %d live slots, %d extents", cl.size, live, cl.extents)
	}
	return nil
}

// ssdFiles lists the slot files in dir.
func ssdFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "class-*.slots"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func TestSSDConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		cfg      SSDConfig
		fileSize int64
		wantErr  bool
	}{
		{"no dir", SSDConfig{Capacity: gib}, 0, true},
		{"no capacity", SSDConfig{Dir: dir}, 0, true},
		{"tiny capacity", SSDConfig{Dir: dir, Capacity: 8 * kib}, 0, true},
		{"default file size, small tier", SSDConfig{Dir: dir, Capacity: 10 * mib}, 10 * mib, false},
		{"default file size floor", SSDConfig{Dir: dir, Capacity: gib}, 64 * mib, false},
		{"default file size", SSDConfig{Dir: dir, Capacity: 100 * gib}, gib, false},
		{"default file size cap", SSDConfig{Dir: dir, Capacity: 1 << 40}, 4 * gib, false},
		{"file size not 4K", SSDConfig{Dir: dir, Capacity: gib, FileSize: mib + 1}, 0, true},
		{"file size over capacity", SSDConfig{Dir: dir, Capacity: mib, FileSize: 2 * mib}, 0, true},
		{"bad sync mode", SSDConfig{Dir: dir, Capacity: mib, Sync: 9}, 0, true},
		{"negative interval", SSDConfig{Dir: dir, Capacity: mib, BatchInterval: -1}, 0, true},
		{"too many workers", SSDConfig{Dir: dir, Capacity: mib, RecoveryWorkers: 65}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.withDefaults()
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("withDefaults(%+v) = %v, want ErrInvalidConfig", tc.cfg, err)
				}
				return
			}
			if err != nil || got.FileSize != tc.fileSize || got.RecoveryWorkers != DefaultSSDRecoveryWorkers {
				t.Fatalf("withDefaults(%+v) = %+v, %v; want file size %d", tc.cfg, got, err, tc.fileSize)
			}
		})
	}
}

func TestSSDRoundTrip(t *testing.T) {
	cfg := SSDConfig{Dir: t.TempDir(), Capacity: 4 * mib, FileSize: mib}
	s, err := NewSSD(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Alloc(4096); !errors.Is(err, ErrNotRecovered) {
		t.Fatalf("Alloc before Recover: %v, want ErrNotRecovered", err)
	}
	if st, err := s.Recover(func(Extent, PageMeta) error { return errors.New("nothing expected") }); err != nil || st != (RecoveryStats{}) {
		t.Fatalf("Recover of an empty dir: %+v, %v", st, err)
	}
	if _, err := s.Recover(nil); !errors.Is(err, ErrRecovered) {
		t.Fatalf("second Recover: %v, want ErrRecovered", err)
	}
	s.Close()
	s, _, _ = openTestSSD(t, cfg)
	if s.Kind() != KindSSD {
		t.Fatalf("Kind %v", s.Kind())
	}

	key := ssdKey(1)
	ext, m := ssdPut(t, s, key, 100_000, ssdAlgCRC32C, false)
	if ext.Len != 100_000 || ext.Cap != classSize(classIndex(100_000)) || ext.Gen == 0 {
		t.Fatalf("extent %+v", ext)
	}
	// Readable before Seal (a store may verify from the tier).
	p := make([]byte, ext.Len)
	if err := s.ReadAt(ext, p, 0); err != nil || !bytes.Equal(p, ssdPayload(key, ext.Len)) {
		t.Fatalf("ReadAt before Seal: %v", err)
	}
	bad := m
	bad.Len--
	if err := s.Seal(ext, bad); !errors.Is(err, ErrInvalidMeta) {
		t.Fatalf("Seal with a wrong length: %v", err)
	}
	bad = m
	bad.ChecksumAlg = ssdAlgSHA256
	if err := s.Seal(ext, bad); !errors.Is(err, ErrInvalidMeta) {
		t.Fatalf("Seal with a 4-byte SHA-256: %v", err)
	}
	if err := s.Seal(ext, m); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(ext, m); !errors.Is(err, ErrSealed) {
		t.Fatalf("second Seal: %v, want ErrSealed", err)
	}
	if err := s.WriteAt(ext, []byte{1}, 0); !errors.Is(err, ErrSealed) {
		t.Fatalf("WriteAt after Seal: %v, want ErrSealed", err)
	}
	clear(p)
	if err := s.ReadAt(ext, p[:10], ext.Len-10); err != nil || !bytes.Equal(p[:10], ssdPayload(key, ext.Len)[ext.Len-10:]) {
		t.Fatalf("ReadAt of the tail: %v", err)
	}
	for _, r := range []struct{ off, n int64 }{{-1, 1}, {ext.Len, 1}, {ext.Len - 1, 2}} {
		if err := s.ReadAt(ext, make([]byte, r.n), r.off); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("ReadAt(%d bytes at %d): %v, want ErrOutOfRange", r.n, r.off, err)
		}
	}
	if err := s.ReadAt(Extent{Off: ext.Off, Len: 10, Cap: 5000, Gen: ext.Gen}, make([]byte, 1), 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("ReadAt of an extent of no class: %v", err)
	}
	st := s.Stats()
	if st.Kind != KindSSD || st.Capacity != 4*mib || st.Extents != 1 || st.Used != ext.Cap || st.Requested != ext.Len {
		t.Fatalf("Stats %+v", st)
	}
	cs := s.ClassStats()
	if len(cs) != 1 || cs[0].Size != ext.Cap || cs[0].Files != 1 || cs[0].Extents != 1 || cs[0].Slots == 0 ||
		cs[0].FileBytes != ssdFileLength(ext.Cap, int32(cs[0].Slots)) {
		t.Fatalf("ClassStats %+v", cs)
	}
	s.Free(ext)
	if err := s.ReadAt(ext, p, 0); !errors.Is(err, ErrStale) {
		t.Fatalf("ReadAt after Free: %v, want ErrStale", err)
	}
	if err := s.Seal(ext, m); !errors.Is(err, ErrStale) {
		t.Fatalf("Seal after Free: %v, want ErrStale", err)
	}
	panics.Expect(t, "double Free", func() { s.Free(ext) })
	ext2, _ := ssdPut(t, s, key, 100_000, ssdAlgCRC32C, true)
	if ext2.Off != ext.Off || ext2.Gen <= ext.Gen {
		t.Fatalf("reuse: %+v after %+v; want the same slot, a higher generation", ext2, ext)
	}
	panics.Expect(t, "Free of a stale generation", func() { s.Free(ext) })
	if _, err := s.Alloc(0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Alloc(0): %v", err)
	}
	if _, err := s.Alloc(s.MaxSize() + 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Alloc(MaxSize+1): %v", err)
	}
	if s.MaxSize() > mib-2*ssdBlock || s.MaxSize() < mib-3*ssdBlock {
		t.Fatalf("MaxSize %d with 1 MiB files", s.MaxSize())
	}
	big, _ := ssdPut(t, s, ssdKey(2), s.MaxSize(), ssdAlgSHA256, true)
	s.Free(big)
	s.Free(ext2)
	if st := s.Stats(); st.Extents != 0 || st.Used != 0 || st.Requested != 0 {
		t.Fatalf("Stats after freeing all: %+v", st)
	}
	mustCheckSSD(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Alloc(10); !errors.Is(err, ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
	if err := s.ReadAt(ext2, p, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
	s.Free(ext2) // nothing
}

func mustCheckSSD(t testing.TB, s *SSD) {
	t.Helper()
	if err := checkSSD(s); err != nil {
		t.Fatal(err)
	}
}

// TestSSDRecover seals pages of several sizes and both checksums, leaves
// some unsealed, frees some sealed ones, and checks after a reopen, in every
// sync mode, that exactly the sealed, unfreed pages come back with their
// meta and bytes (openTestSSD checks the bytes).
func TestSSDRecover(t *testing.T) {
	for _, mode := range []SyncMode{SyncEveryPage, SyncBatch, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := SSDConfig{Capacity: 8 * mib, FileSize: mib, Sync: mode}
			s, _, _ := openTestSSD(t, cfg)
			want := map[[32]byte]PageMeta{}
			var unsealed int
			var maxGen uint64
			for i := range 40 {
				n := []int64{4096, 12_345, 64 * kib, 200_000}[i%4]
				alg := uint8(ssdAlgCRC32C + i%2)
				seal := i%5 != 4
				ext, m := ssdPut(t, s, ssdKey(i), n, alg, seal)
				maxGen = max(maxGen, ext.Gen)
				switch {
				case !seal:
					unsealed++
				case i%7 == 3:
					s.Free(ext)
				default:
					want[m.Key] = m
				}
			}
			s, got, st := reopenSSD(t, s, cfg)
			if st.Recovered != len(want) || st.Dropped != 0 || st.Torn != unsealed {
				t.Fatalf("RecoveryStats %+v; want %d recovered, %d torn", st, len(want), unsealed)
			}
			for key, m := range want {
				pg, ok := got[key]
				if !ok {
					t.Fatalf("sealed page %x not recovered", key[:4])
				}
				if !ssdMetaEqual(pg.meta, m) {
					t.Fatalf("page %x: meta %+v, want %+v", key[:4], pg.meta, m)
				}
				st.Bytes -= m.Len
			}
			if len(got) != len(want) || st.Bytes != 0 {
				t.Fatalf("recovered %d pages, want %d (bytes off by %d)", len(got), len(want), st.Bytes)
			}
			if s.Stats().Extents != int64(len(want)) {
				t.Fatalf("Stats %+v", s.Stats())
			}
			ext, _ := ssdPut(t, s, ssdKey(1000), 4096, ssdAlgCRC32C, true)
			if ext.Gen <= maxGen {
				t.Fatalf("generation %d after a restart, not above %d", ext.Gen, maxGen)
			}
			// Torn slots were cleared: a second reopen finds none.
			_, got, st = reopenSSD(t, s, cfg)
			if st.Torn != 0 || st.Dropped != 0 || len(got) != len(want)+1 {
				t.Fatalf("second reopen: %+v, %d pages", st, len(got))
			}
		})
	}
}

// TestSSDRecoverRefused checks that a page fn refuses is freed and does not
// come back.
func TestSSDRecoverRefused(t *testing.T) {
	cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, Sync: SyncNone}
	s, _, _ := openTestSSD(t, cfg)
	for i := range 4 {
		ssdPut(t, s, ssdKey(i), 8000, ssdAlgCRC32C, true)
	}
	s.Close()
	s, err := NewSSD(SSDConfig{Dir: s.dir, Capacity: cfg.Capacity, FileSize: cfg.FileSize})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Recover(func(ext Extent, m PageMeta) error {
		switch m.Key {
		case ssdKey(1):
			return errors.New("not wanted")
		case ssdKey(2):
			s.Free(ext) // fn frees it itself, then refuses
			return errors.New("freed")
		}
		return nil
	})
	if err != nil || st.Recovered != 4 || s.Stats().Extents != 2 {
		t.Fatalf("Recover: %+v, %v; Stats %+v", st, err, s.Stats())
	}
	mustCheckSSD(t, s)
	_, got, _ := reopenSSD(t, s, cfg)
	if len(got) != 2 || got[ssdKey(0)].ext.Len == 0 || got[ssdKey(3)].ext.Len == 0 {
		t.Fatalf("after refusing 2 of 4: %d pages back", len(got))
	}
}

// TestSSDConcurrent runs writers, readers and freers on one tier in every
// sync mode (with -race: the locking), then checks every sealed page after
// a reopen.
func TestSSDConcurrent(t *testing.T) {
	for _, mode := range []SyncMode{SyncEveryPage, SyncBatch, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			perWorker := 30
			if mode == SyncEveryPage {
				perWorker = 8
			}
			cfg := SSDConfig{Capacity: 32 * mib, FileSize: mib, Sync: mode}
			s, _, _ := openTestSSD(t, cfg)
			const workers = 6
			kept := make([][][32]byte, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range perWorker {
						k := ssdKey(w*1000 + i)
						n := int64(4096 * (1 + 5*((w+i)%4)))
						ext, err := s.Alloc(n)
						if err != nil {
							t.Errorf("Alloc: %v", err)
							return
						}
						p := ssdPayload(k, n)
						if err := s.WriteAt(ext, p, 0); err != nil {
							t.Errorf("WriteAt: %v", err)
							return
						}
						if err := s.Seal(ext, ssdMetaFor(k, p, ssdAlgCRC32C, 0)); err != nil {
							t.Errorf("Seal: %v", err)
							return
						}
						q := make([]byte, n)
						if err := s.ReadAt(ext, q, 0); err != nil || !bytes.Equal(p, q) {
							t.Errorf("ReadAt: %v", err)
							return
						}
						if i%3 == 0 {
							s.Free(ext)
							continue
						}
						kept[w] = append(kept[w], k)
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			_, got, _ := reopenSSD(t, s, cfg)
			var n int
			for _, ks := range kept {
				for _, k := range ks {
					if _, ok := got[k]; !ok {
						t.Fatalf("page %x lost", k[:4])
					}
					n++
				}
			}
			if len(got) != n {
				t.Fatalf("%d pages recovered, %d kept", len(got), n)
			}
		})
	}
}

// TestSSDClassShift fills the tier with one size, frees it all, and fills
// it with another: the empty files move to the new class.
func TestSSDClassShift(t *testing.T) {
	cfg := SSDConfig{Capacity: 4 * mib, FileSize: mib, Sync: SyncNone}
	s, _, _ := openTestSSD(t, cfg)
	small := fill(t, s, 16*kib)
	// Four 1 MiB files of 62 slots, and a 2-slot one in what is left.
	if cs := s.ClassStats(); len(small) != 250 || len(cs) != 1 || cs[0].Files != 5 || cs[0].Slots != 250 {
		t.Fatalf("%d 16 KiB slots; ClassStats %+v", len(small), cs)
	}
	for _, e := range small[:len(small)-1] { // the last file stays busy
		s.Free(e)
	}
	large := fill(t, s, 200_000)
	// The four empty files became 200,704-byte files of 5 slots.
	cs := s.ClassStats()
	if len(cs) != 2 || cs[0].Files != 1 || cs[1].Files != 4 || len(large) != 20 || cs[1].Slots != 20 {
		t.Fatalf("after the shift: %d large extents, ClassStats %+v", len(large), cs)
	}
	if got := len(ssdFiles(t, s.dir)); got != 5 {
		t.Fatalf("%d files on disk, want 5", got)
	}
	mustCheckSSD(t, s)
}

// TestSSDStrayFiles checks that open removes half-made files, leaves
// unrelated ones alone, and removes a file whose header does not verify.
func TestSSDStrayFiles(t *testing.T) {
	var log testlog.Buffer
	cfg := SSDConfig{Capacity: 2 * mib, FileSize: mib, Logger: log.Logger()}
	s, _, _ := openTestSSD(t, cfg)
	ssdPut(t, s, ssdKey(1), 4096, ssdAlgCRC32C, true)
	s.Close()
	dir := s.dir
	mustWrite := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("class-4096-000007.slots.tmp", make([]byte, 100))
	mustWrite("class-8192-000008.slots", bytes.Repeat([]byte{1}, 8192))
	mustWrite("notes.txt", []byte("mine"))
	cfg.Dir = dir
	_, got, _ := openTestSSD(t, cfg)
	if len(got) != 1 {
		t.Fatalf("%d pages", len(got))
	}
	names, _ := os.ReadDir(dir)
	var left []string
	for _, e := range names {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{"class-4096-000000.slots", "notes.txt"}) {
		t.Fatalf("files left: %v", left)
	}
	if !strings.Contains(log.String(), "class-8192-000008.slots") {
		t.Fatalf("removal of the bad file not logged:\n%s", log.String())
	}
}

// TestSSDBatchGoroutine checks group commit with a batch interval and that
// Close stops its goroutine after answering what was queued.
func TestSSDBatchGoroutine(t *testing.T) {
	cfg := SSDConfig{Capacity: 4 * mib, FileSize: mib, Sync: SyncBatch, BatchInterval: time.Millisecond}
	s, _, _ := openTestSSD(t, cfg)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 {
				ssdPut(t, s, ssdKey(w*10+i), 8192, ssdAlgCRC32C, true)
			}
		})
	}
	wg.Wait()
	done := s.batch.done
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("the group-commit goroutine outlived Close")
	}
	cfg.Dir = s.dir
	if _, got, _ := openTestSSD(t, cfg); len(got) != 20 {
		t.Fatalf("%d pages", len(got))
	}
}
