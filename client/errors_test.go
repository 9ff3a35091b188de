package client

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stratakv/strata/proto/frame"
)

// TestOneErrorTable: a refusal maps to the same sentinel whichever wire
// brought it: for every code of SPEC.md §6, the Error frame (the raw and
// shm planes) and the gRPC error with the code's reason wrap the same
// sentinels, or none. The frame codes' reasons are checked against the
// spec in proto/frame (TestSpecTables), as the Python client's are in
// python/tests/test_frame.py. Every row of refusals is reachable from a
// frame code.
func TestOneErrorTable(t *testing.T) {
	reached := make(map[string]bool)
	for c := frame.CodeInternal; c <= frame.Codes+1; c++ { // and one code the spec does not list
		viaFrame := fromFrame("put", &frame.Error{Code: c, Message: "refused"})
		viaRPC := fromRPC("put", reasonErr(codes.Unknown, c.Reason()))
		reached[c.Reason()] = true
		for _, r := range refusals {
			if a, b := errors.Is(viaFrame, r.err), errors.Is(viaRPC, r.err); a != b {
				t.Errorf("code %d (%s, reason %s): %v is %v over frames, %v over gRPC", c, c, c.Reason(), r.err, a, b)
			}
		}
		var fe *frame.Error
		if !errors.As(viaFrame, &fe) || fe.Code != c {
			t.Errorf("code %d: the frame error is not reachable: %v", c, viaFrame)
		}
	}
	for _, r := range refusals {
		if !reached[r.reason] {
			t.Errorf("refusal %s (%v) has no frame code", r.reason, r.err)
		}
	}
	for _, r := range roomRefusals { // gRPC alone: a frame code for one would need a row above
		if reached[r.reason] {
			t.Errorf("room refusal %s (%v) has a frame code: move it to refusals", r.reason, r.err)
		}
		if got := fromRPC("await room", reasonErr(codes.FailedPrecondition, r.reason)); !errors.Is(got, r.err) {
			t.Errorf("room refusal %s over gRPC: %v, want %v", r.reason, got, r.err)
		}
	}
	// The disagreement this table fixed: NOT_ADMITTED over a frame plane
	// spills the pages, as over gRPC.
	if !refused(fromFrame("put", &frame.Error{Code: frame.CodeNotAdmitted})) {
		t.Error("a frame NOT_ADMITTED is not a refusal that spills")
	}
}
