package frame

import "fmt"

// The numbers of SPEC.md §2, §3 and §6. Each table's names are the spec's;
// frame_test.go checks both against it.

// Op codes (SPEC.md §2).
const (
	OpHello     = 1
	OpWelcome   = 2
	OpError     = 3
	OpGet       = 4
	OpGetOK     = 5
	OpReserve   = 6
	OpReserveOK = 7
	OpCommit    = 8
	OpCommitOK  = 9
	OpAbort     = 10
	OpAbortOK   = 11
	OpServed    = 12
	OpRead      = 13
	OpPage      = 14
	OpWrite     = 15
	OpPut       = 16 // since version 3
	OpPutOK     = 17 // since version 3
	OpLookup    = 18 // since version 3
	OpLookupOK  = 19 // since version 3
	OpSlotPut   = 20 // since version 4
	OpSlotPutOK = 21 // since version 4
)

// Page statuses in GetOK (SPEC.md §3).
const (
	PageMissing = 0
	PageMapped  = 1
	PageElse    = 2
)

// Reserve statuses in ReserveOK and PutOK (SPEC.md §3).
const (
	SlotReserved = 1
	SlotExists   = 2
	SlotRejected = 3
)

// Commit statuses in CommitOK and PutOK (SPEC.md §3): the gRPC
// CommitStatus numbers, 9 (rejected) never sent in a frame.
const (
	CommitCommitted        = 1
	CommitExists           = 2
	CommitChecksumMismatch = 3
	CommitSizeMismatch     = 4
	CommitIncomplete       = 5
	CommitUnknownWrite     = 6
	CommitExpired          = 7
	CommitAborted          = 8
	CommitFailed           = 10
)

// Code says why a request failed, in an Error frame (SPEC.md §6).
type Code uint16

// Error codes.
const (
	CodeInternal Code = iota + 1
	CodeBadRequest
	CodeUnauthenticated
	CodeDenied
	CodeNamespaceNotFound
	CodeLeaseExpired
	CodeLeaseNotFound
	CodeLeaseLimit
	CodeBatchTooLarge
	CodeNoSpace
	CodeVersion
	CodeShuttingDown
	CodeWriteUnknown
	CodeWriteExpired
	CodeWriteClosed
	CodeNotAdmitted
	CodeWriteOutOfRange
	CodeQuota
)

// codeTable is SPEC.md §6 (TestSpecTables checks it against the spec):
// per code its name and the gRPC ErrorInfo reason (strata.proto) it
// corresponds to. Clients report an Error frame as a gRPC error with its
// code's reason (Reason), so the two wires cannot map one refusal apart.
var codeTable = [...]struct{ name, reason string }{
	CodeInternal:          {"INTERNAL", "INTERNAL"},
	CodeBadRequest:        {"BAD_REQUEST", "INVALID_ARGUMENT"},
	CodeUnauthenticated:   {"UNAUTHENTICATED", "UNAUTHENTICATED"},
	CodeDenied:            {"DENIED", "TENANT_DENIED"},
	CodeNamespaceNotFound: {"NAMESPACE_NOT_FOUND", "NAMESPACE_NOT_FOUND"},
	CodeLeaseExpired:      {"LEASE_EXPIRED", "LEASE_EXPIRED"},
	CodeLeaseNotFound:     {"LEASE_NOT_FOUND", "LEASE_NOT_FOUND"},
	CodeLeaseLimit:        {"LEASE_LIMIT", "LEASE_LIMIT"},
	CodeBatchTooLarge:     {"BATCH_TOO_LARGE", "BATCH_TOO_LARGE"},
	CodeNoSpace:           {"NO_SPACE", "NO_SPACE"},
	CodeVersion:           {"VERSION", "VERSION_MISMATCH"},
	CodeShuttingDown:      {"SHUTTING_DOWN", "SHUTTING_DOWN"},
	CodeWriteUnknown:      {"WRITE_UNKNOWN", "WRITE_UNKNOWN"},
	CodeWriteExpired:      {"WRITE_EXPIRED", "WRITE_EXPIRED"},
	CodeWriteClosed:       {"WRITE_CLOSED", "WRITE_CLOSED"},
	CodeNotAdmitted:       {"NOT_ADMITTED", "NOT_ADMITTED"},
	CodeWriteOutOfRange:   {"WRITE_OUT_OF_RANGE", "WRITE_OUT_OF_RANGE"},
	CodeQuota:             {"QUOTA", "QUOTA"},
}

// Codes is how many codes SPEC.md §6 lists: they are 1 to Codes.
const Codes = Code(len(codeTable) - 1)

// known reports whether the spec lists c.
func (c Code) known() bool { return c >= CodeInternal && c <= Codes }

// Reason is the gRPC ErrorInfo reason the code corresponds to (SPEC.md
// §6): INTERNAL's for a code the spec does not list, which a client treats
// as INTERNAL.
func (c Code) Reason() string {
	if !c.known() {
		c = CodeInternal
	}
	return codeTable[c].reason
}

// String is the code's name in SPEC.md §6, or "code N" for one it does
// not list (which a client treats as INTERNAL).
func (c Code) String() string {
	if c.known() {
		return codeTable[c].name
	}
	return fmt.Sprintf("code %d", uint16(c))
}
