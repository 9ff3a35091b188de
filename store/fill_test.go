package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// TestFillKeepsItsExtent: a reservation that ends while an in-place write
// is still putting bytes into it (aborted here; expiry and a commit take
// the same path) keeps its extent until the write ends. Freed at once, the
// extent went to the next page reserved, the late bytes landed in that
// published page, and a read returned them under its verified checksum.
func TestFillKeepsItsExtent(t *testing.T) {
	h, err := tiers.NewHost(tiers.HostConfig{Capacity: 2 * 4096, SlabSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	s, _ := newTestStore(t, 1, func(c *Config) { c.Tiers = []tiers.Tier{h} })
	pub := s.Publisher()
	other := pageData(2)
	for _, end := range []string{"abort", "commit"} {
		t.Run(end, func(t *testing.T) {
			wid := reserve(t, s, key(1))
			if end == "commit" { // the page's bytes are all there; a rewrite is under way
				if err := pub.Write(testNS.ID, wid, 0, pageData(1)); err != nil {
					t.Fatal(err)
				}
			}
			err := pub.WriteInPlace(testNS.ID, wid, 0, pageSize, func(dst []byte) error {
				switch end {
				case "abort":
					if n, err := pub.Abort(testNS.ID, []uint64{wid}); n != 1 || err != nil {
						t.Fatalf("abort during the fill: %d, %v", n, err)
					}
				case "commit":
					// Bytes still arriving are not the page's yet:
					// INCOMPLETE, not a verification of what is there.
					st, err := pub.Commit(testNS.ID, wid, pageSize, testNS.Checksum.Sum(pageData(1)))
					if st != CommitIncomplete || err != nil {
						t.Fatalf("commit during the fill: %v, %v; want INCOMPLETE", st, err)
					}
				}
				if st := put(t, s, key(2), other); st != CommitCommitted {
					t.Fatalf("put beside the fill: %v", st)
				}
				copy(dst, bytes.Repeat([]byte{0xEE}, len(dst))) // the socket's late bytes
				return nil
			})
			if err != nil {
				t.Fatalf("the fill: %v", err)
			}
			got, err := read(t, s, 0, key(2))
			if err != nil || !bytes.Equal(got[0], other) {
				t.Fatalf("the page put beside the fill reads %x..., %v; want its own bytes", got[0][:8], err)
			}
			if h.Stats().Used != 4096 {
				t.Fatalf("host tier uses %d bytes after the fill; want one page's extent (4096)", h.Stats().Used)
			}
			if _, err := pub.Delete(testNS.ID, []namespace.Key{key(2)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWriteInPlace: an in-place write has Write's checks, counts its
// bytes only when its fill succeeds, and the page commits from them.
func TestWriteInPlace(t *testing.T) {
	s, _, _ := newHostStore(t, 2)
	pub := s.Publisher()
	data := pageData(3)
	wid := reserve(t, s, key(3))
	fill := func(src []byte) func([]byte) error {
		return func(dst []byte) error { copy(dst, src); return nil }
	}
	if err := pub.WriteInPlace(testNS.ID, wid, 100, 10, fill(data)); !errors.Is(err, ErrWriteOutOfRange) {
		t.Fatalf("a write leaving a gap: %v", err)
	}
	broken := errors.New("stream broke")
	if err := pub.WriteInPlace(testNS.ID, wid, 0, 100, func([]byte) error { return broken }); !errors.Is(err, broken) {
		t.Fatalf("a failed fill: %v", err)
	}
	if err := pub.WriteInPlace(testNS.ID, wid, 100, 10, fill(data)); !errors.Is(err, ErrWriteOutOfRange) {
		t.Fatalf("a failed fill counted its bytes: %v", err)
	}
	if err := pub.WriteInPlace(testNS.ID, wid, 0, 100, fill(data[:100])); err != nil {
		t.Fatal(err)
	}
	if err := pub.WriteInPlace(testNS.ID, wid, 100, pageSize-100, fill(data[100:])); err != nil {
		t.Fatal(err)
	}
	if err := pub.WriteInPlace(testNS.ID, wid, pageSize-1, 2, fill(data)); !errors.Is(err, ErrWriteOutOfRange) {
		t.Fatalf("a write past the page: %v", err)
	}
	st, err := pub.Commit(testNS.ID, wid, pageSize, testNS.Checksum.Sum(data))
	if st != CommitCommitted || err != nil {
		t.Fatalf("commit: %v, %v", st, err)
	}
	if err := pub.WriteInPlace(testNS.ID, wid, 0, 1, fill(data)); !errors.Is(err, ErrWriteClosed) {
		t.Fatalf("a write after the commit: %v", err)
	}
	got, err := read(t, s, 0, key(3))
	if err != nil || !bytes.Equal(got[0], data) {
		t.Fatalf("read %v", err)
	}
}
