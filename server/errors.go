package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/transfer"
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
	// errNoUnregister is returned by DropNamespace asked to unregister when
	// the registry cannot delete registrations (it lacks DeleteNamespace).
	errNoUnregister = errors.New("this node's registry cannot delete namespace registrations")
)

// Errors a Snapshots implementation wraps.
var (
	// ErrNoEventStream is returned by SnapshotKeys for a namespace that
	// publishes no KV event stream on this node.
	ErrNoEventStream = errors.New("the namespace publishes no KV event stream here")
	// ErrEventsBusy is returned by SnapshotKeys when the stream's queue is
	// full, so that the dump cannot be placed in it: ask again.
	ErrEventsBusy = errors.New("the KV event stream's queue is full")
)

// mapping is the one place errors become wire errors: per sentinel the
// gRPC code and ErrorInfo reason (strata.proto documents the reasons) and
// the frame protocol's error code. The first sentinel an error wraps
// decides; context errors keep gRPC's own codes; anything else is
// INTERNAL on both wires. An error with no reason carries no ErrorInfo.
var mapping = []struct {
	err    error
	code   codes.Code
	reason string
	frame  frame.Code
}{
	{errBadRequest, codes.InvalidArgument, pb.ReasonInvalidArgument, frame.CodeBadRequest},
	{namespace.ErrInvalid, codes.InvalidArgument, pb.ReasonInvalidArgument, frame.CodeBadRequest},
	{namespace.ErrBadID, codes.InvalidArgument, pb.ReasonInvalidArgument, frame.CodeBadRequest},
	{namespace.ErrBadKey, codes.InvalidArgument, pb.ReasonInvalidArgument, frame.CodeBadRequest},
	{store.ErrBadSize, codes.InvalidArgument, pb.ReasonInvalidArgument, frame.CodeBadRequest},
	{errBatchTooLarge, codes.ResourceExhausted, pb.ReasonBatchTooLarge, frame.CodeBatchTooLarge},
	{store.ErrNamespaceNotFound, codes.NotFound, pb.ReasonNamespaceNotFound, frame.CodeNamespaceNotFound},
	{errDenied, codes.PermissionDenied, pb.ReasonTenantDenied, frame.CodeDenied},
	{errUnauthenticated, codes.Unauthenticated, pb.ReasonUnauthenticated, frame.CodeUnauthenticated},
	{errVersion, codes.FailedPrecondition, pb.ReasonVersionMismatch, frame.CodeVersion},
	{store.ErrLeaseExpired, codes.FailedPrecondition, pb.ReasonLeaseExpired, frame.CodeLeaseExpired},
	{store.ErrLeaseNotFound, codes.NotFound, pb.ReasonLeaseNotFound, frame.CodeLeaseNotFound},
	{store.ErrLeaseLimit, codes.ResourceExhausted, pb.ReasonLeaseLimit, frame.CodeLeaseLimit},
	{store.ErrNoSpace, codes.ResourceExhausted, pb.ReasonNoSpace, frame.CodeNoSpace},
	{store.ErrQuota, codes.ResourceExhausted, pb.ReasonQuota, frame.CodeQuota},
	{store.ErrNotAdmitted, codes.ResourceExhausted, pb.ReasonNotAdmitted, frame.CodeNotAdmitted},
	{store.ErrUnknownWrite, codes.NotFound, pb.ReasonWriteUnknown, frame.CodeWriteUnknown},
	{store.ErrWriteExpired, codes.FailedPrecondition, pb.ReasonWriteExpired, frame.CodeWriteExpired},
	{store.ErrWriteClosed, codes.FailedPrecondition, pb.ReasonWriteClosed, frame.CodeWriteClosed},
	{store.ErrWriteOutOfRange, codes.OutOfRange, pb.ReasonWriteOutOfRange, frame.CodeWriteOutOfRange},
	// A frame Put carries its page whole: a truncated one is malformed.
	{errTruncated, codes.Aborted, pb.ReasonTruncated, frame.CodeBadRequest},
	// The frame protocol has one "try again later" code.
	{errRegistry, codes.Unavailable, pb.ReasonRegistry, frame.CodeShuttingDown},
	{store.ErrClosed, codes.Unavailable, pb.ReasonShuttingDown, frame.CodeShuttingDown},
	// Admin only (no frame op drops namespaces): asking again will not help.
	{errNoUnregister, codes.Unimplemented, "", frame.CodeBadRequest},
	// Transfer rooms and their pins are served on gRPC alone (the pages
	// move on every plane, by ordinary gets): no frame carries these, and
	// their frame column is never sent (grpcOnly in errors_test.go).
	{store.ErrNotPresent, codes.FailedPrecondition, pb.ReasonPageNotPresent, frame.CodeBadRequest},
	{transfer.ErrRoomBusy, codes.FailedPrecondition, pb.ReasonRoomBusy, frame.CodeBadRequest},
	{transfer.ErrStaleAttempt, codes.FailedPrecondition, pb.ReasonStaleAttempt, frame.CodeBadRequest},
	{transfer.ErrNoRoom, codes.NotFound, pb.ReasonNoRoom, frame.CodeBadRequest},
	{transfer.ErrAborted, codes.Aborted, pb.ReasonTransferAborted, frame.CodeBadRequest},
	{transfer.ErrExpired, codes.DeadlineExceeded, pb.ReasonTransferExpired, frame.CodeBadRequest},
	{transfer.ErrWrongState, codes.FailedPrecondition, pb.ReasonTransferState, frame.CodeBadRequest},
	{transfer.ErrMismatch, codes.FailedPrecondition, pb.ReasonMismatch, frame.CodeBadRequest},
	{transfer.ErrPinQuota, codes.ResourceExhausted, pb.ReasonPinQuota, frame.CodeBadRequest},
	{transfer.ErrTooManyRooms, codes.ResourceExhausted, pb.ReasonTooManyRooms, frame.CodeBadRequest},
	{transfer.ErrBadRequest, codes.InvalidArgument, pb.ReasonInvalidArgument, frame.CodeBadRequest},
	{transfer.ErrClosed, codes.Unavailable, pb.ReasonShuttingDown, frame.CodeShuttingDown},
	// The KV event stream's dumps are admin calls, on gRPC alone.
	{ErrNoEventStream, codes.FailedPrecondition, "", frame.CodeBadRequest},
	{ErrEventsBusy, codes.Unavailable, "", frame.CodeShuttingDown},
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
	code, reason := grpcCode(err)
	st := status.New(code, err.Error())
	if reason != "" {
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: pb.ErrorDomain}); derr == nil {
			st = d
		}
	}
	return st.Err()
}

// grpcCode is the gRPC code and reason of err.
func grpcCode(err error) (codes.Code, string) {
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled, ""
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, ""
	}
	if i := mapped(err); i >= 0 {
		return mapping[i].code, mapping[i].reason
	}
	return codes.Internal, pb.ReasonInternal
}

// withStatus is a copy of d whose handlers return their errors as
// toStatus makes them: the gRPC handlers return plain errors, mapped here
// once. An interceptor sees the status.
func withStatus(d *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *d
	out.Methods = slices.Clone(d.Methods)
	for i := range out.Methods {
		h := d.Methods[i].Handler
		out.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			if icpt == nil {
				resp, err := h(srv, ctx, dec, nil)
				return resp, toStatus(err)
			}
			return h(srv, ctx, dec, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
				return icpt(ctx, req, info, func(ctx context.Context, req any) (any, error) {
					resp, err := next(ctx, req)
					return resp, toStatus(err)
				})
			})
		}
	}
	out.Streams = slices.Clone(d.Streams)
	for i := range out.Streams {
		h := d.Streams[i].Handler
		out.Streams[i].Handler = func(srv any, stream grpc.ServerStream) error { return toStatus(h(srv, stream)) }
	}
	return &out
}

// frameError is the Error frame that answers a request refused with err.
func frameError(err error) *frame.Error {
	code := frame.CodeInternal
	if i := mapped(err); i >= 0 {
		code = mapping[i].frame
	}
	return &frame.Error{Code: code, Message: err.Error()}
}

// mapped is the index in mapping of the first sentinel err wraps, or -1.
func mapped(err error) int {
	for i, m := range mapping {
		if errors.Is(err, m.err) {
			return i
		}
	}
	return -1
}

func badRequest(format string, args ...any) error {
	return errorf(errBadRequest, format, args...)
}

// errorf formats a message and wraps sentinel.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)
}
