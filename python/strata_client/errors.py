"""Errors of the strata client, mapped from google.rpc.ErrorInfo reasons
(gRPC) and from the frame protocol's error codes (the raw data plane), both
through one table, REASONS.

A whole-call failure from a node is a gRPC status whose
``grpc-status-details-bin`` trailer holds a ``google.rpc.Status`` with a
``google.rpc.ErrorInfo`` detail (domain ``strata.v1``). Debian ships no
``googleapis-common-protos`` for Python, so the two messages are decoded
here by hand from the protobuf wire format (they are tiny and stable).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = [
    "StrataError",
    "InvalidArgumentError",
    "BatchTooLargeError",
    "NamespaceNotFoundError",
    "TenantDeniedError",
    "UnauthenticatedError",
    "VersionMismatchError",
    "LeaseExpiredError",
    "LeaseNotFoundError",
    "LeaseLimitError",
    "NoSpaceError",
    "UnavailableError",
    "ProtocolError",
    "ClosedError",
    "InternalError",
    "DeadlineError",
    "RoomBusyError",
    "StaleAttemptError",
    "NoRoomError",
    "TransferAbortedError",
    "TransferExpiredError",
    "TransferStateError",
    "NamespaceMismatchError",
    "PinQuotaError",
    "PageNotPresentError",
    "TooManyRoomsError",
    "ErrorInfo",
    "REASONS",
    "from_rpc",
    "from_frame",
    "exception_for_reason",
    "ForkedClientError",
    "decode_status_details",
]

ERROR_DOMAIN = "strata.v1"
_DETAILS_KEY = "grpc-status-details-bin"
_ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"


class StrataError(Exception):
    """Base of every strata client error.

    ``reason`` is the ErrorInfo reason ("" when the node sent none),
    ``code`` the gRPC status code name (e.g. "UNAVAILABLE") or "",
    ``node`` the node that answered, when known.
    """

    reason = ""

    def __init__(self, message: str, *, reason: str = "", code: str = "", node: str = "", metadata: Optional[Dict[str, str]] = None):
        super().__init__(message)
        if reason:
            self.reason = reason
        self.code = code
        self.node = node
        self.metadata = dict(metadata or {})


def _error(name: str, reason: str, doc: str, *bases: type) -> type:
    """A StrataError subclass for one reason (and the builtin bases it
    also is, so that ``except ValueError`` and the like catch it)."""
    return type(name, (StrataError,) + bases, {"reason": reason, "__doc__": doc, "__module__": __name__})


InvalidArgumentError = _error("InvalidArgumentError", "INVALID_ARGUMENT", "The request is malformed or invalid.", ValueError)
BatchTooLargeError = _error("BatchTooLargeError", "BATCH_TOO_LARGE", "More items than the node takes in one request.")
NamespaceNotFoundError = _error("NamespaceNotFoundError", "NAMESPACE_NOT_FOUND", "The namespace is not registered.")
TenantDeniedError = _error("TenantDeniedError", "TENANT_DENIED", "The tenant may not use the namespace.", PermissionError)
UnauthenticatedError = _error("UnauthenticatedError", "UNAUTHENTICATED", "Missing or unknown tenant token.", PermissionError)
VersionMismatchError = _error("VersionMismatchError", "VERSION_MISMATCH", "Client and node disagree on a version.")
LeaseExpiredError = _error("LeaseExpiredError", "LEASE_EXPIRED", "The lease expired.")
LeaseNotFoundError = _error("LeaseNotFoundError", "LEASE_NOT_FOUND", "The lease is unknown (released, or never taken).")
LeaseLimitError = _error("LeaseLimitError", "LEASE_LIMIT", "The namespace holds too many leases.")
NoSpaceError = _error("NoSpaceError", "NO_SPACE", "No tier of the node has room.")
UnavailableError = _error("UnavailableError", "UNAVAILABLE",
                          "The node could not be reached, timed out, is draining, or failed.", ConnectionError)
ProtocolError = _error("ProtocolError", "PROTOCOL", "A node's answer broke the protocol.")
ClosedError = _error("ClosedError", "CLOSED", "The client is closed.")
InternalError = _error("InternalError", "INTERNAL", "The node failed the request for a reason of its own (a bug, a "
                       "storage failure): not a refusal of the request, nor the node being unreachable.")
DeadlineError = _error("DeadlineError", "DEADLINE", "The call's own timeout passed while the node waited for the "
                       "awaited event (a room await with nothing published in time): not the node failing.",
                       TimeoutError)

# Transfer rooms (strata.proto, service Transfer; the Go client's sentinels).
RoomBusyError = _error("RoomBusyError", "ROOM_BUSY", "The room has a live attempt: it is reusable once that attempt "
                       "is acknowledged, aborted and drained, or expired.")
StaleAttemptError = _error("StaleAttemptError", "STALE_ATTEMPT", "The call names an attempt that is not the room's "
                           "current one (a late or duplicate call): it changed nothing.")
NoRoomError = _error("NoRoomError", "NO_ROOM", "The room's node holds no record of the room.")
TransferAbortedError = _error("TransferAbortedError", "TRANSFER_ABORTED", "The attempt was aborted (the message "
                              "says why): a publish after it published nothing.")
TransferExpiredError = _error("TransferExpiredError", "TRANSFER_EXPIRED", "The attempt expired: its producer never "
                              "published in time, or its pin's TTL passed before the acknowledgement.")
TransferStateError = _error("TransferStateError", "TRANSFER_STATE", "The call is not allowed in the attempt's state "
                            "(a second publish, an ack before the consumer took the pages).")
NamespaceMismatchError = _error("NamespaceMismatchError", "NAMESPACE_MISMATCH", "The consumer's namespace is not the "
                                "producer's; the message names the differing descriptor fields. The attempt is "
                                "aborted and the producer sees why: never a hit.")
PinQuotaError = _error("PinQuotaError", "PIN_QUOTA", "Pinning the published pages would take the tenant or the "
                       "node over its quota of pinned bytes.")
PageNotPresentError = _error("PageNotPresentError", "PAGE_NOT_PRESENT", "A publish names a page that is not "
                             "committed: nothing was pinned.")
TooManyRoomsError = _error("TooManyRoomsError", "TOO_MANY_ROOMS", "The room's node holds its cap of live rooms.")


# REASONS is the one table of strata's error reasons: the google.rpc
# ErrorInfo reason (strata.proto), the exception raised for it (None: none
# of its own: a gRPC error is then mapped by its status code, a frame
# error is a StrataError carrying the reason), and the frame protocol's
# error code and name for it (proto/frame/SPEC.md section 6; 0: gRPC only).
# python/tests/test_frame.py checks the codes, names and reasons against
# the spec's table, the one the Go codec (frame.Code.Reason) and so the Go
# client's error table are checked against too, and that a frame error
# and a gRPC error of the same reason raise the same exception.
REASONS = [
    ("INTERNAL", InternalError, 1, "INTERNAL"),
    ("INVALID_ARGUMENT", InvalidArgumentError, 2, "BAD_REQUEST"),
    ("UNAUTHENTICATED", UnauthenticatedError, 3, "UNAUTHENTICATED"),
    ("TENANT_DENIED", TenantDeniedError, 4, "DENIED"),
    ("NAMESPACE_NOT_FOUND", NamespaceNotFoundError, 5, "NAMESPACE_NOT_FOUND"),
    ("LEASE_EXPIRED", LeaseExpiredError, 6, "LEASE_EXPIRED"),
    ("LEASE_NOT_FOUND", LeaseNotFoundError, 7, "LEASE_NOT_FOUND"),
    ("LEASE_LIMIT", LeaseLimitError, 8, "LEASE_LIMIT"),
    ("BATCH_TOO_LARGE", BatchTooLargeError, 9, "BATCH_TOO_LARGE"),
    ("NO_SPACE", NoSpaceError, 10, "NO_SPACE"),
    ("VERSION_MISMATCH", VersionMismatchError, 11, "VERSION"),
    ("SHUTTING_DOWN", UnavailableError, 12, "SHUTTING_DOWN"),
    ("WRITE_UNKNOWN", None, 13, "WRITE_UNKNOWN"),
    ("WRITE_EXPIRED", None, 14, "WRITE_EXPIRED"),
    ("WRITE_CLOSED", None, 15, "WRITE_CLOSED"),
    ("NOT_ADMITTED", None, 16, "NOT_ADMITTED"),
    ("WRITE_OUT_OF_RANGE", None, 17, "WRITE_OUT_OF_RANGE"),
    ("QUOTA", None, 18, "QUOTA"),
    ("TRUNCATED", None, 0, ""),
    ("REGISTRY_UNAVAILABLE", UnavailableError, 0, ""),
    # Transfer rooms are served on gRPC alone (server/errors.go).
    ("PAGE_NOT_PRESENT", PageNotPresentError, 0, ""),
    ("ROOM_BUSY", RoomBusyError, 0, ""),
    ("STALE_ATTEMPT", StaleAttemptError, 0, ""),
    ("NO_ROOM", NoRoomError, 0, ""),
    ("TRANSFER_ABORTED", TransferAbortedError, 0, ""),
    ("TRANSFER_EXPIRED", TransferExpiredError, 0, ""),
    ("TRANSFER_STATE", TransferStateError, 0, ""),
    ("NAMESPACE_MISMATCH", NamespaceMismatchError, 0, ""),
    ("PIN_QUOTA", PinQuotaError, 0, ""),
    ("TOO_MANY_ROOMS", TooManyRoomsError, 0, ""),
]

_BY_REASON = {reason: cls for reason, cls, _, _ in REASONS if cls is not None}
_KNOWN = {reason for reason, _, _, _ in REASONS}
# FRAME_CODES: frame error code -> (its name, its reason); FRAME_CODE_OF:
# name -> code.


class ForkedClientError(StrataError):
    """A client (or the native library, or gRPC) used in a process forked
    from the one that set it up: make the Client in the child, and fork
    before the parent makes its first one (or start children with spawn)."""


def exception_for_reason(reason: str) -> type:
    """The exception class a refusal of reason raises (StrataError for a
    reason without its own class)."""
    return _BY_REASON.get(reason, StrataError)


FRAME_CODES = {code: (name, reason) for reason, _, code, name in REASONS if code}
FRAME_CODE_OF = {name: code for code, (name, _) in FRAME_CODES.items()}
# FRAME_INTERNAL is the code of a code the client does not know (the spec:
# treated as INTERNAL).
FRAME_INTERNAL = FRAME_CODE_OF["INTERNAL"]


def from_frame(op: str, code: int, message: str, node: str = "") -> StrataError:
    """The exception for a frame protocol Error (code, message) answering
    op: the one of the code's reason, as for a gRPC error with it."""
    name, reason = FRAME_CODES.get(code, (f"code {code}", FRAME_CODES[FRAME_INTERNAL][1]))
    cls = _BY_REASON.get(reason, StrataError)
    where = f" (node {node})" if node else ""
    return cls(f"{op}{where}: raw data plane: {name}: {message}", reason=reason, code=name, node=node)


# Status codes that mean the node itself failed rather than refused the
# request (the Go client's nodeFailed).
_NODE_FAILURE_CODES = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN", "INTERNAL", "ABORTED"}
_BY_CODE = {
    "INVALID_ARGUMENT": InvalidArgumentError,
    "PERMISSION_DENIED": TenantDeniedError,
    "UNAUTHENTICATED": UnauthenticatedError,
    "NOT_FOUND": NamespaceNotFoundError,
}


class ErrorInfo:
    __slots__ = ("reason", "domain", "metadata")

    def __init__(self, reason: str = "", domain: str = "", metadata: Optional[Dict[str, str]] = None):
        self.reason = reason
        self.domain = domain
        self.metadata = metadata or {}

    def __repr__(self) -> str:
        return f"ErrorInfo(reason={self.reason!r}, domain={self.domain!r}, metadata={self.metadata!r})"


# ---- protobuf wire decoding -------------------------------------------------


def _varint(b: bytes, i: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(b: bytes) -> Iterable[Tuple[int, int, object]]:
    """Yield (field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(b):
        tag, i = _varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated field")
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        yield num, wt, v


def _decode_error_info(b: bytes) -> ErrorInfo:
    info = ErrorInfo()
    for num, wt, v in _fields(b):
        if wt != 2:
            continue
        if num == 1:
            info.reason = bytes(v).decode("utf-8", "replace")
        elif num == 2:
            info.domain = bytes(v).decode("utf-8", "replace")
        elif num == 3:  # map<string,string> entry: 1 key, 2 value
            k = val = ""
            for n2, w2, v2 in _fields(bytes(v)):
                if w2 == 2 and n2 == 1:
                    k = bytes(v2).decode("utf-8", "replace")
                elif w2 == 2 and n2 == 2:
                    val = bytes(v2).decode("utf-8", "replace")
            info.metadata[k] = val
    return info


def decode_status_details(raw: bytes) -> Tuple[int, str, List[ErrorInfo]]:
    """Decode a serialized google.rpc.Status: (code, message, ErrorInfos)."""
    code, message, infos = 0, "", []
    for num, wt, v in _fields(bytes(raw)):
        if num == 1 and wt == 0:
            code = int(v)
        elif num == 2 and wt == 2:
            message = bytes(v).decode("utf-8", "replace")
        elif num == 3 and wt == 2:  # google.protobuf.Any
            type_url, value = "", b""
            for n2, w2, v2 in _fields(bytes(v)):
                if n2 == 1 and w2 == 2:
                    type_url = bytes(v2).decode("utf-8", "replace")
                elif n2 == 2 and w2 == 2:
                    value = bytes(v2)
            if type_url.endswith("google.rpc.ErrorInfo"):
                infos.append(_decode_error_info(value))
    return code, message, infos


def call_metadata(call: object, which: str) -> Sequence[Tuple[str, object]]:
    """A gRPC call's (or RpcError's) initial_metadata or trailing_metadata,
    empty when it has none or reading it fails."""
    try:
        return getattr(call, which)() or ()
    except Exception:
        return ()


def error_info_of(err) -> Optional[ErrorInfo]:
    """The strata ErrorInfo carried by a grpc.RpcError, if any."""
    for k, v in call_metadata(err, "trailing_metadata"):
        if k == _DETAILS_KEY:
            try:
                _, _, infos = decode_status_details(v if isinstance(v, bytes) else bytes(v))
            except Exception:
                return None
            for info in infos:
                if info.domain == ERROR_DOMAIN:
                    return info
    return None


def from_rpc(op: str, err: BaseException, node: str = "") -> StrataError:
    """Map a grpc.RpcError (or anything else) to a StrataError subclass."""
    if isinstance(err, StrataError):
        return err
    code_name = ""
    details = str(err)
    code_fn = getattr(err, "code", None)
    if callable(code_fn):
        try:
            c = code_fn()
            code_name = getattr(c, "name", str(c)) or ""
            details = err.details() or details
        except Exception:
            pass
    info = error_info_of(err) if callable(code_fn) else None
    reason = info.reason if info else ""
    where = f" (node {node})" if node else ""
    msg = f"{op}{where}: {reason or code_name or type(err).__name__}: {details}"
    cls = _BY_REASON.get(reason)
    if cls is None:
        if reason in _KNOWN:
            # A refusal with no exception of its own: a StrataError with
            # its reason, as from a frame (from_frame), whatever the status
            # code (WRITE_UNKNOWN's NOT_FOUND is no unknown namespace).
            cls = StrataError
        elif code_name in _NODE_FAILURE_CODES or not code_name:
            cls = UnavailableError
        else:
            cls = _BY_CODE.get(code_name, StrataError)
    return cls(msg, reason=reason or cls.reason, code=code_name, node=node, metadata=info.metadata if info else None)


def node_failed(err: BaseException) -> bool:
    """Whether ``err`` means the node itself is unreachable or broken, rather
    than refusing the request (then its keys are misses and it is routed
    around for a while)."""
    if isinstance(err, (UnavailableError, ProtocolError)):
        return True
    if isinstance(err, StrataError):
        return err.code in _NODE_FAILURE_CODES and err.reason not in _BY_REASON
    return True
