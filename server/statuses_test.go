package server

import (
	"strings"
	"testing"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// TestStatusesKeepTheirWireValues: every store outcome has its own wire
// value, the same on both wires, and the values are those clients of
// earlier versions read.
func TestStatusesKeepTheirWireValues(t *testing.T) {
	seen := map[pb.CommitStatus]store.CommitStatus{}
	for st := store.CommitStatus(1); !strings.HasPrefix(st.String(), "CommitStatus("); st++ {
		w := commitProto(st)
		if w == pb.CommitStatus_COMMIT_STATUS_UNSPECIFIED || w == pb.CommitStatus_COMMIT_STATUS_REJECTED {
			t.Errorf("%v: wire %v", st, w)
		}
		if prev, dup := seen[w]; dup {
			t.Errorf("%v and %v: both %v", prev, st, w)
		}
		seen[w] = st
	}
	wire := map[store.CommitStatus]int32{store.CommitCommitted: 1, store.CommitExists: 2, store.CommitChecksumMismatch: 3,
		store.CommitSizeMismatch: 4, store.CommitIncomplete: 5, store.CommitUnknownWrite: 6, store.CommitExpired: 7,
		store.CommitAborted: 8, store.CommitFailed: 10}
	if len(wire) != len(seen) {
		t.Errorf("%d store outcomes, %d pinned here", len(seen), len(wire))
	}
	for st, v := range wire {
		if got, fr := int32(commitProto(st)), int32(commitFrame(st)); got != v || fr != v {
			t.Errorf("%v: strata.v1 %d, frame %d, want %d", st, got, fr, v)
		}
	}
	for st, v := range map[store.ReserveStatus]int32{store.Reserved: 1, store.Exists: 2, store.Rejected: 3} {
		if got, fr := int32(reserveProto(st)), int32(reserveFrame(st)); got != v || fr != v {
			t.Errorf("reserve %d: strata.v1 %d, frame %d, want %d", st, got, fr, v)
		}
	}
	for _, c := range []struct {
		res  store.PutResult
		want pb.CommitStatus
	}{
		{store.PutResult{Reserve: store.Exists}, pb.CommitStatus_COMMIT_STATUS_EXISTS},
		{store.PutResult{Reserve: store.Rejected}, pb.CommitStatus_COMMIT_STATUS_REJECTED},
		{store.PutResult{Reserve: store.Reserved, Commit: store.CommitFailed}, pb.CommitStatus_COMMIT_STATUS_FAILED},
	} {
		if got := putProto(c.res); got != c.want {
			t.Errorf("%+v: %v, want %v", c.res, got, c.want)
		}
	}
}
