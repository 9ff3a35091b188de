package stratav1

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of strata's errors.
const ErrorDomain = "strata.v1"

// Reasons carried in google.rpc.ErrorInfo, as documented in strata.proto.
const (
	ReasonInvalidArgument   = "INVALID_ARGUMENT"
	ReasonBatchTooLarge     = "BATCH_TOO_LARGE"
	ReasonNamespaceNotFound = "NAMESPACE_NOT_FOUND"
	ReasonTenantDenied      = "TENANT_DENIED"
	ReasonUnauthenticated   = "UNAUTHENTICATED"
	ReasonVersionMismatch   = "VERSION_MISMATCH"
	ReasonLeaseExpired      = "LEASE_EXPIRED"
	ReasonLeaseNotFound     = "LEASE_NOT_FOUND"
	ReasonLeaseLimit        = "LEASE_LIMIT"
	ReasonNoSpace           = "NO_SPACE"
	ReasonNotAdmitted       = "NOT_ADMITTED"
	ReasonQuota             = "QUOTA"
	ReasonWriteUnknown      = "WRITE_UNKNOWN"
	ReasonWriteExpired      = "WRITE_EXPIRED"
	ReasonWriteClosed       = "WRITE_CLOSED"
	ReasonWriteOutOfRange   = "WRITE_OUT_OF_RANGE"
	ReasonTruncated         = "TRUNCATED"
	ReasonShuttingDown      = "SHUTTING_DOWN"
	ReasonRegistry          = "REGISTRY_UNAVAILABLE"
	ReasonInternal          = "INTERNAL"
	ReasonPageNotPresent    = "PAGE_NOT_PRESENT"
	ReasonRoomBusy          = "ROOM_BUSY"
	ReasonStaleAttempt      = "STALE_ATTEMPT"
	ReasonNoRoom            = "NO_ROOM"
	ReasonTransferAborted   = "TRANSFER_ABORTED"
	ReasonTransferExpired   = "TRANSFER_EXPIRED"
	ReasonTransferState     = "TRANSFER_STATE"
	ReasonMismatch          = "NAMESPACE_MISMATCH"
	ReasonPinQuota          = "PIN_QUOTA"
	ReasonTooManyRooms      = "TOO_MANY_ROOMS"
)

// ReasonOf returns the strata ErrorInfo reason of a gRPC error, or "".
func ReasonOf(err error) string {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return ""
	}
	for _, d := range se.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}
