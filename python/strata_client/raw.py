"""The raw tcp data plane: page bytes over plain TCP instead of gRPC.

A node that serves it names its address in the ``strata-raw-addr`` header
of its OpenNamespace answers; a node without it sends no header. The
framing is the node's framed protocol over TCP, little-endian throughout:

    frame     = length u32 | op u8 | 0 u8 | 0 u16 | request id u64 | body
    Hello     = version u16 | token str
    Welcome   = version u16 | node id str | arena id u64 | arena size u64 |
                generation words u64 | max batch u32
    Error     = code u16 | message str
    Read      = ns [32] | lease u64 | n u32 | n x key [32]
    Page      = index u32 | found u8 | checksum bytes8 | data
    Reserve   = ns [32] | ttl ms u32 | n u32 |
                n x (key [32] | parent [32] | has parent u8 | depth u32 |
                     size u64 | chain depth u32)
    ReserveOK = n u32 | n x (status u8 | write id u64 | deadline ms i64 |
                mapped u8 | extent (4 x u64) | reason str)
    Write     = ns [32] | write id u64 | offset u64 | data    (one-way)
    Commit    = ns [32] | n u32 | n x (write id u64 | size u64 | checksum bytes8)
    CommitOK  = n u32 | n x status u8
    Put       = ns [32] | ttl ms u32 | key [32] | parent [32] | has parent u8 |
                depth u32 | chain depth u32 | checksum bytes8 | data   (v3)
    PutOK     = reserve status u8 | commit status u8 | reason str       (v3)
    Lookup    = ns [32] | lease u8 | lease ttl ms u32 | n u32 | n x key [32]  (v3)
    LookupOK  = hit prefix u32 | lease id u64 | expires unix ms i64 |
                lease pages u32 | n u32 | n x present u8                (v3)

    str = u16 length | bytes;  bytes8 = u8 length | bytes

``length`` counts the bytes after itself. A connection opens with Hello
(the tenant token, scoped exactly as for gRPC) and Welcome (the node's ID
and batch limit). A Read is answered by one Page frame per key, in key
order (a missing page: found 0, no data), or by one Error frame. A put is
Reserve, then the reserved pages' Write frames and the Commit in one
``sendmsg``, then CommitOK: two round trips.

Protocol 3 (the Hello says 3; a node that refuses it with a VERSION error
is an older one, and the session says hello with 2 from then on, using
only the ops above it) adds a one-round-trip put and Lookup: a put batch
of up to ONE_CALL_MAX_PAGES pages (each at most MAX_WRITE_CHUNK bytes) is
one Put frame per page, all in one ``sendmsg``, each answered in order by
a PutOK (or by an Error frame, which leaves the connection in step); a
Lookup is one frame each way (lease id 0: no lease was taken). A node
answers these ops with an Error on a connection that said hello with 2.

Page bytes are never copied on the client: a Page's data is received with
``recv_into`` straight into the caller's buffer (each segment of a
ScatterBuffer in turn) and checksummed as it arrives; a put hands the
frame headers and the caller's page views to ``sendmsg`` side by side.

Fallback (as the Go client): a node that advertises no address, a
connection that cannot be made, or a handshake the node refuses leaves
calls on gRPC (a failed dial is retried at most every ``RETRY_S``). A
connection that fails after a request was sent fails that request and is
closed, never reused.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from typing import Any, List, Optional, Sequence, Tuple

from . import errors as E
from .buffers import writable_view
from .checksum import Hasher

__all__ = [
    "ADDR_HEADER",
    "PROTOCOL_VERSION",
    "RawConn",
    "RawSession",
    "ConnectionLost",
    "PutSpec",
    "resolve_addr",
]

# ADDR_HEADER is the gRPC response header of OpenNamespace naming the
# node's raw address (host:port).
ADDR_HEADER = "strata-raw-addr"
# PROTOCOL_VERSION is the version a Hello carries and a Welcome answers.
PROTOCOL_VERSION = 3
# MIN_PROTOCOL_VERSION is the oldest version the client falls back to (a
# node that refuses PROTOCOL_VERSION); it has no Put or Lookup frames.
MIN_PROTOCOL_VERSION = 2

OP_HELLO, OP_WELCOME, OP_ERROR = 1, 2, 3
OP_RESERVE, OP_RESERVE_OK, OP_COMMIT, OP_COMMIT_OK = 6, 7, 8, 9
OP_READ, OP_PAGE, OP_WRITE = 13, 14, 15
OP_PUT, OP_PUT_OK, OP_LOOKUP, OP_LOOKUP_OK = 16, 17, 18, 19
# CODE_VERSION is the Error code of a handshake the node refuses for its version.
CODE_VERSION = 11
# ONE_CALL_MAX_PAGES: a put batch of at most this many pages goes as Put
# frames (one round trip) on a protocol-3 connection.
ONE_CALL_MAX_PAGES = 16

SLOT_RESERVED, SLOT_EXISTS, SLOT_REJECTED = 1, 2, 3

FRAME_HEADER = 16
# MAX_FRAME bounds a frame other than a Page that the client reads.
MAX_FRAME = 8 << 20
# MAX_WRITE_CHUNK is the most data bytes in one Write frame (half the
# node's default frame limit, so a Write always fits).
MAX_WRITE_CHUNK = MAX_FRAME // 2
# RETRY_S is how long after a failed dial the plane is not tried again;
# DIAL_S bounds connecting and the handshake.
RETRY_S = 5.0
DIAL_S = 0.5
# MAX_IDLE connections are kept per node; more in use at once are closed
# when returned.
MAX_IDLE = 16
# _IOV is how many buffers one sendmsg is handed (under IOV_MAX, 1024).
_IOV = 512
# _SLACK: a socket operation may wait this fraction of the time left past
# the deadline, or stop that much early, rather than reset the timeout.
_SLACK = 0.02

_TIMEVAL = struct.Struct("@ll")  # struct timeval: seconds, microseconds
_HDR = struct.Struct("<IBBHQ")  # length, op, 0, 0, request id
_PAGE_HEAD = struct.Struct("<IBB")  # index, found, checksum length
_SUM_LEN = {"crc32c": 4, "sha256": 32}  # a page's checksum length by algorithm
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_READ_HEAD = struct.Struct("<QI")  # lease, n (after the namespace)
_RESERVE_HEAD = struct.Struct("<II")  # ttl ms, n
_RESERVE_PAGE = struct.Struct("<32s32sBIQI")
_SLOT = struct.Struct("<BQqB4Q")  # status, write id, deadline, mapped, extent
_WRITE_HEAD = struct.Struct("<QQ")  # write id, offset (after the namespace)
_COMMIT_ITEM = struct.Struct("<QQ")  # write id, size (then the checksum)
_WELCOME_TAIL = struct.Struct("<QQQI")  # arena id, size, generation words, max batch
_PUT_HEAD = struct.Struct("<I32s32sBII")  # ttl ms, key, parent, has parent, depth, chain depth
_PUT_OK_HEAD = struct.Struct("<BB")  # reserve status, commit status
_LOOKUP_HEAD = struct.Struct("<BII")  # lease, lease ttl ms, n
_LOOKUP_OK_HEAD = struct.Struct("<IQqII")  # hit prefix, lease id, expires, lease pages, n

# Error codes of an Error frame.
CODE_NAMES = {
    1: "INTERNAL", 2: "BAD_REQUEST", 3: "UNAUTHENTICATED", 4: "DENIED", 5: "NAMESPACE_NOT_FOUND",
    6: "LEASE_EXPIRED", 7: "LEASE_NOT_FOUND", 8: "LEASE_LIMIT", 9: "BATCH_TOO_LARGE", 10: "NO_SPACE",
    11: "VERSION", 12: "SHUTTING_DOWN", 13: "WRITE_UNKNOWN", 14: "WRITE_EXPIRED", 15: "WRITE_CLOSED",
}
_CODE_ERRORS = {
    1: E.UnavailableError,
    2: E.InvalidArgumentError,
    3: E.UnauthenticatedError,
    4: E.TenantDeniedError,
    5: E.NamespaceNotFoundError,
    6: E.LeaseExpiredError,
    7: E.LeaseNotFoundError,
    8: E.LeaseLimitError,
    9: E.BatchTooLargeError,
    10: E.NoSpaceError,
    11: E.VersionMismatchError,
    12: E.UnavailableError,
}


class ConnectionLost(E.UnavailableError):
    """The raw connection failed (reset, closed, past its deadline) after a
    request was sent. ``timed_out``: it was the deadline."""

    def __init__(self, message: str, *, timed_out: bool = False, node: str = ""):
        super().__init__(message, code="DEADLINE_EXCEEDED" if timed_out else "UNAVAILABLE", node=node)
        self.timed_out = timed_out


class PutSpec:
    """One page of a Reserve: the fields the gRPC put's PageSpec carries
    (but the cost hint, which the frame has no room for)."""

    __slots__ = ("key", "parent", "depth", "size", "chain_depth")

    def __init__(self, key: bytes, parent: Optional[bytes], depth: int, size: int, chain_depth: int):
        self.key = key
        self.parent = parent
        self.depth = depth
        self.size = size
        self.chain_depth = chain_depth


# ---- addresses ------------------------------------------------------------------


def split_host_port(addr: str) -> Tuple[str, str]:
    """``host:port`` or ``[v6]:port`` into (host, port); ValueError if it
    is neither."""
    if addr.startswith("["):
        end = addr.find("]")
        if end < 0 or addr[end + 1:end + 2] != ":":
            raise ValueError(f"address {addr!r}")
        return addr[1:end], addr[end + 2:]
    host, sep, port = addr.rpartition(":")
    if not sep or ":" in host:
        raise ValueError(f"address {addr!r}")
    return host, port


def resolve_addr(advertised: str, grpc_addr: str) -> Optional[Tuple[str, int]]:
    """The (host, port) to dial for an advertised raw address: an empty or
    unspecified host (0.0.0.0, ::) means the host the client reached the
    node's gRPC at. None when the address is unusable."""
    try:
        host, port_s = split_host_port(advertised.strip())
        port = int(port_s)
    except ValueError:
        return None
    if not 0 < port < 65536:
        return None
    if host in ("", "0.0.0.0", "::", "0:0:0:0:0:0:0:0"):
        try:
            host = split_host_port(grpc_addr)[0]
        except ValueError:
            return None
    return host, port


# ---- encoding -------------------------------------------------------------------


def frame_header(op: int, rid: int, body_len: int) -> bytes:
    """A frame's 16-byte header for a body of body_len bytes."""
    return _HDR.pack(FRAME_HEADER - 4 + body_len, op, 0, 0, rid)


def frame(op: int, rid: int, body: bytes) -> bytes:
    """A whole frame."""
    return frame_header(op, rid, len(body)) + body


def _str(s: bytes) -> bytes:
    s = s[:0xFFFF]
    return _U16.pack(len(s)) + s


def _bytes8(b: bytes) -> bytes:
    b = b[:0xFF]
    return bytes((len(b),)) + b


def hello_body(token: str, version: int = PROTOCOL_VERSION) -> bytes:
    return _U16.pack(version) + _str(token.encode())


def put_head(ns_id: bytes, spec: PutSpec, checksum: bytes, ttl_ms: int = 0) -> bytes:
    """A Put frame's body up to its data."""
    return ns_id + _PUT_HEAD.pack(ttl_ms, spec.key, spec.parent or bytes(32), 1 if spec.parent else 0, spec.depth,
                                  spec.chain_depth) + _bytes8(checksum)


def lookup_body(ns_id: bytes, keys: Sequence[bytes], lease: bool, ttl_ms: int = 0) -> bytes:
    return b"".join([ns_id, _LOOKUP_HEAD.pack(1 if lease else 0, ttl_ms, len(keys))] + list(keys))


def read_body(ns_id: bytes, lease_id: int, keys: Sequence[bytes]) -> bytes:
    return b"".join([ns_id, _READ_HEAD.pack(lease_id, len(keys))] + list(keys))


def reserve_body(ns_id: bytes, specs: Sequence[PutSpec], ttl_ms: int = 0) -> bytes:
    parts = [ns_id, _RESERVE_HEAD.pack(ttl_ms, len(specs))]
    for s in specs:
        parts.append(_RESERVE_PAGE.pack(s.key, s.parent or bytes(32), 1 if s.parent else 0, s.depth, s.size, s.chain_depth))
    return b"".join(parts)


def commit_body(ns_id: bytes, items: Sequence[Tuple[int, int, bytes]]) -> bytes:
    parts = [ns_id, _U32.pack(len(items))]
    for wid, size, cs in items:
        parts.append(_COMMIT_ITEM.pack(wid, size) + _bytes8(cs))
    return b"".join(parts)


# ---- decoding -------------------------------------------------------------------


class _Body:
    """A frame body read front to back; any overrun is a ProtocolError."""

    __slots__ = ("b", "i", "what")

    def __init__(self, b: bytes, what: str):
        self.b, self.i, self.what = b, 0, what

    def take(self, n: int) -> bytes:
        if self.i + n > len(self.b):
            raise E.ProtocolError(f"raw {self.what}: truncated frame ({len(self.b)} bytes)")
        p = self.b[self.i:self.i + n]
        self.i += n
        return p

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self.take(st.size))

    def str(self) -> str:
        (n,) = self.unpack(_U16)
        return self.take(n).decode("utf-8", "replace")

    def done(self) -> None:
        if self.i != len(self.b):
            raise E.ProtocolError(f"raw {self.what}: {len(self.b) - self.i} trailing bytes")


def parse_welcome(body: bytes) -> Tuple[int, str, int]:
    """(version, node id, max batch) of a Welcome."""
    r = _Body(body, "welcome")
    (version,) = r.unpack(_U16)
    node_id = r.str()
    _, _, _, max_batch = r.unpack(_WELCOME_TAIL)
    r.done()
    return version, node_id, max_batch


def parse_error(body: bytes) -> Tuple[int, str]:
    """(code, message) of an Error frame."""
    r = _Body(body, "error")
    (code,) = r.unpack(_U16)
    msg = r.str()
    r.done()
    return code, msg


def parse_reserve_ok(body: bytes) -> List[Tuple[int, int, str]]:
    """(status, write id, reason) per page of a ReserveOK."""
    r = _Body(body, "reserve")
    (n,) = r.unpack(_U32)
    if n > len(body) // (_SLOT.size + 2):
        raise E.ProtocolError(f"raw reserve: {n} slots in {len(body)} bytes")
    out = []
    for _ in range(n):
        status, wid, _, _, _, _, _, _ = r.unpack(_SLOT)
        out.append((status, wid, r.str()))
    r.done()
    return out


def parse_commit_ok(body: bytes) -> List[int]:
    """The commit status per item of a CommitOK."""
    r = _Body(body, "commit")
    (n,) = r.unpack(_U32)
    out = list(r.take(n))
    r.done()
    return out


def parse_put_ok(body: bytes) -> Tuple[int, int, str]:
    """(reserve status, commit status, reason) of a PutOK."""
    r = _Body(body, "put")
    reserve, commit = r.unpack(_PUT_OK_HEAD)
    reason = r.str()
    r.done()
    return reserve, commit, reason


def parse_lookup_ok(body: bytes) -> Tuple[int, int, int, int, List[bool]]:
    """(hit prefix, lease id, expires unix ms, lease pages, present) of a
    LookupOK."""
    r = _Body(body, "lookup")
    hit, lease_id, expires, pages, n = r.unpack(_LOOKUP_OK_HEAD)
    present = r.take(n)
    if any(v > 1 for v in present):
        raise E.ProtocolError("raw lookup: present flag not 0 or 1")
    r.done()
    return hit, lease_id, expires, pages, [bool(v) for v in present]


def error_from_frame(op: str, body: bytes, node: str) -> E.StrataError:
    """The client exception for an Error frame answering op."""
    code, msg = parse_error(body)
    name = CODE_NAMES.get(code, f"code {code}")
    cls = _CODE_ERRORS.get(code, E.StrataError)
    reason = cls.reason if cls is not E.StrataError else name
    where = f" (node {node})" if node else ""
    return cls(f"{op}{where}: raw data plane: {name}: {msg}", reason=reason, code=name, node=node)


# ---- destinations -----------------------------------------------------------------


def dest_views(dest: Any, size: int) -> List[memoryview]:
    """The writable views a page of size bytes is received into: a flat
    destination's first size bytes, or a ScatterBuffer's segments cut to
    size."""
    segs = getattr(dest, "segments", None)
    if segs is None:
        mv = getattr(dest, "mv", None)
        if mv is None:
            mv = writable_view(dest)
        return [mv[:size]]
    out = []
    left = size
    for s in segs:
        if left <= 0:
            break
        out.append(s[:left])
        left -= len(out[-1])
    return out


# ---- one connection ---------------------------------------------------------------


class RawConn:
    """One raw connection after its handshake. Not safe for concurrent use:
    a RawSession lends it to one call at a time. ``broken`` is set when it
    cannot be used again (then it is closed, not pooled)."""

    def __init__(self, sock: socket.socket, node: str = "", max_batch: int = 1, version: int = PROTOCOL_VERSION):
        self.sock = sock
        self.node = node
        self.max_batch = max(1, max_batch)
        # The protocol version the Welcome answered: Put and Lookup frames
        # need 3.
        self.version = version
        self.broken = False
        self._ids = 0
        self._hdr = bytearray(FRAME_HEADER)
        self._hdr_mv = memoryview(self._hdr)
        self._end: Optional[float] = None
        # The socket blocks; the kernel bounds each operation
        # (SO_RCVTIMEO, SO_SNDTIMEO: one system call per recv or send,
        # where Python's own timeouts poll before each). _armed is the
        # bound set, 0: none.
        sock.settimeout(None)
        self._armed = 0.0
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    # -- lifecycle

    @classmethod
    def dial(cls, addr: Tuple[str, int], token: str, node_id: str, timeout: float = DIAL_S,
             version: int = PROTOCOL_VERSION) -> "RawConn":
        """Connect and handshake saying hello with version; the Welcome must
        name node_id (when not empty) and answer a version from
        MIN_PROTOCOL_VERSION to version. Raises on any failure (a node that
        refuses the version: VersionMismatchError); the socket is then
        closed."""
        sock = socket.create_connection(addr, timeout=timeout)
        c = cls(sock, node_id)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.deadline(time.monotonic() + timeout)
            rid = c.next_id()
            c.send([frame(OP_HELLO, rid, hello_body(token or "", version))])
            op, got, body = c.recv_frame()
            if op == OP_ERROR:
                raise error_from_frame("raw handshake", body, node_id)
            if op != OP_WELCOME or got != rid:
                raise E.ProtocolError(f"raw handshake: answer op {op} for request {got}, want a welcome for {rid}", node=node_id)
            got_version, welcome_node, max_batch = parse_welcome(body)
            if not MIN_PROTOCOL_VERSION <= got_version <= version:
                raise E.VersionMismatchError(f"raw handshake: node speaks version {got_version}, client {version}", node=node_id)
            c.version = got_version
            if node_id and welcome_node != node_id:
                raise E.ProtocolError(f"raw address {addr[0]}:{addr[1]} serves node {welcome_node!r}, not {node_id!r}", node=node_id)
            c.max_batch = max(1, max_batch)
        except BaseException:
            c.close()
            raise
        return c

    def close(self) -> None:
        self.broken = True
        try:
            self.sock.close()
        except OSError:
            pass

    def idle_ok(self) -> bool:
        """Whether an idle connection is still open: the node has neither
        closed it nor sent anything unasked (either makes it readable)."""
        try:
            return not self._poll.poll(0)
        except OSError:
            return False

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def deadline(self, end: Optional[float]) -> None:
        """Bound every following socket operation by end (monotonic
        seconds; None: no bound)."""
        self._end = end

    # -- socket I/O (any failure breaks the connection)

    def _arm(self) -> None:
        """Bound the next socket operation by the deadline. The bound (two
        system calls to change) is reset only when it is off by more than
        _SLACK of what is left."""
        if self._end is None:
            if self._armed:
                self._set_bound(0.0)
            return
        left = self._end - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed")
        if not self._armed or abs(self._armed - left) > left * _SLACK:
            self._set_bound(left)

    def _set_bound(self, seconds: float) -> None:
        """Set the kernel's bound on each recv and send (0: none)."""
        sec = int(seconds)
        usec = max(1, int((seconds - sec) * 1e6)) if seconds > 0 and sec == 0 else int((seconds - sec) * 1e6)
        tv = _TIMEVAL.pack(sec, usec)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        self._armed = seconds

    def _lost(self, what: str, e: BaseException) -> ConnectionLost:
        self.broken = True
        # A bound that expires fails the blocking call with EAGAIN.
        timed_out = isinstance(e, (socket.timeout, BlockingIOError))
        return ConnectionLost(f"raw data plane{f' (node {self.node})' if self.node else ''}: {what}: "
                              f"{'timed out' if timed_out else str(e) or type(e).__name__}", timed_out=timed_out, node=self.node)

    def _protocol(self, msg: str) -> E.ProtocolError:
        self.broken = True
        return E.ProtocolError(f"raw data plane: {msg}", node=self.node)

    def send(self, bufs: List[Any]) -> None:
        """Write every byte of bufs (bytes and memoryviews, not joined)."""
        views = [b if isinstance(b, memoryview) and b.format == "B" else memoryview(b).cast("B") for b in bufs]
        views = [v for v in views if len(v)]
        i = 0
        try:
            while i < len(views):
                self._arm()
                sent = self.sock.sendmsg(views[i:i + _IOV])
                while sent:
                    if sent >= len(views[i]):
                        sent -= len(views[i])
                        i += 1
                    else:
                        views[i] = views[i][sent:]
                        sent = 0
        except OSError as e:
            raise self._lost("sending", e) from None

    def recv_into(self, mv: memoryview, hasher: Optional[Hasher] = None) -> None:
        """Fill mv from the socket, feeding each piece to hasher."""
        got, n = 0, len(mv)
        try:
            while got < n:
                self._arm()
                k = self.sock.recv_into(mv[got:] if got else mv)
                if k == 0:
                    raise ConnectionResetError("connection closed by the node")
                if hasher is not None:
                    hasher.update(mv[got:got + k])
                got += k
        except OSError as e:
            raise self._lost(f"receiving ({got} of {n} bytes)", e) from None

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray(n)
        self.recv_into(memoryview(buf))
        return bytes(buf)

    def skip(self, n: int) -> None:
        """Read and drop n bytes (keeps the stream in step)."""
        if n <= 0:
            return
        scratch = memoryview(bytearray(min(n, 256 << 10)))
        while n > 0:
            k = min(n, len(scratch))
            self.recv_into(scratch[:k])
            n -= k

    def recv_header(self) -> Tuple[int, int, int]:
        """(body length, op, request id) of the next frame."""
        self.recv_into(self._hdr_mv)
        length, op, pad1, pad2, rid = _HDR.unpack(self._hdr)
        if length < FRAME_HEADER - 4 or pad1 or pad2:
            raise self._protocol(f"bad frame header {bytes(self._hdr).hex()}")
        return length - (FRAME_HEADER - 4), op, rid

    def recv_body(self, n: int) -> bytes:
        if n > MAX_FRAME:
            raise self._protocol(f"{n}-byte frame, the limit is {MAX_FRAME}")
        return self.recv_exact(n) if n else b""

    def recv_frame(self) -> Tuple[int, int, bytes]:
        """(op, request id, body) of the next whole frame."""
        n, op, rid = self.recv_header()
        return op, rid, self.recv_body(n)

    def _answer(self, rid: int, what: str) -> Tuple[int, bytes]:
        """The next frame, which must answer request rid: (op, body)."""
        op, got, body = self.recv_frame()
        if got != rid:
            raise self._protocol(f"{what}: answer for request {got}, want {rid}")
        return op, body

    # -- requests

    def read(self, ns_id: bytes, lease_id: int, keys: Sequence[bytes], dests: Sequence[Any], algorithm: str,
             page_bytes: int, found: List[bool], base: int = 0) -> Tuple[int, Optional[E.StrataError]]:
        """One Read: page i lands in dests[i], checksummed as it arrives,
        and found[base + i] is set once it verifies. Returns (checksum
        failures, a caller's error: a page larger than its buffer, whose
        bytes were skipped). Raises the node's refusal (an Error frame: the
        connection stays usable), ConnectionLost or ProtocolError (it does
        not)."""
        rid = self.next_id()
        self.send([frame(OP_READ, rid, read_body(ns_id, lease_id, keys))])
        sum_len = _SUM_LEN.get(algorithm, 4)
        bad = 0
        caller_err: Optional[E.StrataError] = None
        for i in range(len(keys)):
            ok, err = self._recv_page(rid, i, len(keys), dests[i], algorithm, sum_len, page_bytes, base)
            if ok:
                found[base + i] = True
            elif ok is False:
                bad += 1
            caller_err = caller_err or err
        return bad, caller_err

    def _recv_page(self, rid: int, i: int, n_keys: int, dest: Any, algorithm: str, sum_len: int, page_bytes: int,
                   base: int) -> Tuple[Optional[bool], Optional[E.StrataError]]:
        """Receive the answer for key i of Read rid into dest: (True: found
        and verified; False: found, failed its checksum; None: a miss, or
        skipped with the caller's error)."""
        n, op, got = self.recv_header()
        if got != rid:
            raise self._protocol(f"read: answer for request {got}, want {rid}")
        if op != OP_PAGE:
            body = self.recv_body(n)
            if op == OP_ERROR and i == 0:
                raise error_from_frame("get", body, self.node)
            raise self._protocol(f"read: op {op} after {i} of {n_keys} pages")
        if n < _PAGE_HEAD.size:
            raise self._protocol(f"read: page frame of {n} bytes")
        # The page head and the checksum the namespace's pages carry, in one
        # read that cannot reach past the frame.
        head = self.recv_exact(min(n, _PAGE_HEAD.size + sum_len))
        index, flag, got_len = _PAGE_HEAD.unpack_from(head)
        size = n - _PAGE_HEAD.size - got_len
        rest = n - len(head)
        if index != i:
            raise self._protocol(f"read: page {index} where {i} was due")
        if flag > 1 or size < 0 or (flag == 0 and size > 0):
            raise self._protocol(f"read: page {i}: frame of {n} bytes, {got_len}-byte checksum, found {flag}")
        if not flag:
            self.skip(rest)
            return None, None
        if size > len(dest):
            self.skip(rest)
            return None, E.InvalidArgumentError(
                f"get (node {self.node}): page {base + i} is {size} bytes, its buffer has {len(dest)}", node=self.node)
        if got_len != sum_len:  # not this namespace's checksum: cannot verify
            self.skip(rest)
            return False, None
        if size != page_bytes:  # not a page of this namespace: a miss (as over gRPC)
            self.skip(rest)
            return None, None
        h = Hasher(algorithm)
        for mv in dest_views(dest, size):
            self.recv_into(mv, h)
        return h.digest() == head[_PAGE_HEAD.size:], None

    def put(self, ns_id: bytes, specs: Sequence[PutSpec], views: Sequence[memoryview],
            sums: Sequence[bytes]) -> List[Tuple[int, str]]:
        """One put batch: Reserve; the reserved pages' Write frames and the
        Commit in one sendmsg; CommitOK. Returns per page (commit status,
        reason), with the Reserve's Exists (2) and Rejected (9) outcomes
        mapped to the commit statuses of the same names. Raises the node's
        refusal, ConnectionLost or ProtocolError."""
        rid = self.next_id()
        self.send([frame(OP_RESERVE, rid, reserve_body(ns_id, specs))])
        op, body = self._answer(rid, "reserve")
        if op == OP_ERROR:
            raise error_from_frame("put", body, self.node)
        if op != OP_RESERVE_OK:
            raise self._protocol(f"reserve: answer op {op}")
        slots = parse_reserve_ok(body)
        if len(slots) != len(specs):
            raise self._protocol(f"reserve: {len(slots)} answers for {len(specs)} pages")
        results: List[Tuple[int, str]] = [(0, "")] * len(specs)
        bufs: List[Any] = []
        items: List[Tuple[int, int, bytes]] = []
        opened: List[int] = []
        for i, (status, wid, reason) in enumerate(slots):
            if status == SLOT_EXISTS:
                results[i] = (2, "")
                continue
            if status != SLOT_RESERVED:
                results[i] = (9, reason)
                continue
            data = views[i]
            for off in range(0, len(data), MAX_WRITE_CHUNK):
                piece = data[off:off + MAX_WRITE_CHUNK]
                bufs.append(frame_header(OP_WRITE, self.next_id(), 32 + _WRITE_HEAD.size + len(piece))
                            + ns_id + _WRITE_HEAD.pack(wid, off))
                bufs.append(piece)
            items.append((wid, len(data), sums[i]))
            opened.append(i)
        if not opened:
            return results
        rid = self.next_id()
        bufs.append(frame(OP_COMMIT, rid, commit_body(ns_id, items)))
        self.send(bufs)
        op, body = self._answer(rid, "commit")
        if op == OP_ERROR:
            raise error_from_frame("put", body, self.node)
        if op != OP_COMMIT_OK:
            raise self._protocol(f"commit: answer op {op}")
        statuses = parse_commit_ok(body)
        if len(statuses) != len(opened):
            raise self._protocol(f"commit: {len(statuses)} answers for {len(opened)} pages")
        for i, st in zip(opened, statuses):
            results[i] = (st, "")
        return results

    def put_one_call(self, ns_id: bytes, specs: Sequence[PutSpec], views: Sequence[memoryview],
                     sums: Sequence[bytes]) -> List[Tuple[int, str]]:
        """One put batch in one round trip (protocol 3): a Put frame per
        page, all in one sendmsg, then a PutOK per page in order. Returns
        per page (commit status, reason) as put does: reserve Exists ->
        EXISTS (2), Rejected -> REJECTED (9) with the reason, reserved ->
        the commit status (with the reason when not committed). A page
        the node refuses with an Error frame (its answer: the connection
        stays in step) fails the call once every answer is read. Raises
        ConnectionLost or ProtocolError (the connection is then broken)."""
        if self.version < 3:
            raise E.InvalidArgumentError(f"raw put frames need protocol 3, the connection speaks {self.version}", node=self.node)
        first = self._ids + 1
        bufs: List[Any] = []
        for spec, data, cs in zip(specs, views, sums):
            head = put_head(ns_id, spec, cs)
            bufs.append(frame_header(OP_PUT, self.next_id(), len(head) + len(data)) + head)
            bufs.append(data)
        self.send(bufs)
        results: List[Tuple[int, str]] = []
        refused: Optional[E.StrataError] = None
        for i in range(len(specs)):
            op, body = self._answer(first + i, "put")
            if op == OP_ERROR:
                refused = refused or error_from_frame("put", body, self.node)
                results.append((0, ""))
                continue
            if op != OP_PUT_OK:
                raise self._protocol(f"put: answer op {op}")
            reserve, commit, reason = parse_put_ok(body)
            if reserve == SLOT_EXISTS:
                results.append((2, ""))
            elif reserve != SLOT_RESERVED:
                results.append((9, reason))
            else:
                results.append((commit, "" if commit == 1 else reason))
        if refused is not None:
            raise refused
        return results

    def lookup(self, ns_id: bytes, keys: Sequence[bytes], lease: bool, ttl_ms: int = 0) -> Tuple[int, int, int, int, List[bool]]:
        """One Lookup (protocol 3): (hit prefix, lease id (0: none taken),
        expires unix ms, lease pages, present per key). Raises the node's
        refusal (the connection stays usable), ConnectionLost or
        ProtocolError (it does not)."""
        if self.version < 3:
            raise E.InvalidArgumentError(f"raw lookup needs protocol 3, the connection speaks {self.version}", node=self.node)
        rid = self.next_id()
        self.send([frame(OP_LOOKUP, rid, lookup_body(ns_id, keys, lease, ttl_ms))])
        op, body = self._answer(rid, "lookup")
        if op == OP_ERROR:
            raise error_from_frame("lookup", body, self.node)
        if op != OP_LOOKUP_OK:
            raise self._protocol(f"lookup: answer op {op}")
        try:
            got = parse_lookup_ok(body)
        except E.ProtocolError as e:
            raise self._protocol(str(e)) from None
        if len(got[4]) != len(keys) or got[0] > len(keys):
            raise self._protocol(f"lookup: {len(got[4])} answers for {len(keys)} keys, hit prefix {got[0]}")
        return got


# ---- the connections to one node ---------------------------------------------------------


class RawSession:
    """The raw data plane of one node: its address and a small pool of
    handshaken connections. Safe for concurrent use."""

    def __init__(self, addr: Tuple[str, int], token: str, node_id: str, max_idle: int = MAX_IDLE):
        self.addr = addr
        self.token = token
        self.node_id = node_id
        self.max_idle = max_idle
        self.last_error: Optional[BaseException] = None
        self.max_batch = 0  # the Welcome's, once a connection was made
        # The version the next dial says hello with: PROTOCOL_VERSION until
        # the node refuses it (an older node), then MIN_PROTOCOL_VERSION.
        self.version = PROTOCOL_VERSION
        self._failed = 0.0  # monotonic time of the last failed dial; 0: none
        self._lock = threading.Lock()
        self._idle: List[RawConn] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"RawSession({self.addr[0]}:{self.addr[1]}, node={self.node_id!r}, idle={len(self._idle)})"

    def usable(self) -> bool:
        """Whether the plane may be tried: no dial failed in the last RETRY_S."""
        f = self._failed
        return not self._closed and (f == 0.0 or time.monotonic() - f >= RETRY_S)

    def acquire(self, timeout: float = DIAL_S) -> Optional[RawConn]:
        """An idle connection, or a new one; None when none can be had (the
        caller uses gRPC). A dial that fails keeps the plane off for
        RETRY_S."""
        while True:
            with self._lock:
                if self._closed:
                    return None
                c = self._idle.pop() if self._idle else None
            if c is None:
                break
            if c.idle_ok():
                return c
            c.close()
        if not self.usable():
            return None
        t = max(0.001, min(DIAL_S, timeout))
        try:
            try:
                c = RawConn.dial(self.addr, self.token, self.node_id, timeout=t, version=self.version)
            except E.VersionMismatchError as e:
                # An older node refuses protocol 3 (Error with the VERSION
                # code, then it hangs up): say hello with 2 on a new
                # connection, and from then on.
                if self.version <= MIN_PROTOCOL_VERSION or e.code != CODE_NAMES[CODE_VERSION]:
                    raise
                c = RawConn.dial(self.addr, self.token, self.node_id, timeout=t, version=MIN_PROTOCOL_VERSION)
                self.version = MIN_PROTOCOL_VERSION
        except Exception as e:
            self.last_error = e
            self._failed = time.monotonic()
            return None
        self._failed = 0.0
        self.max_batch = c.max_batch
        return c

    def release(self, c: RawConn) -> None:
        """Return c to the pool, or close it when it broke."""
        if not c.broken:
            with self._lock:
                if not self._closed and len(self._idle) < self.max_idle:
                    self._idle.append(c)
                    return
        c.close()

    def active(self) -> bool:
        """Whether a connection can be had now (dialing one if none is idle)."""
        if not self.usable():
            return False
        c = self.acquire()
        if c is None:
            return False
        self.release(c)
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()
