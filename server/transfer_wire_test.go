package server

import (
	"strings"
	"testing"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transfer"
)

// TestRoomWireNumbers: roomInfo and AbortRoom convert transfer's states
// and reasons by number, so the two enumerations must agree name by name.
func TestRoomWireNumbers(t *testing.T) {
	for st := transfer.Open; st <= transfer.Expired; st++ {
		if got := pb.RoomState(st).String(); got != "ROOM_STATE_"+strings.ToUpper(st.String()) {
			t.Errorf("state %d: transfer %s, wire %s", st, st, got)
		}
	}
	for r := transfer.UserCancel; r <= transfer.ConsumerFailure; r++ {
		if got := pb.AbortReason(r).String(); got != "ABORT_REASON_"+strings.ToUpper(r.String()) {
			t.Errorf("reason %d: transfer %s, wire %s", r, r, got)
		}
	}
}
