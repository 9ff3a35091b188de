package server

import (
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// The one place the store's per-page outcomes become wire values: per
// store status its strata.v1 enum value and its frame value (proto/frame
// SPEC.md §3, which carries the same numbers).

// wire is a store status's values on the two wires; a status not in a
// table is UNSPECIFIED (0) on both.
type wire[P ~int32] struct {
	proto P
	frame uint8
}

var reserveWire = map[store.ReserveStatus]wire[pb.ReserveStatus]{
	store.Reserved: {pb.ReserveStatus_RESERVE_STATUS_RESERVED, frame.SlotReserved},
	store.Exists:   {pb.ReserveStatus_RESERVE_STATUS_EXISTS, frame.SlotExists},
	store.Rejected: {pb.ReserveStatus_RESERVE_STATUS_REJECTED, frame.SlotRejected},
}

var commitWire = map[store.CommitStatus]wire[pb.CommitStatus]{
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
func reserveProto(st store.ReserveStatus) pb.ReserveStatus { return reserveWire[st].proto }

// reserveFrame is the frame value of a reserve outcome.
func reserveFrame(st store.ReserveStatus) uint8 { return reserveWire[st].frame }

// commitProto is the strata.v1 value of a commit outcome.
func commitProto(st store.CommitStatus) pb.CommitStatus { return commitWire[st].proto }

// commitFrame is the frame value of a commit outcome.
func commitFrame(st store.CommitStatus) uint8 { return commitWire[st].frame }

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
