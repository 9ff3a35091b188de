package client

import (
	"errors"
	"fmt"

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
	// ErrProtocol is returned when a node's answer breaks the protocol.
	ErrProtocol = errors.New("protocol violation")
	// ErrUnavailable is returned when no node could answer: every node a
	// call needed failed or timed out, or the view has no alive member.
	ErrUnavailable = errors.New("no node available")
	// ErrClosed is returned by calls on a closed Cluster.
	ErrClosed = errors.New("cluster client closed")
)

var reasons = map[string]error{
	pb.ReasonLeaseExpired:      ErrLeaseExpired,
	pb.ReasonLeaseNotFound:     ErrLeaseNotFound,
	pb.ReasonNamespaceNotFound: ErrNamespaceNotFound,
	pb.ReasonTenantDenied:      ErrTenantDenied,
	pb.ReasonUnauthenticated:   ErrUnauthenticated,
	pb.ReasonVersionMismatch:   ErrVersion,
	pb.ReasonInvalidArgument:   ErrInvalid,
	pb.ReasonBatchTooLarge:     ErrBatchTooLarge,
	pb.ReasonNoSpace:           ErrNoSpace,
}

// fromRPC wraps a gRPC error with the client sentinel for its reason, so
// callers use errors.Is while the status stays reachable.
func fromRPC(op string, err error) error {
	if err == nil {
		return nil
	}
	if s, ok := reasons[pb.ReasonOf(err)]; ok {
		return fmt.Errorf("%s: %w: %w", op, s, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
