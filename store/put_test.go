package store

import (
	"errors"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// TestOnePut: the one-call Put answers as Reserve, Write and Commit would,
// and leaves no reservation behind whatever the outcome.
func TestOnePut(t *testing.T) {
	s, _ := newTestStore(t, 8, nil)
	data := pageData(1)
	good := testNS.Checksum.Sum(data)
	if _, err := s.Publisher().Put(testNS.ID, PageSpec{Key: key(9), Size: pageSize}, good, 0, whole(data)); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("stream broke")
	cases := []struct {
		name    string
		key     int
		size    int64
		sum     []byte
		fill    func(func([]byte) error) error
		reserve ReserveStatus
		commit  CommitStatus
		err     error
	}{
		{"committed", 1, pageSize, good, whole(data), Reserved, CommitCommitted, nil},
		{"already there", 9, pageSize, good, whole(data), Exists, 0, nil},
		{"bad size", 2, pageSize / 2, good, whole(data[:pageSize/2]), Rejected, 0, nil},
		{"bad checksum", 3, pageSize, good[:2], whole(data), Reserved, CommitChecksumMismatch, nil},
		{"fill stops short", 4, pageSize, good, whole(data[:10]), Reserved, CommitIncomplete, nil},
		{"in pieces", 5, pageSize, good, func(w func([]byte) error) error {
			if err := w(data[:100]); err != nil {
				return err
			}
			return w(data[100:])
		}, Reserved, CommitCommitted, nil},
		{"too many bytes", 6, pageSize, good, whole(append(data, 1)), Reserved, CommitAborted, ErrWriteOutOfRange},
		{"fill fails", 7, pageSize, good, func(func([]byte) error) error { return broken }, Reserved, CommitAborted, broken},
	}
	for _, c := range cases {
		res, err := s.Publisher().Put(testNS.ID, PageSpec{Key: key(c.key), Size: c.size}, c.sum, 0, c.fill)
		if !errors.Is(err, c.err) || res.Reserve != c.reserve || res.Commit != c.commit {
			t.Errorf("%s: %+v, %v; want reserve %d commit %v, %v", c.name, res, err, c.reserve, c.commit, c.err)
		}
		if res.Committed() != (c.commit == CommitCommitted) {
			t.Errorf("%s: Committed() = %v", c.name, res.Committed())
		}
		if c.reserve == Rejected && !errors.Is(res.Err, ErrBadSize) {
			t.Errorf("%s: reason %v, want ErrBadSize", c.name, res.Err)
		}
	}
	if st := s.Admin().Stats(); st.Reservations != 0 || st.Pages != 3 {
		t.Fatalf("after the puts: %d reservations, %d pages; want 0, 3", st.Reservations, st.Pages)
	}
	if _, err := s.Publisher().Put(testNS.ID, PageSpec{Key: key(1), Size: pageSize}, good, 0, whole(data)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publisher().Put(namespace.ID{9}, PageSpec{Key: key(1), Size: pageSize}, good, 0, whole(data)); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("unknown namespace: %v", err)
	}
}

// whole fills a page with p in one write.
func whole(p []byte) func(func([]byte) error) error {
	return func(w func([]byte) error) error { return w(p) }
}
