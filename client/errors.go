package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

var (
	// ErrLeaseExpired is returned when the lease a call names has expired.
	ErrLeaseExpired = errors.New("lease expired")
	// ErrLeaseNotFound is returned when the lease a call names is unknown
	// (released, or granted by another node).
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrNamespaceNotFound is returned when the node does not know the
	// namespace (it was never opened there).
	ErrNamespaceNotFound = errors.New("namespace not found")
	// ErrTenantDenied is returned when the caller's tenant may not use the
	// namespace.
	ErrTenantDenied = errors.New("tenant denied")
	// ErrUnauthenticated is returned when the node does not accept the token.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrVersion is returned when client and node disagree on the protocol or
	// on the namespace ID of a descriptor.
	ErrVersion = errors.New("version mismatch")
	// ErrChecksum is returned by Get when received bytes do not match the
	// page's checksum; such a page is reported as not found.
	ErrChecksum = errors.New("page checksum mismatch")
	// ErrBufferTooSmall is returned by Get when a caller buffer is shorter
	// than the page.
	ErrBufferTooSmall = errors.New("buffer smaller than the page")
	// ErrInvalid is returned for requests the node found malformed, or the
	// client refused to send.
	ErrInvalid = errors.New("invalid request")
	// ErrBatchTooLarge is returned when a request exceeds the node's batch
	// limit.
	ErrBatchTooLarge = errors.New("batch too large")
	// ErrNoSpace is returned when the node has no room for a page.
	ErrNoSpace = errors.New("no space")
	// ErrQuota is returned when the tenant is at its quota on a node
	// (bytes, reservations or leases).
	ErrQuota = errors.New("over the tenant's quota")
	// ErrProtocol is returned when a node's answer breaks the protocol.
	ErrProtocol = errors.New("protocol violation")
	// ErrUnavailable is returned when no node could answer: every node a
	// call needed failed or timed out, or the view has no alive member.
	ErrUnavailable = errors.New("no node available")
	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = errors.New("client closed")

	// The transfer rooms' refusals (transfer.go, docs/design.md §14).

	// ErrRoomBusy is returned by OpenRoom for a room with a live attempt.
	ErrRoomBusy = errors.New("room has a live attempt")
	// ErrStaleAttempt is returned by a room call naming an attempt that is
	// not the room's current one; it changed nothing.
	ErrStaleAttempt = errors.New("stale attempt")
	// ErrNoRoom is returned when the room's node holds no record of it.
	ErrNoRoom = errors.New("no such room")
	// ErrTransferAborted is returned for an attempt that was aborted.
	ErrTransferAborted = errors.New("transfer aborted")
	// ErrTransferExpired is returned for an attempt that expired.
	ErrTransferExpired = errors.New("transfer expired")
	// ErrTransferState is returned for a room call its attempt's state
	// does not allow.
	ErrTransferState = errors.New("call not allowed in the attempt's state")
	// ErrNamespaceMismatch is returned by AwaitRoom when the consumer's
	// namespace is not the producer's; the message names the fields.
	ErrNamespaceMismatch = errors.New("namespace differs from the producer's")
	// ErrPinQuota is returned by PublishRoom over the pin quota.
	ErrPinQuota = errors.New("transfer pins over quota")
	// ErrPageNotPresent is returned by PublishRoom for a page not published.
	ErrPageNotPresent = errors.New("page not published")
)

// errNotAdmitted marks a node's refusal of pages it values below what it
// holds (docs/design.md §5.4): the node is healthy and the pages spill to their next
// placement candidate, as for ErrNoSpace.
var errNotAdmitted = errors.New("not admitted")

// refusals is the client's one error table: each row maps a node's refusal,
// by its gRPC ErrorInfo reason, to the client sentinel callers test with
// errors.Is. A frame plane's Error (raw and shm) is looked up by its
// code's reason (frame.Code.Reason, SPEC.md §6: the table the Python
// client is checked against too), so the two wires cannot map one refusal
// apart. A refusal without a row (INTERNAL, LEASE_LIMIT, the write errors)
// keeps its status or frame error, unwrapped by a sentinel, on any plane.
var refusals = []refusalRow{
	{pb.ReasonLeaseExpired, ErrLeaseExpired}, {pb.ReasonLeaseNotFound, ErrLeaseNotFound},
	{pb.ReasonNamespaceNotFound, ErrNamespaceNotFound}, {pb.ReasonTenantDenied, ErrTenantDenied},
	{pb.ReasonUnauthenticated, ErrUnauthenticated}, {pb.ReasonVersionMismatch, ErrVersion},
	{pb.ReasonInvalidArgument, ErrInvalid}, {pb.ReasonBatchTooLarge, ErrBatchTooLarge},
	{pb.ReasonNoSpace, ErrNoSpace}, {pb.ReasonQuota, ErrQuota},
	{pb.ReasonShuttingDown, ErrUnavailable}, {pb.ReasonNotAdmitted, errNotAdmitted},
}

// roomRefusals are the refusals of the transfer rooms' calls, which go on
// gRPC alone (docs/design.md §14): no frame code carries them.
var roomRefusals = []refusalRow{
	{pb.ReasonRoomBusy, ErrRoomBusy}, {pb.ReasonStaleAttempt, ErrStaleAttempt}, {pb.ReasonNoRoom, ErrNoRoom},
	{pb.ReasonTransferAborted, ErrTransferAborted}, {pb.ReasonTransferExpired, ErrTransferExpired},
	{pb.ReasonTransferState, ErrTransferState}, {pb.ReasonMismatch, ErrNamespaceMismatch},
	{pb.ReasonPinQuota, ErrPinQuota}, {pb.ReasonPageNotPresent, ErrPageNotPresent},
	{pb.ReasonTooManyRooms, ErrQuota},
}

// refusalRow maps a refusal's reason to its sentinel.
type refusalRow struct {
	reason string
	err    error
}

// refusalTables are both tables, looked up in order.
var refusalTables = [...][]refusalRow{refusals, roomRefusals}

// refusal is the sentinel of a refusal's reason, nil for none.
func refusal(reason string) error {
	for _, table := range refusalTables {
		for _, r := range table {
			if reason != "" && r.reason == reason {
				return r.err
			}
		}
	}
	return nil
}

// fromRPC wraps a gRPC error with the client sentinel for its reason, so
// callers use errors.Is while the status stays reachable.
func fromRPC(op string, err error) error {
	if err == nil {
		return nil
	}
	if s := refusal(pb.ReasonOf(err)); s != nil {
		return fmt.Errorf("%s: %w: %w", op, s, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// fromFrame converts a frame-plane answer that is not the one expected: an
// Error frame is wrapped with the sentinel of its code's reason, as the
// gRPC error with that reason is; anything else breaks the protocol.
func fromFrame(op string, m frame.Message) error {
	e, ok := m.(*frame.Error)
	if !ok {
		return fmt.Errorf("%s: unexpected answer op %d: %w", op, m.Op(), ErrProtocol)
	}
	if s := refusal(e.Code.Reason()); s != nil {
		return fmt.Errorf("%s: %w: %w", op, s, e)
	}
	return fmt.Errorf("%s: %w", op, e)
}

// Reason is the refusal reason (strata.proto's ErrorInfo reasons, e.g.
// "LEASE_EXPIRED") of the first client sentinel err wraps, else
// "DEADLINE" for a context's deadline, "CLOSED" for ErrClosed, "PROTOCOL"
// for ErrProtocol, "CHECKSUM" for ErrChecksum (pages that did not verify,
// reported not found), the reason of a gRPC status it carries, and "" for
// none of them: what a caller in another language (the Python client's
// native plane) maps to its own errors.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, table := range refusalTables {
		for _, row := range table {
			if errors.Is(err, row.err) {
				return row.reason
			}
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "DEADLINE"
	case errors.Is(err, ErrClosed):
		return "CLOSED"
	case errors.Is(err, ErrProtocol):
		return "PROTOCOL"
	case errors.Is(err, ErrBufferTooSmall):
		return pb.ReasonInvalidArgument
	case errors.Is(err, ErrChecksum):
		return "CHECKSUM"
	}
	return pb.ReasonOf(err)
}
