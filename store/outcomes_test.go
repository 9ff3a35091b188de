package store

import (
	"errors"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// TestOutcomeScopedToNamespace: a finished write's outcome is told, by
// Commit, Outcome and Write alike, only to requests of its namespace: in
// another (another tenant's) the write id is one never issued. Outcome
// commits nothing: an open reservation answers UNKNOWN_WRITE and stays
// open for its owner's commit.
func TestOutcomeScopedToNamespace(t *testing.T) {
	other := Namespace{ID: namespace.ID{9}, Tenant: "other", PageBytes: pageSize, Checksum: testNS.Checksum}
	s, _ := newTestStore(t, 8, nil)
	if err := s.AddNamespace(other); err != nil {
		t.Fatal(err)
	}
	data := pageData(1)
	sum := testNS.Checksum.Sum(data)
	wid := reserve(t, s, key(1))
	if err := s.Publisher().Write(testNS.ID, wid, 0, data); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Publisher().Outcome(testNS.ID, wid); st != CommitUnknownWrite {
		t.Fatalf("outcome of an open reservation: %v", st)
	}
	if st, _ := s.Publisher().Commit(testNS.ID, wid, pageSize, sum); st != CommitCommitted {
		t.Fatalf("commit after outcome: %v", st)
	}
	if st, _ := s.Publisher().Outcome(testNS.ID, wid); st != CommitCommitted {
		t.Fatalf("outcome in its namespace: %v", st)
	}
	if st, _ := s.Publisher().Outcome(other.ID, wid); st != CommitUnknownWrite {
		t.Fatalf("outcome in another namespace: %v", st)
	}
	if st, _ := s.Publisher().Commit(other.ID, wid, pageSize, sum); st != CommitUnknownWrite {
		t.Fatalf("commit in another namespace: %v", st)
	}
	if err := s.Publisher().Write(other.ID, wid, 0, data); !errors.Is(err, ErrUnknownWrite) {
		t.Fatalf("write in another namespace: %v", err)
	}
	if err := s.Publisher().Write(testNS.ID, wid, 0, data); !errors.Is(err, ErrWriteClosed) {
		t.Fatalf("write in its namespace: %v", err)
	}
}
