package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

const pageSize = 1024

var testNS = Namespace{ID: namespace.ID{1, 2, 3}, Tenant: "acme", PageBytes: pageSize, Checksum: namespace.CRC32C}

// checkLineageAfter makes t fail if s's lineage bookkeeping is
// inconsistent once the test is over (invariants.go). Every test that
// builds a store calls it.
func checkLineageAfter(t *testing.T, s *Store) {
	t.Helper()
	t.Cleanup(func() {
		if err := s.checkLineage(); err != nil {
			t.Errorf("store lineage after the test:\n%v", err)
		}
	})
}

func newTestStore(t *testing.T, pages int, mod func(*Config)) (*Store, *memTier) {
	t.Helper()
	tier := newMemTier(int64(pages) * pageSize)
	cfg := Config{Tiers: []tiers.Tier{tier}}
	if mod != nil {
		mod(&cfg)
	}
	return openStore(t, cfg, testNS), tier
}

// openStore builds a store that the test closes and whose lineage it
// checks at its end, with namespaces added.
func openStore(t *testing.T, cfg Config, nss ...Namespace) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	checkLineageAfter(t, s)
	for _, n := range nss {
		if err := s.AddNamespace(n); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func key(i int) namespace.Key {
	var k namespace.Key
	copy(k[:], fmt.Sprintf("key-%08d", i))
	k[31] = byte(i * 7)
	k[0] = byte(i)
	return k
}

func pageData(i int) []byte {
	b := make([]byte, pageSize)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	return b
}

// reserve reserves one page and returns its write id.
func reserve(t *testing.T, s *Store, k namespace.Key) uint64 {
	t.Helper()
	res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: k, Size: pageSize}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != Reserved {
		t.Fatalf("reserve %x: status %v, err %v", k[:4], res[0].Status, res[0].Err)
	}
	return res[0].WriteID
}

func put(t *testing.T, s *Store, k namespace.Key, data []byte) CommitStatus {
	t.Helper()
	wid := reserve(t, s, k)
	if err := s.Publisher().Write(testNS.ID, wid, 0, data); err != nil {
		t.Fatal(err)
	}
	st, err := s.Publisher().Commit(testNS.ID, wid, int64(len(data)), testNS.Checksum.Sum(data))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func read(t *testing.T, s *Store, lease uint64, keys ...namespace.Key) ([][]byte, error) {
	t.Helper()
	out := make([][]byte, len(keys))
	err := s.Reader().Read(testNS.ID, lease, keys, func(i int, p PageView) error {
		if p.Found {
			out[i] = bytes.Clone(p.Data)
		}
		return nil
	})
	return out, err
}

func TestPutLookupRead(t *testing.T) {
	s, _ := newTestStore(t, 16, nil)
	for i := range 3 {
		if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
			t.Fatalf("put %d: %v", i, st)
		}
	}
	res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0), key(1), key(9), key(2)}, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.HitPrefix != 2 || !res.Present[3] || res.Present[2] || res.Lease != nil {
		t.Fatalf("lookup = %+v, want hit prefix 2, key 3 present, no lease", res)
	}
	got, err := read(t, s, 0, key(2), key(9), key(0))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0], pageData(2)) || got[1] != nil || !bytes.Equal(got[2], pageData(0)) {
		t.Fatal("read returned wrong bytes")
	}
}

func TestCommitRefusals(t *testing.T) {
	data := pageData(1)
	good := testNS.Checksum.Sum(data)
	cases := []struct {
		name  string
		write []byte
		size  int64
		sum   []byte
		want  CommitStatus
	}{
		{"wrong checksum", data, pageSize, []byte{0, 0, 0, 0}, CommitChecksumMismatch},
		{"checksum of other bytes", data, pageSize, testNS.Checksum.Sum(pageData(2)), CommitChecksumMismatch},
		{"short checksum", data, pageSize, good[:2], CommitChecksumMismatch},
		{"wrong size", data, pageSize - 1, good, CommitSizeMismatch},
		{"truncated write", data[:pageSize/2], pageSize, good, CommitIncomplete},
		{"nothing written", nil, pageSize, good, CommitIncomplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, tier := newTestStore(t, 4, nil)
			before := tier.usedBytes()
			wid := reserve(t, s, key(1))
			if err := s.Publisher().Write(testNS.ID, wid, 0, tc.write); err != nil {
				t.Fatal(err)
			}
			st, err := s.Publisher().Commit(testNS.ID, wid, tc.size, tc.sum)
			if err != nil || st != tc.want {
				t.Fatalf("commit = %v, %v; want %v", st, err, tc.want)
			}
			if res, _ := s.Reader().Lookup(testNS.ID, []namespace.Key{key(1)}, false, 0); res.Present[0] {
				t.Fatal("refused page is visible")
			}
			if after := tier.usedBytes(); after != before {
				t.Fatalf("tier usage %d after refused commit, %d before", after, before)
			}
			if s.Admin().Stats().Reservations != 0 {
				t.Fatal("reservation left behind")
			}
			// A retry with the right bytes succeeds: nothing was lost.
			if st := put(t, s, key(1), data); st != CommitCommitted {
				t.Fatalf("retry: %v", st)
			}
		})
	}
}

func TestUnknownAndExpiredWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, tier := newTestStore(t, 4, func(c *Config) { c.ReserveTTL = time.Second })
		if st, _ := s.Publisher().Commit(testNS.ID, 12345, pageSize, nil); st != CommitUnknownWrite {
			t.Fatalf("commit of unknown id: %v", st)
		}
		if err := s.Publisher().Write(testNS.ID, 12345, 0, []byte{1}); !errors.Is(err, ErrUnknownWrite) {
			t.Fatalf("write of unknown id: %v", err)
		}
		wid := reserve(t, s, key(1))
		if err := s.Publisher().Write(testNS.ID, wid, 0, pageData(1)); err != nil {
			t.Fatal(err)
		}
		advance(2 * time.Second) // the janitor reclaims the reservation
		if tier.usedBytes() != 0 {
			t.Fatal("expired reservation still holds memory")
		}
		if err := s.Publisher().Write(testNS.ID, wid, 0, []byte{1}); !errors.Is(err, ErrWriteExpired) {
			t.Fatalf("write after expiry: %v", err)
		}
		if st, _ := s.Publisher().Commit(testNS.ID, wid, pageSize, testNS.Checksum.Sum(pageData(1))); st != CommitExpired {
			t.Fatalf("commit after expiry: %v", st)
		}
		if res, _ := s.Reader().Lookup(testNS.ID, []namespace.Key{key(1)}, false, 0); res.Present[0] {
			t.Fatal("expired page is visible")
		}
	})
}

func TestWriteOutOfRange(t *testing.T) {
	s, _ := newTestStore(t, 4, nil)
	wid := reserve(t, s, key(1))
	for _, w := range []struct{ off, n int }{{0, pageSize + 1}, {10, 1}, {-1, 1}, {pageSize, 1}} {
		if err := s.Publisher().Write(testNS.ID, wid, int64(w.off), make([]byte, w.n)); !errors.Is(err, ErrWriteOutOfRange) {
			t.Errorf("write [%d,+%d): %v, want ErrWriteOutOfRange", w.off, w.n, err)
		}
	}
	// The reservation survives bad writes.
	data := pageData(1)
	if err := s.Publisher().Write(testNS.ID, wid, 0, data[:100]); err != nil {
		t.Fatal(err)
	}
	if err := s.Publisher().Write(testNS.ID, wid, 50, data[50:]); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Publisher().Commit(testNS.ID, wid, pageSize, testNS.Checksum.Sum(data)); st != CommitCommitted {
		t.Fatalf("commit: %v", st)
	}
}

func TestDuplicateCommitAndRace(t *testing.T) {
	s, tier := newTestStore(t, 16, nil)
	data := pageData(3)
	sum := testNS.Checksum.Sum(data)
	wid := reserve(t, s, key(3))
	if err := s.Publisher().Write(testNS.ID, wid, 0, data); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if st, _ := s.Publisher().Commit(testNS.ID, wid, pageSize, sum); st != CommitCommitted {
			t.Fatalf("repeated commit: %v", st)
		}
	}
	if err := s.Publisher().Write(testNS.ID, wid, 0, data); !errors.Is(err, ErrWriteClosed) {
		t.Fatalf("write after commit: %v", err)
	}
	if res, _ := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: key(3), Size: pageSize}}, 0); res[0].Status != Exists {
		t.Fatalf("reserve of a published key: %v", res[0].Status)
	}

	// Racing writers on one fresh key: exactly one commit wins.
	const writers = 8
	ids := make([]uint64, writers)
	for i := range ids {
		ids[i] = reserve(t, s, key(4))
		if err := s.Publisher().Write(testNS.ID, ids[i], 0, pageData(4)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	got := make([]CommitStatus, writers)
	for i := range ids {
		wg.Go(func() {
			got[i], _ = s.Publisher().Commit(testNS.ID, ids[i], pageSize, testNS.Checksum.Sum(pageData(4)))
		})
	}
	wg.Wait()
	wins := 0
	for _, st := range got {
		switch st {
		case CommitCommitted:
			wins++
		case CommitExists:
		default:
			t.Fatalf("racing commit: %v", st)
		}
	}
	if wins != 1 {
		t.Fatalf("%d writers won, want 1", wins)
	}
	if st := s.Admin().Stats(); st.Pages != 2 || tier.usedBytes() != 2*pageSize {
		t.Fatalf("%d pages, %d bytes used; want 2 pages", st.Pages, tier.usedBytes())
	}
}

func TestAbortReturnsSpace(t *testing.T) {
	s, tier := newTestStore(t, 4, nil)
	wid := reserve(t, s, key(1))
	if n, _ := s.Publisher().Abort(testNS.ID, []uint64{wid, 999}); n != 1 {
		t.Fatalf("aborted %d", n)
	}
	if tier.usedBytes() != 0 {
		t.Fatal("abort kept memory")
	}
	if st, _ := s.Publisher().Commit(testNS.ID, wid, pageSize, nil); st != CommitAborted {
		t.Fatalf("commit after abort: %v", st)
	}
}

func TestBadSizeRejected(t *testing.T) {
	s, tier := newTestStore(t, 4, nil)
	res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: key(1), Size: pageSize + 1}, {Key: key(2), Size: pageSize}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != Rejected || !errors.Is(res[0].Err, ErrBadSize) || res[1].Status != Reserved {
		t.Fatalf("reserve = %+v", res)
	}
	if tier.usedBytes() != pageSize {
		t.Fatal("rejected page took memory")
	}
}

func TestUnknownNamespace(t *testing.T) {
	s, _ := newTestStore(t, 4, nil)
	other := namespace.ID{9}
	if _, err := s.Reader().Lookup(other, []namespace.Key{key(1)}, false, 0); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("lookup: %v", err)
	}
	if _, err := s.Publisher().Reserve(other, []PageSpec{{Key: key(1), Size: pageSize}}, 0); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("reserve: %v", err)
	}
}

func TestLeasedPageSurvivesPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const capacity = 8
		// LRU: the page's worth is not the point here, its lease is (the
		// lookups below make it worth keeping under the cost policy).
		s, _ := newTestStore(t, capacity, func(c *Config) {
			c.DefaultLeaseTTL = 5 * time.Second
			c.Eviction = eviction.KindLRU
		})
		put(t, s, key(0), pageData(0))
		res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, true, 0)
		if err != nil || res.Lease == nil {
			t.Fatalf("lookup with lease: %v %+v", err, res)
		}
		// Fill far past capacity: everything else is evicted, the leased page stays.
		for i := 1; i < 5*capacity; i++ {
			if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
				t.Fatalf("put %d: %v", i, st)
			}
		}
		got, err := read(t, s, res.Lease.ID, key(0))
		if err != nil || !bytes.Equal(got[0], pageData(0)) {
			t.Fatalf("leased page lost under pressure: %v", err)
		}
		// Lookups without a lease do not extend it.
		for range 10 {
			advance(time.Second)
			if _, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, false, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := read(t, s, res.Lease.ID, key(0)); !errors.Is(err, ErrLeaseExpired) {
			t.Fatalf("read under an expired lease: %v, want ErrLeaseExpired", err)
		}
		if _, err := s.Reader().RenewLease(testNS.ID, res.Lease.ID, 0); !errors.Is(err, ErrLeaseExpired) {
			t.Fatalf("renew of an expired lease: %v", err)
		}
		// Now unprotected: more pressure evicts it.
		evicted := false
		for i := 5 * capacity; i < 7*capacity && !evicted; i++ {
			put(t, s, key(i), pageData(i))
			_, ok, _ := s.Admin().Stat(testNS.ID, []namespace.Key{key(0)}) // not a use
			evicted = !ok[0]
		}
		if !evicted {
			t.Fatal("page whose lease expired was never evicted")
		}
	})
}

func TestLeaseRenewRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newTestStore(t, 4, func(c *Config) {
			c.DefaultLeaseTTL = 2 * time.Second
			c.MaxLeasesPerTenant = 2
		})
		put(t, s, key(0), pageData(0))
		k := []namespace.Key{key(0)}
		res, _ := s.Reader().Lookup(testNS.ID, k, true, 0)
		for range 5 {
			advance(time.Second)
			if _, err := s.Reader().RenewLease(testNS.ID, res.Lease.ID, 0); err != nil {
				t.Fatalf("renew: %v", err)
			}
		}
		if _, err := read(t, s, res.Lease.ID, key(0)); err != nil {
			t.Fatalf("read under a renewed lease: %v", err)
		}
		if _, err := s.Reader().Lookup(testNS.ID, k, true, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reader().Lookup(testNS.ID, k, true, 0); !errors.Is(err, ErrLeaseLimit) {
			t.Fatalf("third lease: %v, want ErrLeaseLimit", err)
		}
		if err := s.Reader().ReleaseLease(testNS.ID, res.Lease.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Reader().ReleaseLease(testNS.ID, res.Lease.ID); !errors.Is(err, ErrLeaseNotFound) {
			t.Fatalf("second release: %v", err)
		}
		if _, err := s.Reader().Lookup(testNS.ID, k, true, 0); err != nil {
			t.Fatalf("lease after a release: %v", err)
		}
	})
}

func TestDeleteLeasedPage(t *testing.T) {
	s, tier := newTestStore(t, 4, nil)
	put(t, s, key(0), pageData(0))
	res, _ := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, true, 0)
	if n, _ := s.Publisher().Delete(testNS.ID, []namespace.Key{key(0), key(5)}); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	if r, _ := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0)}, false, 0); r.Present[0] {
		t.Fatal("deleted page visible")
	}
	if tier.usedBytes() != pageSize {
		t.Fatal("leased page's memory freed before the lease ended")
	}
	if err := s.Reader().ReleaseLease(testNS.ID, res.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if tier.usedBytes() != 0 {
		t.Fatal("memory not returned after the lease ended")
	}
}

func TestNoSpaceWhenAllLeased(t *testing.T) {
	s, tier := newTestStore(t, 2, nil)
	put(t, s, key(0), pageData(0))
	put(t, s, key(1), pageData(1))
	if _, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(0), key(1)}, true, 0); err != nil {
		t.Fatal(err)
	}
	res, _ := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: key(2), Size: pageSize}}, 0)
	if res[0].Status != Rejected || !errors.Is(res[0].Err, ErrNoSpace) {
		t.Fatalf("reserve with everything leased: %+v", res[0])
	}
	tier.failWrites = errors.New("injected I/O error")
	// ... and a tier write failure is a clear error, keeping what is stored.
	if _, err := s.Publisher().Delete(testNS.ID, []namespace.Key{key(1)}); err != nil {
		t.Fatal(err)
	}
	got, err := read(t, s, 0, key(0))
	if err != nil || !bytes.Equal(got[0], pageData(0)) {
		t.Fatal("stored page lost")
	}
}

func TestTierWriteError(t *testing.T) {
	s, tier := newTestStore(t, 4, nil)
	put(t, s, key(0), pageData(0))
	tier.failWrites = errors.New("injected disk error")
	wid := reserve(t, s, key(1))
	if err := s.Publisher().Write(testNS.ID, wid, 0, pageData(1)); err == nil || !errors.Is(err, tier.failWrites) {
		t.Fatalf("write with a failing tier: %v", err)
	}
	if st, _ := s.Publisher().Commit(testNS.ID, wid, pageSize, testNS.Checksum.Sum(pageData(1))); st != CommitIncomplete {
		t.Fatalf("commit after a failed write: %v", st)
	}
	got, err := read(t, s, 0, key(0))
	if err != nil || !bytes.Equal(got[0], pageData(0)) {
		t.Fatal("stored page lost after tier errors")
	}
	if tier.usedBytes() != pageSize {
		t.Fatal("failed put kept memory")
	}
}

// TestRandomConcurrent runs random operations from several goroutines and
// checks that every read returns exactly the published bytes and that the
// accounting balances at the end.
func TestRandomConcurrent(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	s, tier := newTestStore(t, 32, func(c *Config) { c.DefaultLeaseTTL = 50 * time.Millisecond })
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for range 2000 {
				i := r.IntN(64)
				switch r.IntN(5) {
				case 0, 1:
					res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: key(i), Size: pageSize}}, 0)
					if err != nil || res[0].Status != Reserved {
						continue
					}
					if err := s.Publisher().Write(testNS.ID, res[0].WriteID, 0, pageData(i)); err != nil {
						t.Error(err)
						return
					}
					s.Publisher().Commit(testNS.ID, res[0].WriteID, pageSize, testNS.Checksum.Sum(pageData(i)))
				case 2:
					res, err := s.Reader().Lookup(testNS.ID, []namespace.Key{key(i), key(i + 1)}, r.IntN(2) == 0, 0)
					if err != nil {
						continue
					}
					if res.Lease != nil && r.IntN(2) == 0 {
						s.Reader().ReleaseLease(testNS.ID, res.Lease.ID)
					}
				case 3:
					err := s.Reader().Read(testNS.ID, 0, []namespace.Key{key(i)}, func(_ int, p PageView) error {
						if p.Found && !bytes.Equal(p.Data, pageData(i)) {
							return fmt.Errorf("key %d: read bytes differ from the published page", i)
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				case 4:
					s.Publisher().Delete(testNS.ID, []namespace.Key{key(i)})
				}
			}
		})
	}
	wg.Wait()
	s.Close()
	st := s.Admin().Stats()
	if st.Reservations != 0 || st.Leases != 0 {
		t.Fatalf("after close: %d reservations, %d leases", st.Reservations, st.Leases)
	}
	if tier.usedBytes() != st.Bytes {
		t.Fatalf("tier holds %d bytes, index accounts for %d", tier.usedBytes(), st.Bytes)
	}
}
