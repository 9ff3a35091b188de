package server

import (
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// The one place the store's per-page outcomes become wire values: per
// store status its strata.v1 enum value and its frame value (proto/frame
// SPEC.md §3, which carries the same numbers).

var reserveWire = [...]struct {
	proto pb.ReserveStatus
	frame uint8
}{
	store.Reserved: {pb.ReserveStatus_RESERVE_STATUS_RESERVED, frame.SlotReserved},
	store.Exists:   {pb.ReserveStatus_RESERVE_STATUS_EXISTS, frame.SlotExists},
	store.Rejected: {pb.ReserveStatus_RESERVE_STATUS_REJECTED, frame.SlotRejected},
}

var commitWire = [...]struct {
	proto pb.CommitStatus
	frame uint8
}{
	store.CommitCommitted:        {pb.CommitStatus_COMMIT_STATUS_COMMITTED, frame.CommitCommitted},
	store.CommitExists:           {pb.CommitStatus_COMMIT_STATUS_EXISTS, frame.CommitExists},
	store.CommitChecksumMismatch: {pb.CommitStatus_COMMIT_STATUS_CHECKSUM_MISMATCH, frame.CommitChecksumMismatch},
	store.CommitSizeMismatch:     {pb.CommitStatus_COMMIT_STATUS_SIZE_MISMATCH, frame.CommitSizeMismatch},
	store.CommitIncomplete:       {pb.CommitStatus_COMMIT_STATUS_INCOMPLETE, frame.CommitIncomplete},
	store.CommitUnknownWrite:     {pb.CommitStatus_COMMIT_STATUS_UNKNOWN_WRITE, frame.CommitUnknownWrite},
	store.CommitExpired:          {pb.CommitStatus_COMMIT_STATUS_EXPIRED, frame.CommitExpired},
	store.CommitAborted:          {pb.CommitStatus_COMMIT_STATUS_ABORTED, frame.CommitAborted},
	store.CommitFailed:           {pb.CommitStatus_COMMIT_STATUS_FAILED, frame.CommitFailed},
}

// reserveProto is the strata.v1 value of a reserve outcome.
func reserveProto(st store.ReserveStatus) pb.ReserveStatus {
	if int(st) < len(reserveWire) {
		return reserveWire[st].proto
	}
	return pb.ReserveStatus_RESERVE_STATUS_UNSPECIFIED
}

// reserveFrame is the frame value of a reserve outcome (0 for none).
func reserveFrame(st store.ReserveStatus) uint8 {
	if int(st) < len(reserveWire) {
		return reserveWire[st].frame
	}
	return 0
}

// commitProto is the strata.v1 value of a commit outcome.
func commitProto(st store.CommitStatus) pb.CommitStatus {
	if int(st) < len(commitWire) {
		return commitWire[st].proto
	}
	return pb.CommitStatus_COMMIT_STATUS_UNSPECIFIED
}

// commitFrame is the frame value of a commit outcome (0 for none).
func commitFrame(st store.CommitStatus) uint8 {
	if int(st) < len(commitWire) {
		return commitWire[st].frame
	}
	return 0
}

// putProto is the strata.v1 value of a one-call put's outcome: EXISTS or
// REJECTED when the page was not reserved, the commit outcome when it was.
func putProto(r store.PutResult) pb.CommitStatus {
	switch r.Reserve {
	case store.Reserved:
		return commitProto(r.Commit)
	case store.Exists:
		return pb.CommitStatus_COMMIT_STATUS_EXISTS
	}
	return pb.CommitStatus_COMMIT_STATUS_REJECTED
}
