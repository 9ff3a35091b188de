package store

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// TestShardKeys: the index shards' keys, read one shard at a time, are
// every key of the namespace exactly once; a shard out of range and an
// unknown namespace are errors.
func TestShardKeys(t *testing.T) {
	s, _ := newTestStore(t, 300, nil)
	var want []namespace.Key
	for i := range 200 {
		putSpec(t, s, PageSpec{Key: key(i), Size: pageSize}, pageData(i))
		want = append(want, key(i))
	}
	var got []namespace.Key
	for i := range IndexShards {
		keys, err := s.Admin().ShardKeys(testNS.ID, i)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, keys...)
	}
	cmp := func(a, b namespace.Key) int { return bytes.Compare(a[:], b[:]) }
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("the shards hold %d keys, want the %d put, each once", len(got), len(want))
	}
	if _, err := s.Admin().ShardKeys(testNS.ID, IndexShards); err == nil {
		t.Fatal("a shard past the last answered")
	}
	if _, err := s.Admin().ShardKeys(namespace.ID{9}, 0); err == nil {
		t.Fatal("an unknown namespace answered")
	}
}

// BenchmarkWalk: visiting every page of a namespace, as the hinted
// handoff does, in ListKeys's sorted pages of 1,024 (each a pass over the
// whole index) beside a shard at a time (ShardKeys).
func BenchmarkWalk(b *testing.B) {
	for _, pages := range []int{10_000, 100_000} {
		s := benchStore(b, pages, key)
		b.Run(fmt.Sprintf("pages=%d/listkeys", pages), func(b *testing.B) {
			for b.Loop() {
				var after *namespace.Key
				for {
					_, next, err := s.Admin().ListKeys(testNS.ID, after, 1024)
					if err != nil {
						b.Fatal(err)
					}
					if next == nil {
						break
					}
					after = next
				}
			}
		})
		b.Run(fmt.Sprintf("pages=%d/shards", pages), func(b *testing.B) {
			for b.Loop() {
				for i := range IndexShards {
					keys, err := s.Admin().ShardKeys(testNS.ID, i)
					if err != nil {
						b.Fatal(err)
					}
					for start := 0; start < len(keys); start += 1024 {
						if _, _, err := s.Admin().Stat(testNS.ID, keys[start:min(len(keys), start+1024)]); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}

// benchStore is a store of one memory tier holding testNS's pages pages,
// page i under key(i); the benchmark's end closes it.
func benchStore(b *testing.B, pages int, key func(i int) namespace.Key) *Store {
	b.Helper()
	s, err := New(Config{Tiers: []tiers.Tier{newMemTier(int64(pages) * pageSize)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.AddNamespace(testNS); err != nil {
		b.Fatal(err)
	}
	data := pageData(0)
	sum := testNS.Checksum.Sum(data)
	for i := range pages {
		if res, err := s.Publisher().Put(testNS.ID, PageSpec{Key: key(i), Size: pageSize}, sum, 0, whole(data)); err != nil || !res.Committed() {
			b.Fatalf("put %d: %+v, %v", i, res, err)
		}
	}
	return s
}
