"""Prefill–decode transfer through the store: the room calls of
``service Transfer`` (docs/design.md §14), as the Go client's
(client/transfer.go). A producer (the prefill) puts its pages as usual,
then::

    room = c.open_room(request_id)
    ns.put_chain(keys, pages)
    c.publish_room(room, ns, keys, tokens)   # its KV blocks may go now

and the consumer (the decode), which never connects to the producer::

    g = c.await_room(request_id, ns, timeout=10)   # the attempt, its keys
    ns.get(g.keys, bufs)                           # into memory it owns
    c.ack_room(g.room)                             # the pin goes

Room calls go to the node that owns the room's key (:func:`room_key`) under
placement, which holds its record; when that node is down they fail at once
(UnavailableError) and the consumer recomputes. A refusal raises the
exception of its reason (errors.REASONS): RoomBusyError, StaleAttemptError,
NoRoomError, TransferAbortedError, TransferExpiredError,
TransferStateError, NamespaceMismatchError (naming the differing
descriptor fields), PinQuotaError, PageNotPresentError, TooManyRoomsError.
An await whose timeout passes with nothing published raises DeadlineError.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

from . import errors as E
from ._proto import strata_pb2 as pb
from ._proto import strata_pb2_grpc as pbg

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client
    from .namespace import Namespace

__all__ = ["Room", "Grant", "RoomInfo", "room_key", "ABORT_REASONS", "USER_CANCEL", "TIMEOUT", "PRODUCER_FAILURE",
           "CONSUMER_FAILURE"]

# The abort reasons, by the names the CLI and transfer.Reason use.
USER_CANCEL = "user_cancel"
TIMEOUT = "timeout"
PRODUCER_FAILURE = "producer_failure"
CONSUMER_FAILURE = "consumer_failure"
ABORT_REASONS = {
    USER_CANCEL: pb.ABORT_REASON_USER_CANCEL,
    TIMEOUT: pb.ABORT_REASON_TIMEOUT,
    PRODUCER_FAILURE: pb.ABORT_REASON_PRODUCER_FAILURE,
    CONSUMER_FAILURE: pb.ABORT_REASON_CONSUMER_FAILURE,
}
_REASON_NAMES = {v: k for k, v in ABORT_REASONS.items()}


def _state_name(v: int) -> str:
    """ROOM_STATE_PUBLISHED -> "published" (transfer.State's names)."""
    return pb.RoomState.Name(v).removeprefix("ROOM_STATE_").lower() if v in pb.RoomState.values() else f"state({v})"


def room_key(room: str) -> bytes:
    """The placement key of a room (transfer.RoomKey): its record lives on
    the node that owns this key."""
    return hashlib.sha256(b"strata transfer room\x00" + room.encode("utf-8")).digest()


@dataclass(frozen=True)
class Room:
    """One attempt at a room."""

    name: str
    attempt: int


@dataclass
class Grant:
    """What a consumer is handed: the attempt, the producer's keys in order
    (read them with the consumer's namespace, which is the producer's), and
    when their pin expires (unix ms)."""

    room: Room
    keys: List[bytes]
    tokens: int
    bytes: int
    pin_expires_unix_ms: int


@dataclass
class RoomInfo:
    """A room's record as its node reports it. ``state``: open, published,
    loading, draining, acked, aborted or expired; ``reason``: the abort
    reason's name ("" when none); ``detail``: what the abort said (for a
    consumer refused for its namespace, the differing fields)."""

    tenant: str
    room: str
    attempt: int
    state: str
    reason: str
    detail: str
    pages: int
    tokens: int
    bytes: int
    opened_unix_ms: int
    published_unix_ms: int
    done_unix_ms: int
    pin_expires_unix_ms: int
    mismatches: int
    node_id: str = ""

    @classmethod
    def from_proto(cls, m: Any, node_id: str = "") -> "RoomInfo":
        return cls(tenant=m.tenant, room=m.room, attempt=int(m.attempt), state=_state_name(m.state),
                   reason=_REASON_NAMES.get(m.reason, ""), detail=m.detail, pages=int(m.pages), tokens=int(m.tokens),
                   bytes=int(m.bytes), opened_unix_ms=int(m.opened_unix_ms), published_unix_ms=int(m.published_unix_ms),
                   done_unix_ms=int(m.done_unix_ms), pin_expires_unix_ms=int(m.pin_expires_unix_ms),
                   mismatches=int(m.mismatches), node_id=node_id)

    @property
    def terminal(self) -> bool:
        return self.state in ("acked", "aborted", "expired")


def room_call(c: "Client", room: str, op: str, fn: Callable[[Any, float], Any], timeout: Optional[float] = None,
              waits: bool = False) -> Any:
    """fn(Transfer stub, seconds) on the node that owns room's key. A node
    failure quarantines the node and raises UnavailableError; ``waits``
    (an await): its timeout passing raises DeadlineError."""
    r = c._routing()
    i = r.view.place.owner(room_key(room))
    nid = r.view.ids[i]
    t = c.node_timeout if timeout is None else max(0.001, float(timeout))
    start = time.monotonic()
    try:
        node = c._node(r, i)
        return fn(pbg.TransferStub(node.channel), t)
    except Exception as e:
        err = E.from_rpc(f"{op} {room!r}", e, nid)
        # The node ends the call at the same deadline: its reset (CANCELLED)
        # can reach the client before the client's own deadline fires.
        timed_out = err.code == "DEADLINE_EXCEEDED" or (err.code == "CANCELLED" and time.monotonic() - start >= t)
        if waits and type(err) is E.UnavailableError and timed_out:
            raise E.DeadlineError(f"{op} {room!r} (node {nid}): nothing published within {t:.3g}s", code=err.code,
                                  node=nid) from None
        if E.node_failed(err):
            c._suspect(nid)
            if not isinstance(err, E.UnavailableError):
                err = E.UnavailableError(str(err), reason=err.reason, code=err.code, node=nid)
        raise err from None


def open_room(c: "Client", room: str, timeout: Optional[float] = None) -> Room:
    resp = room_call(c, room, "open room",
                     lambda t, s: t.OpenRoom(pb.OpenRoomRequest(room=room), timeout=s, metadata=c._md), timeout)
    return Room(room, int(resp.attempt))


def publish_room(c: "Client", room: Room, ns: "Namespace", keys: Sequence[bytes], tokens: int,
                 timeout: Optional[float] = None) -> int:
    req = pb.PublishRequest(room=room.name, attempt=room.attempt, namespace_id=ns.id,
                            descriptor=ns.descriptor.to_proto(), keys=[bytes(k) for k in keys], tokens=int(tokens))
    resp = room_call(c, room.name, "publish room", lambda t, s: t.Publish(req, timeout=s, metadata=c._md), timeout)
    return int(resp.pin_expires_unix_ms)


def await_room(c: "Client", room: str, ns: "Namespace", attempt: int = 0, timeout: float = 10.0) -> Grant:
    # The client names itself (taker): its next await of a room whose
    # grant it took but never received is handed that grant again.
    req = pb.AwaitRequest(room=room, attempt=int(attempt), descriptor=ns.descriptor.to_proto(),
                          timeout_ms=max(1, int(timeout * 1000)), taker=c._taker)
    resp = room_call(c, room, "await room", lambda t, s: t.Await(req, timeout=s, metadata=c._md), timeout, waits=True)
    if bytes(resp.namespace_id) != ns.id:
        raise E.ProtocolError(f"await room {room!r}: the node handed pages of namespace {bytes(resp.namespace_id).hex()}, "
                              f"not {ns.id.hex()}")
    keys = [bytes(k) for k in resp.keys]
    for j, k in enumerate(keys):
        if len(k) != 32:
            raise E.ProtocolError(f"await room {room!r}: key {j} has {len(k)} bytes")
    return Grant(Room(room, int(resp.attempt)), keys, int(resp.tokens), int(resp.bytes), int(resp.pin_expires_unix_ms))


def ack_room(c: "Client", room: Room, timeout: Optional[float] = None) -> None:
    req = pb.AckRequest(room=room.name, attempt=room.attempt)
    room_call(c, room.name, "ack room", lambda t, s: t.Ack(req, timeout=s, metadata=c._md), timeout)


def abort_room(c: "Client", room: Room, reason: str, detail: str = "", timeout: Optional[float] = None) -> str:
    if reason not in ABORT_REASONS:
        raise E.InvalidArgumentError(f"abort room {room.name!r}: reason {reason!r} (want one of {sorted(ABORT_REASONS)})")
    req = pb.AbortRoomRequest(room=room.name, attempt=room.attempt, reason=ABORT_REASONS[reason], detail=detail)
    resp = room_call(c, room.name, "abort room", lambda t, s: t.AbortRoom(req, timeout=s, metadata=c._md), timeout)
    return _state_name(resp.state)


def room_status(c: "Client", room: str, timeout: Optional[float] = None) -> RoomInfo:
    resp = room_call(c, room, "room status",
                     lambda t, s: t.RoomStatus(pb.RoomStatusRequest(room=room), timeout=s, metadata=c._md), timeout)
    return RoomInfo.from_proto(resp.room, resp.node_id)


def list_rooms(c: "Client", tenant: str = "", timeout: Optional[float] = None) -> Dict[str, List[RoomInfo]]:
    r = c._routing()
    t = c.node_timeout if timeout is None else float(timeout)
    groups = {i: None for i, nid in enumerate(r.view.ids) if nid not in r.down}

    def one(i: int, _: Any):
        nid = r.view.ids[i]
        try:
            resp = pbg.TransferStub(c._node(r, i).channel).ListRooms(pb.ListRoomsRequest(tenant=tenant), timeout=t,
                                                                    metadata=c._md)
            return [RoomInfo.from_proto(m, nid) for m in resp.rooms], None
        except Exception as e:
            err = E.from_rpc("list rooms", e, nid)
            if E.node_failed(err):
                c._suspect(nid)
            return None, err

    res = c._fan_out(groups, one)
    out = {r.view.ids[i]: rooms for i, (rooms, _) in res.items() if rooms is not None}
    errs = [err for _, err in res.values() if err is not None]
    if not out and errs:
        for err in errs:  # a refusal says more than "unreachable"
            if not E.node_failed(err):
                raise err
        raise errs[0]
    return out
