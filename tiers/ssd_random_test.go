//go:build linux

package tiers

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/testlog"
	"github.com/stratakv/strata/internal/testing/testseed"
)

// ssdModelPage is the model's record of a live extent.
type ssdModelPage struct {
	ext    Extent
	key    [32]byte
	sealed bool
}

// TestSSDRandom runs random Allocs, writes, Seals, reads and Frees over a
// small tier whose page sizes compete for files, reopening it now and then
// in a random sync mode, and checks against a model: after every reopen
// exactly the sealed, unfreed pages come back (with their bytes), unsealed
// ones are counted torn, nothing is dropped; reads return the written
// bytes; sealed extents refuse writes; the internal invariants hold.
// Reproduce a failure with -ssd.seed.
func TestSSDRandom(t *testing.T) {
	rng := testseed.Rand(t, *ssdSeed, "ssd.seed")
	sizes := []int64{4096, 9000, 30_000, 64 * kib, 100_000}
	modes := []SyncMode{SyncNone, SyncNone, SyncNone, SyncNone, SyncBatch, SyncEveryPage}
	var log testlog.Buffer
	cfg := SSDConfig{Capacity: 3 * mib, FileSize: 256 * kib, Sync: modes[rng.IntN(len(modes))], Logger: log.Logger()}
	s, _, _ := openTestSSD(t, cfg)
	live := map[int]*ssdModelPage{}
	pick := func() (int, *ssdModelPage) {
		all := slices.Sorted(maps.Keys(live)) // sorted: reproducible
		i := all[rng.IntN(len(all))]
		return i, live[i]
	}
	next := 0
	reopens := 0
	for step := range *ssdSteps {
		switch r := rng.IntN(100); {
		case r < 45 || len(live) == 0:
			n := sizes[rng.IntN(len(sizes))] - rng.Int64N(100)
			ext, err := s.Alloc(n)
			if errors.Is(err, ErrFull) {
				if len(live) > 0 {
					i, pg := pick()
					s.Free(pg.ext)
					delete(live, i)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d: Alloc(%d): %v", step, n, err)
			}
			key := ssdKey(next)
			p := ssdPayload(key, n)
			if err := s.WriteAt(ext, p, 0); err != nil {
				t.Fatalf("step %d: WriteAt: %v", step, err)
			}
			pg := &ssdModelPage{ext: ext, key: key, sealed: rng.IntN(8) != 0}
			if pg.sealed {
				if err := s.Seal(ext, ssdMetaFor(key, p, uint8(1+rng.IntN(2)), uint32(next%5))); err != nil {
					t.Fatalf("step %d: Seal: %v", step, err)
				}
			}
			live[next] = pg
			next++
		case r < 70:
			i, pg := pick()
			s.Free(pg.ext)
			delete(live, i)
		case r < 92:
			_, pg := pick()
			off := rng.Int64N(pg.ext.Len)
			p := make([]byte, rng.Int64N(pg.ext.Len-off)+1)
			if err := s.ReadAt(pg.ext, p, off); err != nil {
				t.Fatalf("step %d: ReadAt: %v", step, err)
			}
			if !bytes.Equal(p, ssdPayload(pg.key, pg.ext.Len)[off:off+int64(len(p))]) {
				t.Fatalf("step %d: ReadAt returned other bytes", step)
			}
			if err := s.WriteAt(pg.ext, p[:1], off); pg.sealed != errors.Is(err, ErrSealed) {
				t.Fatalf("step %d: WriteAt (sealed %v): %v", step, pg.sealed, err)
			}
		case r < 97:
			mustCheckSSD(t, s)
		default:
			reopens++
			cfg.Sync = modes[rng.IntN(len(modes))]
			var got ssdRecovered
			var st RecoveryStats
			s, got, st = reopenSSD(t, s, cfg)
			torn := 0
			for i, pg := range live {
				if !pg.sealed {
					torn++
					delete(live, i)
					continue
				}
				rp, ok := got[pg.key]
				if !ok {
					t.Fatalf("step %d: sealed page %d lost in a reopen", step, i)
				}
				pg.ext = rp.ext
			}
			if len(got) != len(live) || st.Torn != torn || st.Dropped != 0 {
				t.Fatalf("step %d: reopen recovered %d pages (%+v), model has %d sealed, %d torn",
					step, len(got), st, len(live), torn)
			}
		}
	}
	mustCheckSSD(t, s)
	t.Logf("%d pages written, %d live at the end, %d reopens, %d files moved between classes",
		next, len(live), reopens, strings.Count(log.String(), "removing an empty slot file"))
}
