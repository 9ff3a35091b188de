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

// TestFillSum: the CRC-32C summed as in-place writes arrive decides the
// commit as reading the bytes back would: a wrong checksum is refused, and
// a rewrite of bytes already summed makes the commit read them all.
func TestFillSum(t *testing.T) {
	s, _, _ := newHostStore(t, 4)
	pub := s.Publisher()
	data := pageData(4)
	junk := bytes.Repeat([]byte{0x5A}, 10)
	fill := func(src []byte) func([]byte) error {
		return func(dst []byte) error { copy(dst, src); return nil }
	}
	rewritten := bytes.Clone(data)
	copy(rewritten, junk)
	cases := []struct {
		name   string
		writes func(wid uint64) error
		sum    []byte
		want   CommitStatus
	}{
		{"in order", func(wid uint64) error {
			return errors.Join(pub.WriteInPlace(testNS.ID, wid, 0, 100, fill(data[:100])),
				pub.WriteInPlace(testNS.ID, wid, 100, pageSize-100, fill(data[100:])))
		}, testNS.Checksum.Sum(data), CommitCommitted},
		{"wrong checksum", func(wid uint64) error {
			return pub.WriteInPlace(testNS.ID, wid, 0, pageSize, fill(data))
		}, testNS.Checksum.Sum(rewritten), CommitChecksumMismatch},
		{"rewritten, old checksum", func(wid uint64) error {
			return errors.Join(pub.WriteInPlace(testNS.ID, wid, 0, pageSize, fill(data)),
				pub.WriteInPlace(testNS.ID, wid, 0, len(junk), fill(junk)))
		}, testNS.Checksum.Sum(data), CommitChecksumMismatch},
		{"rewritten, new checksum", func(wid uint64) error {
			return errors.Join(pub.WriteInPlace(testNS.ID, wid, 0, pageSize, fill(data)),
				pub.WriteInPlace(testNS.ID, wid, 0, len(junk), fill(junk)))
		}, testNS.Checksum.Sum(rewritten), CommitCommitted},
		{"rewritten by a copied write, old checksum", func(wid uint64) error {
			return errors.Join(pub.WriteInPlace(testNS.ID, wid, 0, pageSize, fill(data)),
				pub.Write(testNS.ID, wid, 0, junk))
		}, testNS.Checksum.Sum(data), CommitChecksumMismatch},
		{"after a copied write", func(wid uint64) error {
			return errors.Join(pub.Write(testNS.ID, wid, 0, junk),
				pub.WriteInPlace(testNS.ID, wid, int64(len(junk)), pageSize-len(junk), fill(data[len(junk):])))
		}, testNS.Checksum.Sum(rewritten), CommitCommitted},
	}
	for i, c := range cases {
		wid := reserve(t, s, key(10+i))
		if err := c.writes(wid); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st, err := pub.Commit(testNS.ID, wid, pageSize, c.sum); st != c.want || err != nil {
			t.Errorf("%s: commit %v, %v; want %v", c.name, st, err, c.want)
		}
	}
}
