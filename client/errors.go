package client

import (
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
)

// errNotAdmitted marks a node's refusal of pages it values below what it
// holds (docs/design.md §5.4): the node is healthy and the pages spill to their next
// placement candidate, as for ErrNoSpace.
var errNotAdmitted = errors.New("not admitted")

// refusals is the client's one error table: each row maps a node's refusal,
// as a gRPC status reason and as a frame error code (the raw and shm
// planes), to the client sentinel callers test with errors.Is. A refusal
// without a row (INTERNAL, LEASE_LIMIT, the write errors) keeps its status
// or frame error, unwrapped by a sentinel, on either plane.
var refusals = []struct {
	reason string
	code   frame.Code // 0: no frame code
	err    error
}{
	{pb.ReasonLeaseExpired, frame.CodeLeaseExpired, ErrLeaseExpired},
	{pb.ReasonLeaseNotFound, frame.CodeLeaseNotFound, ErrLeaseNotFound},
	{pb.ReasonNamespaceNotFound, frame.CodeNamespaceNotFound, ErrNamespaceNotFound},
	{pb.ReasonTenantDenied, frame.CodeDenied, ErrTenantDenied},
	{pb.ReasonUnauthenticated, frame.CodeUnauthenticated, ErrUnauthenticated},
	{pb.ReasonVersionMismatch, frame.CodeVersion, ErrVersion},
	{pb.ReasonInvalidArgument, frame.CodeBadRequest, ErrInvalid},
	{pb.ReasonBatchTooLarge, frame.CodeBatchTooLarge, ErrBatchTooLarge},
	{pb.ReasonNoSpace, frame.CodeNoSpace, ErrNoSpace},
	{pb.ReasonQuota, frame.CodeQuota, ErrQuota},
	{pb.ReasonShuttingDown, frame.CodeShuttingDown, ErrUnavailable},
	{pb.ReasonNotAdmitted, 0, errNotAdmitted},
}

// fromRPC wraps a gRPC error with the client sentinel for its reason, so
// callers use errors.Is while the status stays reachable.
func fromRPC(op string, err error) error {
	if err == nil {
		return nil
	}
	reason := pb.ReasonOf(err)
	for _, r := range refusals {
		if reason != "" && r.reason == reason {
			return fmt.Errorf("%s: %w: %w", op, r.err, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// fromFrame converts a frame-plane answer that is not the one expected: an
// Error frame is wrapped with the sentinel for its code, anything else
// breaks the protocol.
func fromFrame(op string, m frame.Message) error {
	e, ok := m.(*frame.Error)
	if !ok {
		return fmt.Errorf("%s: unexpected answer op %d: %w", op, m.Op(), ErrProtocol)
	}
	for _, r := range refusals {
		if r.code != 0 && r.code == e.Code {
			return fmt.Errorf("%s: %w: %w", op, r.err, e)
		}
	}
	return fmt.Errorf("%s: %w", op, e)
}
