package store

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
)

// TestSnapshotCutWhileChanging: a snapshot taken while pages are put and
// deleted between its shard copies (in shards already copied and in
// shards not yet) lists exactly the pages the events before its mark
// announce, and the dump with the events after the mark applied equals
// ListKeys: no page missing, none counted twice.
func TestSnapshotCutWhileChanging(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	var got []Event
	s, _ := newTestStore(t, 4096, func(c *Config) { c.OnEvent = func(e Event) { got = append(got, e) } })
	live := map[int]bool{}
	for i := range 600 {
		if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
			t.Fatalf("put %d: %v", i, st)
		}
		live[i] = true
	}
	next := 600
	atMark, total := -1, -1
	var dump []Listed
	err := s.Admin().Snapshot(testNS.ID, func(pages int) error {
		atMark, total = len(got), pages
		return nil
	}, func(run []Listed) error {
		if !slices.IsSortedFunc(run, func(a, b Listed) int { return slices.Compare(a.Key[:], b.Key[:]) }) {
			t.Error("a run out of key order")
		}
		dump = append(dump, run...)
		for range 20 { // changes anywhere, between two shards' copies
			if rng.IntN(2) == 0 {
				if st := put(t, s, key(next), pageData(next)); st != CommitCommitted {
					t.Fatalf("put %d: %v", next, st)
				}
				live[next] = true
				next++
				continue
			}
			for i := range live {
				if _, err := s.Publisher().Delete(testNS.ID, []namespace.Key{key(i)}); err != nil {
					t.Fatal(err)
				}
				delete(live, i)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := applyEvents{}
	for _, e := range got[:atMark] {
		before.apply(t, e)
	}
	idx := applyEvents{}
	for _, l := range dump {
		if idx[l.Key] {
			t.Fatalf("page %x listed twice", l.Key[:6])
		}
		idx[l.Key] = true
		if !before[l.Key] {
			t.Errorf("page %x listed, absent at the mark", l.Key[:6])
		}
	}
	if len(idx) != len(before) || total != len(before) {
		t.Fatalf("dump of %d pages (total %d), %d at the mark", len(idx), total, len(before))
	}
	for _, e := range got[atMark:] {
		idx.apply(t, e) // fails on a page stored twice or removed while absent
	}
	infos, _, err := s.Admin().ListKeys(testNS.ID, nil, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(idx) {
		t.Fatalf("dump and stream: %d pages, the store lists %d", len(idx), len(infos))
	}
	for _, in := range infos {
		if !idx[in.Key] {
			t.Fatalf("page %x listed, missing from dump and stream", in.Key[:6])
		}
	}
}

// TestSnapshotDropped: a namespace dropped while its snapshot runs ends
// the snapshot with ErrNamespaceNotFound; a failing mark yields nothing.
func TestSnapshotDropped(t *testing.T) {
	s, _ := newTestStore(t, 512, nil)
	for i := range 300 {
		put(t, s, key(i), pageData(i))
	}
	runs := 0
	err := s.Admin().Snapshot(testNS.ID, func(int) error { return nil }, func([]Listed) error {
		if runs++; runs == 1 {
			if _, err := s.Admin().DropNamespace(testNS.ID); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if !errors.Is(err, ErrNamespaceNotFound) || runs != 1 {
		t.Fatalf("snapshot of a dropped namespace: %v after %d runs", err, runs)
	}
	s2, _ := newTestStore(t, 16, nil)
	put(t, s2, key(1), pageData(1))
	busy := errors.New("busy")
	err = s2.Admin().Snapshot(testNS.ID, func(int) error { return busy }, func([]Listed) error {
		t.Error("a run after a failed mark")
		return nil
	})
	if !errors.Is(err, busy) {
		t.Fatalf("a failed mark: %v", err)
	}
}

// TestKeyTiers: every key's tier, held or not, past the first absent one.
func TestKeyTiers(t *testing.T) {
	s, _ := newTestStore(t, 16, nil)
	put(t, s, key(1), pageData(1))
	put(t, s, key(3), pageData(3))
	tier := make([]uint8, 4)
	held, err := s.Admin().KeyTiers(testNS.ID, []namespace.Key{key(0), key(1), key(2), key(3)}, tier)
	if err != nil || held != 2 || !slices.Equal(tier, []uint8{0, 1, 0, 1}) {
		t.Fatalf("KeyTiers: %d %v %v", held, tier, err)
	}
}

// BenchmarkSnapshot dumps a namespace of 100k pages and reports the
// longest hold of the store's lock (one shard's copy, max-hold-us) beside
// the whole dump's time (ns/op) and the hold a copy of the whole
// namespace under the lock takes (one-hold-us: the dump before it paged).
//
//	go test -run '^$' -bench Snapshot -benchtime 20x ./store
func BenchmarkSnapshot(b *testing.B) {
	const pages = 100_000
	s := benchStore(b, pages, func(i int) (k namespace.Key) {
		k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 0xff
		return k
	})
	var longest time.Duration
	b.ResetTimer()
	for b.Loop() {
		n := 0
		err := s.Admin().Snapshot(testNS.ID, func(int) error { return nil }, func(run []Listed) error {
			n += len(run)
			return nil
		})
		if err != nil || n != pages {
			b.Fatalf("snapshot: %d pages, %v", n, err)
		}
	}
	// One shard's copy under the lock, as Snapshot makes it.
	for i := range shardCount {
		start := time.Now()
		s.lock()
		s.copyShardLocked(s.ns[testNS.ID], i, nil)
		s.unlock()
		longest = max(longest, time.Since(start))
	}
	b.ReportMetric(float64(longest.Microseconds()), "max-hold-us")
	// Every shard in one hold, as the snapshot copied before it paged.
	start := time.Now()
	s.lock()
	for i := range shardCount {
		s.copyShardLocked(s.ns[testNS.ID], i, nil)
	}
	s.unlock()
	b.ReportMetric(float64(time.Since(start).Microseconds()), "one-hold-us")
}
