"""The raw tcp data plane: page bytes over plain TCP instead of gRPC.

A node that serves it names its address in the ``strata-raw-addr`` header
of its OpenNamespace answers; a node without it sends no header. The
framing is the node's frame protocol over TCP (proto/frame/SPEC.md; the
codec is frame.py). A connection opens with Hello (the tenant token,
scoped exactly as for gRPC) and Welcome (the node's ID and batch limit). A Read is answered by one Page frame per key, in key
order (a missing page: found 0, no data), or by one Error frame. A put is
Reserve, then the reserved pages' Write frames and the Commit in one
``sendmsg``, then CommitOK: two round trips.

The Hello says the newest version (frame.PROTOCOL_VERSION); a node that
refuses it with a VERSION error is an older one, and the session says
hello with the version below, and so on down to 2, keeping the first the
node takes. Protocol 3 adds a one-round-trip put and Lookup: a put batch
of up to ONE_CALL_MAX_PAGES pages (each at most MAX_WRITE_CHUNK bytes) is
one Put frame per page, all in one ``sendmsg``, each answered in order by
a PutOK (or by an Error frame, which leaves the connection in step); a
Lookup is one frame each way (lease id 0: no lease was taken). A node
answers these ops with an Error on a connection that said hello with 2.
Protocol 5 adds a page's cost hint to Reserve and Put (laid out by the
connection's version: an older connection's frames have none, and a
page with a hint goes over gRPC to such a node); protocol 6 adds a page's
event info (tokens, LoRA name, extra keys) alike.

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
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from . import errors as E
from . import frame as F
from ._proto import strata_pb2 as pb
from .buffers import writable_view
from .checksum import Hasher
from .frame import (ADDR_HEADER, HEADER_SIZE, MAX_FRAME, MAX_WRITE_CHUNK, MIN_PROTOCOL_VERSION, OP_COMMIT,
                    OP_COMMIT_OK, OP_ERROR, OP_HELLO, OP_LOOKUP, OP_LOOKUP_OK, OP_PAGE, OP_PUT, OP_PUT_OK, OP_READ,
                    OP_RESERVE, OP_RESERVE_OK, OP_WELCOME, OP_WRITE, PROTOCOL_VERSION, SLOT_EXISTS, SLOT_RESERVED)

__all__ = [
    "ADDR_HEADER",
    "PROTOCOL_VERSION",
    "RawConn",
    "RawSession",
    "ConnectionLost",
    "PutSpec",
    "resolve_addr",
]

# CODE_VERSION is the Error code of a handshake the node refuses for its
# version (errors.REASONS, checked against SPEC.md §6).
CODE_VERSION = E.FRAME_CODE_OF["VERSION"]
# ONE_CALL_MAX_PAGES: a put batch of at most this many pages goes as Put
# frames (one round trip) on a protocol-3 connection.
ONE_CALL_MAX_PAGES = 16
# MAX_FRAME (frame.py) bounds a frame other than a Page that the client
# reads; MAX_WRITE_CHUNK is the most data bytes in one Write frame or Put.
FRAME_HEADER = HEADER_SIZE
# _EXISTS and _REJECTED are the gRPC CommitStatus numbers a put's results
# carry for a reserve that found the page published or refused it, and
# _COMMITTED the one of a published page.
_EXISTS, _REJECTED, _COMMITTED = pb.COMMIT_STATUS_EXISTS, pb.COMMIT_STATUS_REJECTED, pb.COMMIT_STATUS_COMMITTED
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


class ConnectionLost(E.UnavailableError):
    """The raw connection failed (reset, closed, past its deadline) after a
    request was sent. ``timed_out``: it was the deadline."""

    def __init__(self, message: str, *, timed_out: bool = False, node: str = ""):
        super().__init__(message, code="DEADLINE_EXCEEDED" if timed_out else "UNAVAILABLE", node=node)
        self.timed_out = timed_out


@dataclass(slots=True)
class PutSpec:
    """One page of a Reserve or a Put: the fields the gRPC put's PageSpec
    carries (the cost hint on a connection of COST_HINT_VERSION and up, the
    event info, tokens to extra keys, of EVENT_VERSION and up)."""

    key: bytes
    parent: Optional[bytes]
    depth: int
    size: int
    chain_depth: int
    cost_hint: float = 0.0
    tokens: Sequence[int] = ()
    lora_name: str = ""
    extra_keys: bytes = b""


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


# ---- messages (frame.py has the codec) ---------------------------------------------------


def frame_header(op: int, rid: int, body_len: int) -> bytes:
    """A frame's 16-byte header for a body of body_len bytes."""
    return F.header(op, rid, body_len)


def frame(op: int, rid: int, body: bytes) -> bytes:
    """A whole frame."""
    return F.header(op, rid, len(body)) + body


def hello_body(token: str, version: int = PROTOCOL_VERSION) -> bytes:
    return F.encode_body(OP_HELLO, {"version": version, "token": token})


def put_head(ns_id: bytes, spec: PutSpec, checksum: bytes, ttl_ms: int = 0, version: int = PROTOCOL_VERSION) -> bytes:
    """A Put frame's body up to its data, at version."""
    event = F.event_info(spec.tokens, spec.lora_name, spec.extra_keys) if spec.tokens or spec.lora_name or spec.extra_keys else b""
    return F.put_head(ns_id, ttl_ms, spec.key, spec.parent or b"", spec.depth, spec.chain_depth, checksum,
                      spec.cost_hint, version, event)


def lookup_body(ns_id: bytes, keys: Sequence[bytes], lease: bool, ttl_ms: int = 0) -> bytes:
    return F.encode_body(OP_LOOKUP, {"ns": ns_id, "lease": lease, "lease_ttl_ms": ttl_ms, "keys": keys})


def reserve_body(ns_id: bytes, specs: Sequence[PutSpec], ttl_ms: int = 0, version: int = PROTOCOL_VERSION) -> bytes:
    pages = [{"key": s.key, "parent": s.parent or bytes(32), "has_parent": bool(s.parent), "depth": s.depth,
              "size": s.size, "chain_depth": s.chain_depth, "cost_hint": s.cost_hint, "tokens": list(s.tokens),
              "lora_name": s.lora_name, "extra_keys": s.extra_keys} for s in specs]
    return F.encode_body(OP_RESERVE, {"ns": ns_id, "ttl_ms": ttl_ms, "pages": pages}, version)


def commit_body(ns_id: bytes, items: Sequence[Tuple[int, int, bytes]]) -> bytes:
    return F.encode_body(OP_COMMIT, {"ns": ns_id, "items": [{"write_id": w, "size": n, "checksum": cs} for w, n, cs in items]})


def error_from_frame(op: str, body: bytes, node: str) -> E.StrataError:
    """The client exception for an Error frame answering op."""
    m = F.decode_body(OP_ERROR, body)
    return E.from_frame(op, m["code"], m["message"], node)


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
        self._tls = isinstance(sock, ssl.SSLSocket)
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
             version: int = PROTOCOL_VERSION, tls: Optional[ssl.SSLContext] = None,
             server_name: Optional[str] = None) -> "RawConn":
        """Connect and handshake saying hello with version; the Welcome must
        name node_id (when not empty) and answer a version from
        MIN_PROTOCOL_VERSION to version. Raises on any failure (a node that
        refuses the version: VersionMismatchError); the socket is then
        closed."""
        sock = socket.create_connection(addr, timeout=timeout)
        if tls is not None:  # a TLS node: the handshake first, under the dial's timeout
            try:
                sock = tls.wrap_socket(sock, server_hostname=server_name or addr[0])
            except BaseException:
                sock.close()
                raise
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
            w = F.decode_body(OP_WELCOME, body)
            got_version, welcome_node, max_batch = w["version"], w["node_id"], w["max_batch"]
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
                if self._tls:  # an SSL socket has no sendmsg: one record write per buffer
                    sent = self.sock.send(views[i])
                else:
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
        try:
            return F.parse_header(self._hdr)
        except E.ProtocolError as e:
            raise self._protocol(str(e)) from None

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
        self.send([frame(OP_READ, rid, F.read_body(ns_id, lease_id, keys))])
        sum_len = len(Hasher(algorithm).digest())  # the namespace's checksum length
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
        if n < F.PAGE_HEAD.size:
            raise self._protocol(f"read: page frame of {n} bytes")
        # The page head and the checksum the namespace's pages carry, in one
        # read that cannot reach past the frame.
        head = self.recv_exact(min(n, F.PAGE_HEAD.size + sum_len))
        index, flag, got_len = F.PAGE_HEAD.unpack_from(head)
        size = n - F.PAGE_HEAD.size - got_len
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
        return h.digest() == head[F.PAGE_HEAD.size:], None

    def put(self, ns_id: bytes, specs: Sequence[PutSpec], views: Sequence[memoryview],
            sums: Sequence[bytes]) -> List[Tuple[int, str]]:
        """One put batch: Reserve; the reserved pages' Write frames and the
        Commit in one sendmsg; CommitOK. Returns per page (commit status,
        reason), with the Reserve's Exists (2) and Rejected (9) outcomes
        mapped to the commit statuses of the same names. Raises the node's
        refusal, ConnectionLost or ProtocolError."""
        rid = self.next_id()
        self.send([frame(OP_RESERVE, rid, reserve_body(ns_id, specs, version=self.version))])
        op, body = self._answer(rid, "reserve")
        if op == OP_ERROR:
            raise error_from_frame("put", body, self.node)
        if op != OP_RESERVE_OK:
            raise self._protocol(f"reserve: answer op {op}")
        slots = [(sl["status"], sl["write_id"], sl["reason"]) for sl in F.decode_body(OP_RESERVE_OK, body)["slots"]]
        if len(slots) != len(specs):
            raise self._protocol(f"reserve: {len(slots)} answers for {len(specs)} pages")
        results: List[Tuple[int, str]] = [(0, "")] * len(specs)
        bufs: List[Any] = []
        items: List[Tuple[int, int, bytes]] = []
        opened: List[int] = []
        for i, (status, wid, reason) in enumerate(slots):
            if status == SLOT_EXISTS:
                results[i] = (_EXISTS, "")
                continue
            if status != SLOT_RESERVED:
                results[i] = (_REJECTED, reason)
                continue
            data = views[i]
            for off in range(0, len(data), MAX_WRITE_CHUNK):
                piece = data[off:off + MAX_WRITE_CHUNK]
                bufs.append(frame_header(OP_WRITE, self.next_id(), 32 + F.WRITE_HEAD.size + len(piece))
                            + ns_id + F.WRITE_HEAD.pack(wid, off))
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
        statuses = F.decode_body(OP_COMMIT_OK, body)["statuses"]
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
        if self.version < F.SINCE[OP_PUT]:
            raise E.InvalidArgumentError(f"raw put frames need protocol {F.SINCE[OP_PUT]}, the connection speaks {self.version}",
                                         node=self.node)
        first = self._ids + 1
        bufs: List[Any] = []
        for spec, data, cs in zip(specs, views, sums):
            head = put_head(ns_id, spec, cs, version=self.version)
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
            ok = F.decode_body(OP_PUT_OK, body)
            reserve, commit, reason = ok["reserve"], ok["commit"], ok["reason"]
            if reserve == SLOT_EXISTS:
                results.append((_EXISTS, ""))
            elif reserve != SLOT_RESERVED:
                results.append((_REJECTED, reason))
            else:
                results.append((commit, "" if commit == _COMMITTED else reason))
        if refused is not None:
            raise refused
        return results

    def lookup(self, ns_id: bytes, keys: Sequence[bytes], lease: bool, ttl_ms: int = 0) -> Tuple[int, int, int, int, List[bool]]:
        """One Lookup (protocol 3): (hit prefix, lease id (0: none taken),
        expires unix ms, lease pages, present per key). Raises the node's
        refusal (the connection stays usable), ConnectionLost or
        ProtocolError (it does not)."""
        if self.version < F.SINCE[OP_LOOKUP]:
            raise E.InvalidArgumentError(f"raw lookup needs protocol {F.SINCE[OP_LOOKUP]}, the connection speaks {self.version}",
                                         node=self.node)
        rid = self.next_id()
        self.send([frame(OP_LOOKUP, rid, lookup_body(ns_id, keys, lease, ttl_ms))])
        op, body = self._answer(rid, "lookup")
        if op == OP_ERROR:
            raise error_from_frame("lookup", body, self.node)
        if op != OP_LOOKUP_OK:
            raise self._protocol(f"lookup: answer op {op}")
        try:
            m = F.decode_body(OP_LOOKUP_OK, body)
            got = (m["hit_prefix"], m["lease_id"], m["expires_ms"], m["lease_pages"], m["present"])
        except E.ProtocolError as e:
            raise self._protocol(str(e)) from None
        if len(got[4]) != len(keys) or got[0] > len(keys):
            raise self._protocol(f"lookup: {len(got[4])} answers for {len(keys)} keys, hit prefix {got[0]}")
        return got


# ---- the connections to one node ---------------------------------------------------------


class RawSession:
    """The raw data plane of one node: its address and a small pool of
    handshaken connections. Safe for concurrent use."""

    def __init__(self, addr: Tuple[str, int], token: str, node_id: str, max_idle: int = MAX_IDLE,
                 tls: Optional[ssl.SSLContext] = None, server_name: Optional[str] = None):
        self.addr = addr
        self.tls = tls  # None: plaintext
        self.server_name = server_name
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
            c = self._dial(t)
        except Exception as e:
            self.last_error = e
            self._failed = time.monotonic()
            return None
        self._failed = 0.0
        self.max_batch = c.max_batch
        return c

    def _dial(self, timeout: float) -> RawConn:
        """A connection said hello with self.version and, while the node
        refuses that as a version it does not speak (an older node: an
        Error with the VERSION code, then it hangs up), with the version
        below on a new connection, down to MIN_PROTOCOL_VERSION.
        self.version keeps the one the node took, for the next dials."""
        while True:
            tried = self.version
            try:
                return RawConn.dial(self.addr, self.token, self.node_id, timeout=timeout, version=tried,
                                    tls=self.tls, server_name=self.server_name)
            except E.VersionMismatchError as e:
                if tried <= MIN_PROTOCOL_VERSION or e.code != E.FRAME_CODES[CODE_VERSION][0]:
                    raise
                with self._lock:
                    if self.version == tried:
                        self.version = tried - 1

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
