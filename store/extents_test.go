//go:build linux

package store

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// newHostStore is a store over a host tier of pages pages (the mapped tier)
// followed by a memory tier (not mapped).
func newHostStore(t *testing.T, pages int) (*Store, *tiers.Host, *memTier) {
	t.Helper()
	return newHostStoreWith(t, pages, nil)
}

// newHostStoreWith is newHostStore with mod applied to the store's config.
func newHostStoreWith(t *testing.T, pages int, mod func(*Config)) (*Store, *tiers.Host, *memTier) {
	t.Helper()
	h, err := tiers.NewHost(tiers.HostConfig{Capacity: int64(pages) * 4096, SlabSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	mem := newMemTier(64 * pageSize)
	s, _ := newTestStore(t, 1, func(c *Config) {
		c.Tiers = []tiers.Tier{h, mem}
		if mod != nil {
			mod(c)
		}
	})
	return s, h, mem
}

// TestExtents checks that Extents reports every present page (not only
// the hit prefix) with its extent and checksum, marks the mapped ones,
// pins nothing (a deleted page's extent is freed at once, so its
// generation moves on) and refuses an expired caller lease.
func TestExtents(t *testing.T) {
	s, h, mem := newHostStore(t, 2)
	for i := range 3 { // the third page lands in the memory tier
		if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
			t.Fatalf("put %d: %v", i, st)
		}
	}
	keys := []namespace.Key{key(0), key(9), key(1), key(2)}
	data := []int{0, -1, 1, 2}
	// Lease the pages so that the mover cannot demote them between the
	// two calls below; then exactly one of the two tiers holds each.
	lr, err := s.Reader().Lookup(testNS.ID, keys[2:], true, 0)
	if err != nil || lr.Lease == nil {
		t.Fatal(lr, err)
	}
	l0, err := s.Reader().Lookup(testNS.ID, keys[:1], true, 0)
	if err != nil || l0.Lease == nil {
		t.Fatal(l0, err)
	}
	pages, err := s.Reader().Extents(testNS.ID, lr.Lease.ID, keys, h)
	if err != nil {
		t.Fatal(err)
	}
	inMem, err := s.Reader().Extents(testNS.ID, 0, keys, mem)
	if err != nil {
		t.Fatal(err)
	}
	mapped := 0
	for i, p := range pages {
		if p.Found != (data[i] >= 0) || inMem[i].Found != p.Found || (p.Found && p.Mapped == inMem[i].Mapped) {
			t.Fatalf("page %d: host %+v, memory %+v", i, p, inMem[i])
		}
		var got []byte
		switch {
		case p.Mapped:
			got = h.Bytes(p.Ext)
			mapped++
		case p.Found:
			got = make([]byte, pageSize)
			if err := mem.ReadAt(inMem[i].Ext, got, 0); err != nil {
				t.Fatal(err)
			}
			p = inMem[i]
		default:
			continue
		}
		if !bytes.Equal(got, pageData(data[i])) || !bytes.Equal(p.Checksum, testNS.Checksum.Sum(got)) {
			t.Fatalf("page %d: bytes or checksum %x differ", i, p.Checksum)
		}
	}
	if mapped > 2 {
		t.Fatalf("%d pages in a 2-page host tier", mapped)
	}
	// Unpinned: once its lease ends, deleting a page frees its extent.
	if err := s.Reader().ReleaseLease(testNS.ID, l0.Lease.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publisher().Delete(testNS.ID, keys[:1]); err != nil {
		t.Fatal(err)
	}
	// Freed at once, or, when the mover was copying it down just then, as
	// soon as the copy ends (the mover's pin).
	poll.Until(t, 5*time.Second, time.Millisecond, "a deleted, unleased page's extent freed", func() bool {
		return !pages[0].Mapped || h.Generation(pages[0].Ext) != pages[0].Ext.Gen
	})
	// An expired caller lease fails the call.
	res, err := s.Reader().Lookup(testNS.ID, keys[2:3], true, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the lease runs out by the clock: the read path's own check is the subject, not the janitor's sweep
	if _, err := s.Reader().Extents(testNS.ID, res.Lease.ID, keys[2:3], h); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("expired caller lease: %v", err)
	}
}

// TestDirectWrite checks the in-place write: the extent of a reservation in
// the mapped tier, filled directly, publishes only with the right checksum;
// a reservation elsewhere is not handed out.
func TestDirectWrite(t *testing.T) {
	s, h, mem := newHostStore(t, 1)
	wid := reserve(t, s, key(1))
	ext, ok, err := s.Publisher().DirectWrite(testNS.ID, wid, h)
	if err != nil || !ok || ext.Len != pageSize {
		t.Fatalf("DirectWrite: %+v %v %v", ext, ok, err)
	}
	copy(h.Bytes(ext), pageData(1))
	bad := testNS.Checksum.Sum(pageData(2))
	if st, err := s.Publisher().Commit(testNS.ID, wid, pageSize, bad); err != nil || st != CommitChecksumMismatch {
		t.Fatalf("commit with a wrong checksum: %v %v", st, err)
	}
	if h.Generation(ext) == ext.Gen {
		t.Fatal("a refused reservation kept its extent")
	}
	wid = reserve(t, s, key(1))
	ext, ok, err = s.Publisher().DirectWrite(testNS.ID, wid, h)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	copy(h.Bytes(ext), pageData(1))
	if st, err := s.Publisher().Commit(testNS.ID, wid, pageSize, testNS.Checksum.Sum(pageData(1))); err != nil || st != CommitCommitted {
		t.Fatalf("commit: %v %v", st, err)
	}
	got, err := read(t, s, 0, key(1))
	if err != nil || !bytes.Equal(got[0], pageData(1)) {
		t.Fatalf("read back: %v", err)
	}
	// The next reservation lands in one tier or the other (the mover may
	// have demoted the first page): exactly one of them hands it out.
	wid = reserve(t, s, key(2))
	_, okHost, err1 := s.Publisher().DirectWrite(testNS.ID, wid, h)
	_, okMem, err2 := s.Publisher().DirectWrite(testNS.ID, wid, mem)
	if okHost == okMem || err1 != nil || err2 != nil {
		t.Fatalf("reservation handed out for host %v (%v), memory %v (%v)", okHost, err1, okMem, err2)
	}
	if _, err := s.Publisher().Abort(testNS.ID, []uint64{wid}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Publisher().DirectWrite(testNS.ID, wid, mem); !errors.Is(err, ErrWriteClosed) {
		t.Fatalf("aborted reservation: %v", err)
	}
	if _, _, err := s.Publisher().DirectWrite(testNS.ID, 12345, h); !errors.Is(err, ErrUnknownWrite) {
		t.Fatalf("unknown write id: %v", err)
	}
}
