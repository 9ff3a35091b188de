package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// Errors the server raises itself; each maps to one code and reason below.
var (
	// errBadRequest marks malformed requests.
	errBadRequest = errors.New("malformed request")
	// errBatchTooLarge marks requests over Config.MaxBatch.
	errBatchTooLarge = errors.New("batch too large")
	// errDenied marks a caller whose tenant does not own the namespace.
	errDenied = errors.New("tenant may not use this namespace")
	// errUnauthenticated marks a missing or unknown token.
	errUnauthenticated = errors.New("missing or unknown tenant token")
	// errVersion marks protocol or descriptor-encoding disagreement.
	errVersion = errors.New("version mismatch")
	// errRegistry marks a namespace that could not be registered.
	errRegistry = errors.New("namespace registry unavailable")
	// errTruncated marks a one-call put stream that ended inside a page.
	errTruncated = errors.New("put stream ended inside a page")
)

// mapping is the one place errors become gRPC codes and reasons.
var mapping = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{errBadRequest, codes.InvalidArgument, pb.ReasonInvalidArgument},
	{namespace.ErrInvalid, codes.InvalidArgument, pb.ReasonInvalidArgument},
	{namespace.ErrBadID, codes.InvalidArgument, pb.ReasonInvalidArgument},
	{namespace.ErrBadKey, codes.InvalidArgument, pb.ReasonInvalidArgument},
	{store.ErrBadSize, codes.InvalidArgument, pb.ReasonInvalidArgument},
	{errBatchTooLarge, codes.ResourceExhausted, pb.ReasonBatchTooLarge},
	{store.ErrNamespaceNotFound, codes.NotFound, pb.ReasonNamespaceNotFound},
	{errDenied, codes.PermissionDenied, pb.ReasonTenantDenied},
	{errUnauthenticated, codes.Unauthenticated, pb.ReasonUnauthenticated},
	{errVersion, codes.FailedPrecondition, pb.ReasonVersionMismatch},
	{store.ErrLeaseExpired, codes.FailedPrecondition, pb.ReasonLeaseExpired},
	{store.ErrLeaseNotFound, codes.NotFound, pb.ReasonLeaseNotFound},
	{store.ErrLeaseLimit, codes.ResourceExhausted, pb.ReasonLeaseLimit},
	{store.ErrNoSpace, codes.ResourceExhausted, pb.ReasonNoSpace},
	{store.ErrNotAdmitted, codes.ResourceExhausted, pb.ReasonNotAdmitted},
	{store.ErrUnknownWrite, codes.NotFound, pb.ReasonWriteUnknown},
	{store.ErrWriteExpired, codes.FailedPrecondition, pb.ReasonWriteExpired},
	{store.ErrWriteClosed, codes.FailedPrecondition, pb.ReasonWriteClosed},
	{store.ErrWriteOutOfRange, codes.OutOfRange, pb.ReasonWriteOutOfRange},
	{errTruncated, codes.Aborted, pb.ReasonTruncated},
	{errRegistry, codes.Unavailable, pb.ReasonRegistry},
	{store.ErrClosed, codes.Unavailable, pb.ReasonShuttingDown},
}

// toStatus converts an error to a gRPC status error with an ErrorInfo
// detail. Context errors keep their own codes; anything unmapped is Internal.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code, reason := codes.Internal, pb.ReasonInternal
	switch {
	case errors.Is(err, context.Canceled):
		code, reason = codes.Canceled, ""
	case errors.Is(err, context.DeadlineExceeded):
		code, reason = codes.DeadlineExceeded, ""
	default:
		for _, m := range mapping {
			if errors.Is(err, m.err) {
				code, reason = m.code, m.reason
				break
			}
		}
	}
	st := status.New(code, err.Error())
	if reason != "" {
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: pb.ErrorDomain}); derr == nil {
			st = d
		}
	}
	return st.Err()
}

func badRequest(format string, args ...any) error {
	return errorf(errBadRequest, format, args...)
}

// errorf formats a message and wraps sentinel.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)
}
