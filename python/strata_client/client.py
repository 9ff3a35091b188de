"""The strata client: cluster routing, lookup/lease, get, put, delete.

A :class:`Client` learns the membership view from any node
(``Cluster.Members``), keeps it current in a background thread, and places
every page key with capacity-weighted rendezvous hashing over the ALIVE
members (:mod:`strata_client.placement`, bit for bit as the Go client and
the nodes). A call groups its keys by owner and fans out in parallel, one
gRPC channel per node, each node's part bounded by ``node_timeout``.

Failure model (as the Go client): a node that fails a call (unreachable,
reset, past its timeout, draining) is quarantined locally for
``quarantine`` seconds and its keys are misses -- never exceptions -- while
calls route them to their next placement candidate. A miss is always safe:
the engine recomputes. Exceptions are raised only for what the caller must
know: a malformed request, a refused tenant or token, a namespace whose ID
or page size the node computes differently (VERSION_MISMATCH), or an
expired lease named by a Get.

Every page read is verified against its checksum (CRC-32C or SHA-256) before
it is reported found; a page that fails is a miss and is counted in
``Client.stats['checksum_failures']``.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import secrets
import ssl
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import grpc

from . import errors as E
from ._proto import strata_pb2 as pb
from ._proto import strata_pb2_grpc as pbg
from .descriptor import Descriptor
from .placement import View
from .raw import RawSession, resolve_addr

if TYPE_CHECKING:  # pragma: no cover
    from .namespace import Namespace
    from .transfer import Grant, Room, RoomInfo

__all__ = ["Client", "Cluster", "Page", "PutResult", "LookupResult", "Lease", "Member", "chain_pages"]

PROTOCOL_VERSION = pb.PROTOCOL_VERSION_1

_STATUS_NAMES = {
    pb.COMMIT_STATUS_UNSPECIFIED: "UNSPECIFIED",
    pb.COMMIT_STATUS_COMMITTED: "COMMITTED",
    pb.COMMIT_STATUS_EXISTS: "EXISTS",
    pb.COMMIT_STATUS_CHECKSUM_MISMATCH: "CHECKSUM_MISMATCH",
    pb.COMMIT_STATUS_SIZE_MISMATCH: "SIZE_MISMATCH",
    pb.COMMIT_STATUS_INCOMPLETE: "INCOMPLETE",
    pb.COMMIT_STATUS_UNKNOWN_WRITE: "UNKNOWN_WRITE",
    pb.COMMIT_STATUS_EXPIRED: "EXPIRED",
    pb.COMMIT_STATUS_ABORTED: "ABORTED",
    pb.COMMIT_STATUS_REJECTED: "REJECTED",
    pb.COMMIT_STATUS_FAILED: "FAILED",
}
_MEMBER_STATES = {
    pb.MEMBER_STATE_UNSPECIFIED: "UNSPECIFIED",
    pb.MEMBER_STATE_ALIVE: "ALIVE",
    pb.MEMBER_STATE_SUSPECT: "SUSPECT",
    pb.MEMBER_STATE_DEAD: "DEAD",
    pb.MEMBER_STATE_LEFT: "LEFT",
}


# ---- public value types -----------------------------------------------------


@dataclass
class Page:
    """A page to put: its key, its bytes (exactly the namespace's page size),
    its parent key (None for the first page of a sequence), its depth (page
    index within its token sequence), an optional recompute-cost hint, and
    the depth of the deepest page of its sequence in the same put
    (``chain_depth``: put fills it in from the batch's parent links; nodes
    admit and keep a prefix page at least as they would that deepest page,
    so a full cluster does not keep a sequence's deep pages while refusing
    the prefix they need)."""

    key: bytes
    data: Any
    parent: Optional[bytes] = None
    depth: int = 0
    cost_hint: float = 0.0
    chain_depth: int = 0


@dataclass
class EventInfo:
    """What a put says of one page for the nodes' KV event stream alone
    (docs/design.md §15): the page's token ids, its LoRA adapter and the
    engine's extra keys (one msgpack value, vLLM's BlockStored.extra_keys
    entry). The BlockStored that announces the page carries them; no node
    keeps them. Every plane carries them (the frame planes from protocol
    6; a put to an older node goes over gRPC)."""

    tokens: Sequence[int] = ()
    lora_name: str = ""
    extra_keys: Optional[bytes] = None

    def to_proto(self) -> Any:
        return pb.PageEventInfo(token_ids=[int(t) for t in self.tokens], lora_name=self.lora_name,
                                extra_keys=bytes(self.extra_keys or b""))


def chain_pages(keys: Sequence[bytes], data: Sequence[Any], first_depth: int = 0, parent: Optional[bytes] = None) -> List[Page]:
    """Pages of one token sequence: each page's parent is the key before it."""
    out = []
    for i, (k, d) in enumerate(zip(keys, data)):
        out.append(Page(key=k, data=d, parent=(keys[i - 1] if i else parent), depth=first_depth + i))
    return out


def with_chain_depths(pages: List[Page]) -> List[Page]:
    """pages with each chain_depth raised to the depth of its deepest
    descendant among them (by parent keys; parents before children, as
    chain_pages orders them). Pages that change are copies."""
    at = {bytes(p.key): i for i, p in enumerate(pages)}
    out = list(pages)
    for i in range(len(out) - 1, -1, -1):
        p = out[i]
        j = at.get(bytes(p.parent)) if p.parent else None
        if j is None or j >= i:
            continue
        d = max(p.chain_depth, p.depth)
        if d > max(out[j].chain_depth, out[j].depth):
            out[j] = dataclasses.replace(out[j], chain_depth=d)
    return out


@dataclass
class PutResult:
    """Outcome of one page of a put. ``status`` is the CommitStatus name
    (COMMITTED, EXISTS, REJECTED, FAILED, ...) or UNAVAILABLE when no node
    could take the page."""

    status: str
    reason: str = ""

    @property
    def stored(self) -> bool:
        return self.status in ("COMMITTED", "EXISTS")


@dataclass
class Member:
    node_id: str
    address: str
    state: str
    weight: float
    gossip_address: str = ""


class Lease:
    """Keeps the pages of a hit prefix readable on their nodes: one node
    lease per node that holds part of the prefix. Release it when the pages
    are loaded (or let it expire)."""

    def __init__(self, ns: "Namespace", pages: int, node_leases: Dict[str, List[Tuple[int, int]]]):
        self._ns = ns
        self.pages = pages
        self._node_leases = node_leases  # node id -> [(lease id, expires unix ms)]
        self._released = False

    @property
    def expires_unix_ms(self) -> int:
        exps = [e for ls in self._node_leases.values() for _, e in ls]
        return min(exps) if exps else 0

    def lease_id_on(self, node_id: str) -> int:
        ls = self._node_leases.get(node_id)
        return ls[0][0] if ls else 0

    @property
    def node_leases(self) -> Dict[str, List[int]]:
        return {n: [i for i, _ in ls] for n, ls in self._node_leases.items()}

    def export(self) -> Tuple[int, Dict[str, List[Tuple[int, int]]]]:
        """``(pages, {node id: [(lease id, expires unix ms)]})``: what another
        process needs to read under this lease (``Namespace.adopt_lease``).
        Node leases belong to the namespace, not to a connection; whoever
        adopts them should release them (this copy then need not)."""
        return self.pages, {n: [(int(i), int(e)) for i, e in ls] for n, ls in self._node_leases.items()}

    def renew(self, ttl_ms: int = 0, timeout: Optional[float] = None) -> None:
        """Extend every node lease (0: the nodes' default). Raises
        LeaseExpiredError if one had expired."""
        self._ns._renew(self, ttl_ms, timeout)

    def release(self, timeout: Optional[float] = None) -> None:
        """End every node lease; unreachable nodes let theirs expire."""
        if self._released:
            return
        self._released = True
        self._ns._release(self, timeout)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"Lease(pages={self.pages}, nodes={sorted(self._node_leases)})"


@dataclass
class LookupResult:
    hit_prefix: int
    present: List[bool]
    lease: Optional[Lease] = None

    def __iter__(self):  # (hit_prefix, present, lease) = ns.lookup(...)
        return iter((self.hit_prefix, self.present, self.lease))


# ---- nodes --------------------------------------------------------------------


class _NSHandle:
    """A namespace opened on one node's connection."""

    __slots__ = ("max_batch", "max_chunk", "default_ttl_ms", "node_id")

    def __init__(self, resp):
        self.max_batch = max(1, int(resp.max_batch) or 1)
        self.max_chunk = max(4096, int(resp.max_chunk_bytes) or (1 << 20))
        self.default_ttl_ms = int(resp.default_lease_ttl_ms)
        self.node_id = resp.node_id


class _Node:
    def __init__(self, node_id: str, address: str, options: List[Tuple[str, Any]], tls: Optional["_TLS"] = None):
        self.id = node_id
        self.address = address
        self.tls = tls
        self.channel = _channel(address, options, tls)
        self.data = pbg.StrataStub(self.channel)
        self.admin = pbg.AdminStub(self.channel)
        self.cluster = pbg.ClusterStub(self.channel)
        self.handles: Dict[bytes, _NSHandle] = {}
        self.lock = threading.Lock()
        # The node's raw tcp data plane (raw.py), set from the header of
        # its OpenNamespace answers; None: it advertises none (or raw=False).
        self.raw: Optional[RawSession] = None

    def set_raw(self, advertised: Optional[str], token: str) -> None:
        """Record the raw address an OpenNamespace answer advertised (None:
        none). Nothing is dialed until a call needs a connection."""
        addr = resolve_addr(advertised, self.address) if advertised else None
        with self.lock:
            old = self.raw
            if old is not None and addr is not None and old.addr == addr:
                return
            tls = self.tls.raw if self.tls is not None else None
            name = self.tls.server_name if self.tls is not None else None
            self.raw = RawSession(addr, token, self.id, tls=tls, server_name=name) if addr is not None else None
        if old is not None:
            old.close()

    def close(self) -> None:
        with self.lock:
            raw, self.raw = self.raw, None
        if raw is not None:
            raw.close()
        try:
            self.channel.close()
        except Exception:
            pass


class _TLS:
    """A client's TLS files, loaded once: gRPC channel credentials and the
    raw plane's SSL context (the node's certificate verified against ca,
    the system roots without one; cert and key offered to a node that
    verifies clients)."""

    def __init__(self, ca: Optional[str], cert: Optional[str], key: Optional[str], server_name: Optional[str]):
        if bool(cert) != bool(key):
            raise ValueError("strata: a client certificate needs its key, and a key its certificate")

        def read(p: Optional[str]) -> Optional[bytes]:
            if not p:
                return None
            with open(p, "rb") as f:
                return f.read()

        self.server_name = server_name
        self.creds = grpc.ssl_channel_credentials(root_certificates=read(ca), private_key=read(key),
                                                  certificate_chain=read(cert))
        self.raw = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca or None)
        if cert:
            self.raw.load_cert_chain(cert, key)


def _channel(address: str, options: List[Tuple[str, Any]], tls: Optional[_TLS]):
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    if tls.server_name:
        options = options + [("grpc.ssl_target_name_override", tls.server_name)]
    return grpc.secure_channel(address, tls.creds, options=options)


class _View:
    def __init__(self, members: List[Member], from_node: str):
        self.members = sorted(members, key=lambda m: m.node_id)
        alive = []
        self.addr: Dict[str, str] = {}
        for m in self.members:
            if m.state != "ALIVE":
                continue
            w = m.weight
            if not (w > 0) or w == float("inf"):
                w = 1.0
            alive.append((m.node_id, w))
            self.addr[m.node_id] = m.address
        if not alive:
            raise E.UnavailableError(f"view from {from_node!r} has no alive member")
        self.place = View(alive)
        self.ids = self.place.ids
        self.from_node = from_node


class _Routing:
    """One call's snapshot of the view and of the quarantined nodes."""

    def __init__(self, view: _View, down: set):
        self.view = view
        self.down = down

    def primary(self, key: bytes) -> int:
        o = self.view.place.owner(key)
        if self.view.ids[o] not in self.down:
            return o
        for i in self.view.place.candidates(key):
            if self.view.ids[i] not in self.down:
                return i
        return o

    def candidates(self, key: bytes, exclude: Iterable[int] = ()) -> List[int]:
        ex = set(exclude)
        return [i for i in self.view.place.candidates(key) if i not in ex and self.view.ids[i] not in self.down]


class _Deadline:
    def __init__(self, timeout: Optional[float]):
        self.end = None if timeout is None else time.monotonic() + timeout

    def node(self, node_timeout: float) -> float:
        if self.end is None:
            return node_timeout
        return max(0.001, min(node_timeout, self.end - time.monotonic()))


# The process that made the first Client (and so set gRPC up): gRPC's
# channels do not survive fork() unless GRPC_ENABLE_FORK_SUPPORT is on.
_grpc_pid = 0


def _check_grpc_fork() -> None:
    """Raises ForkedClientError in a process forked from one that had made
    a Client, where gRPC would fail obscurely ("Socket operation on
    non-socket") or hang; notes this process as gRPC's otherwise."""
    global _grpc_pid
    pid = os.getpid()
    if _grpc_pid and _grpc_pid != pid and os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "").lower() not in ("1", "true"):
        raise E.ForkedClientError(
            f"strata: this process was forked from process {_grpc_pid} after it had made a strata Client; gRPC "
            "does not survive fork(): fork before the first Client, or start children with spawn (vLLM: "
            "VLLM_WORKER_MULTIPROC_METHOD=spawn)")
    _grpc_pid = pid


class Client:
    """A client of a strata cluster (one node is a cluster of one).

    ``addresses``: one ``host:port`` or a list; the view is learned from the
    first that answers. ``token``: the tenant's bearer token, if the nodes
    require one. ``node_timeout`` bounds each node's part of a call (it must
    cover the largest transfer a call makes to one node); ``quarantine`` is
    how long a failed node is routed around; ``refresh_interval`` how often
    the view is refreshed in the background (0: never).

    ``ca``, ``cert``, ``key``: PEM files. With any of them, gRPC and the raw
    plane are TLS: each node's certificate verified against ``ca`` (default
    the system roots) and ``server_name`` (default the host dialed), and
    ``cert``/``key`` offered to nodes that verify client certificates
    (mTLS). Default plaintext, which a TLS node refuses.

    ``raw``: move page bytes of Get and Put over a node's raw tcp data plane
    (raw.py) when the node advertises one, gRPC otherwise (default True;
    False keeps everything on gRPC, like the Go client's ``NoRaw``).

    ``native``: run get and put batches through the native plane
    (native.py: the Go client as a shared library, one call per batch with
    the GIL released once, same-host shared memory when the node is on this
    host). None (default): when the library loads; True: the same, and a
    warning when it cannot; False: the Python planes only.
    ``native_status()`` of ``strata_client.native`` says why it is off.
    ``shm``: let the native plane use a same-host node's shared memory
    (default True; False keeps its pages on raw tcp, as ``raw=False`` keeps
    them on gRPC).
    A client must not be used in a process forked from the one that made
    it: such calls raise ``ForkedClientError`` (make a Client in the child).
    """

    def __init__(
        self,
        addresses: Union[str, Sequence[str]],
        *,
        token: Optional[str] = None,
        node_timeout: float = 2.0,
        quarantine: float = 3.0,
        refresh_interval: float = 2.0,
        max_message_bytes: int = 64 << 20,
        max_workers: int = 32,
        connect_timeout: Optional[float] = None,
        raw: bool = True,
        ca: Optional[str] = None,
        cert: Optional[str] = None,
        key: Optional[str] = None,
        server_name: Optional[str] = None,
        native: Optional[bool] = None,
        shm: bool = True,
    ):
        _check_grpc_fork()
        if isinstance(addresses, str):
            addresses = [a for a in addresses.split(",") if a.strip()]
        self._seeds = [a.strip() for a in addresses]
        if not self._seeds:
            raise ValueError("strata: no node address")
        self.node_timeout = float(node_timeout)
        self.quarantine = float(quarantine)
        self._md = (("authorization", "Bearer " + token),) if token else None
        # Names this client to the transfer rooms (await_room's taker).
        self._taker = secrets.token_hex(16)
        self._token = token or ""
        self.raw_enabled = bool(raw)
        self._tls = _TLS(ca, cert, key, server_name) if (ca or cert or key) else None
        self._options = [
            ("grpc.max_receive_message_length", int(max_message_bytes)),
            ("grpc.max_send_message_length", int(max_message_bytes)),
            ("grpc.enable_retries", 0),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        self._lock = threading.Lock()
        self._nodes: Dict[str, _Node] = {}
        self._quarantine: Dict[str, float] = {}
        self._closed = False
        self._pool = cf.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="strata")
        self.stats: Dict[str, int] = {
            "node_failures": 0,
            "checksum_failures": 0,
            "view_refreshes": 0,
            "lease_releases_failed": 0,
            "orphan_marks_failed": 0,
            # Raw data plane: Read, Put and Lookup batches sent over it
            # (raw_put_one_calls: the put batches of them that went as Put
            # frames, one round trip, on protocol 3), and calls that went
            # to gRPC because no raw connection could be had.
            "raw_reads": 0,
            "raw_puts": 0,
            "raw_put_one_calls": 0,
            "raw_lookups": 0,
            "raw_fallbacks": 0,
            # Native plane (native.py): get and put batches and lease-less
            # lookups served by the Go client in one call, and calls that could not be
            # (buffers it cannot name, or its namespace would not open).
            "native_gets": 0,
            "native_puts": 0,
            "native_lookups": 0,
            "native_fallbacks": 0,
        }
        self._view: Optional[_View] = None
        self._refresh(_Deadline(connect_timeout if connect_timeout is not None else max(self.node_timeout, 1.0) * 2), raise_errors=True)
        self._pid = os.getpid()
        self._native = self._dial_native(native, bool(shm), ca, cert, key, server_name, connect_timeout)
        self._stop = threading.Event()
        self._refresher: Optional[threading.Thread] = None
        if refresh_interval and refresh_interval > 0:
            self._refresher = threading.Thread(target=self._refresh_loop, args=(float(refresh_interval),), name="strata-view", daemon=True)
            self._refresher.start()

    # ---- lifecycle -----------------------------------------------------------

    def _dial_native(self, want: Optional[bool], shm: bool, ca: Optional[str], cert: Optional[str],
                     key: Optional[str], server_name: Optional[str], connect_timeout: Optional[float]):
        """The native client (native.py), or None: the Python planes."""
        if want is False:
            return None
        from . import native

        lib = native.load()
        if lib is None:
            if want:
                native._log.warning("strata: native=True but the native plane is off: %s", native.native_status())
            return None
        opts = {"addrs": self._seeds, "token": self._token, "ca": ca or "", "cert": cert or "", "key": key or "",
                "server_name": server_name or "", "node_timeout_ms": int(self.node_timeout * 1000),
                "dial_timeout_ms": int((connect_timeout if connect_timeout is not None else
                                        max(self.node_timeout, 1.0) * 2) * 1000),
                "no_raw": not self.raw_enabled, "no_shm": not (self.raw_enabled and shm), "shm_verify": True}
        try:
            return native.NativeClient(lib, opts)
        except E.StrataError as e:
            native._log.error("strata: native plane off for this client, batches run in Python: %s", e)
            self.stats["native_fallbacks"] += 1
            return None

    @property
    def native_active(self) -> bool:
        """Whether get and put batches run on the native plane."""
        return self._native is not None

    def native_stats(self) -> Dict[str, Any]:
        """The native client's counters (shm_active, raw_active,
        checksum_failures, all_failed), {} without one."""
        return self._native.stats() if self._native is not None else {}

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            raise E.ForkedClientError(
                f"strata client made in process {self._pid} used in forked process {os.getpid()}: its connections "
                "belong to the parent; make a new Client in the child")

    def close(self) -> None:
        """Stop the view refresher and close every connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if getattr(self, "_native", None) is not None:
            self._native.close()
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join(timeout=self.node_timeout + 1)
        self._pool.shutdown(wait=True)
        with self._lock:
            for n in self._nodes.values():
                n.close()
            self._nodes.clear()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- raw data plane -------------------------------------------------------------

    def raw_status(self) -> Dict[str, bool]:
        """Per node the client opened a namespace on: whether Get and Put
        use its raw tcp data plane (it advertised one and a connection can
        be had now; this dials one if none is idle)."""
        with self._lock:
            nodes = list(self._nodes.values())
        out = {}
        for n in nodes:
            if not n.handles:
                continue
            s = n.raw
            out[n.id] = s is not None and s.active()
        return out

    @property
    def raw_active(self) -> bool:
        """Whether some node's raw tcp data plane is in use (raw_status)."""
        return any(self.raw_status().values())

    def _count(self, stat: str, n: int = 1) -> None:
        with self._lock:
            self.stats[stat] += n

    # ---- view ------------------------------------------------------------------

    def members(self) -> List[Member]:
        """The current view, sorted by node ID."""
        return list(self._view.members)

    def refresh(self, timeout: Optional[float] = None) -> None:
        """Fetch the view now (the background refresher does this too)."""
        self._refresh(_Deadline(timeout), raise_errors=True)

    def _refresh_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self._refresh(_Deadline(self.node_timeout), raise_errors=False)
            except Exception:
                pass

    def _refresh(self, dl: _Deadline, raise_errors: bool) -> None:
        sources: List[Tuple[str, str]] = []
        v = self._view
        if v is not None:
            down = self._down()
            sources += [(i, v.addr[i]) for i in v.ids if i not in down]
        sources += [("", a) for a in self._seeds]
        errs = []
        seen = set()
        for nid, addr in sources:
            if addr in seen:
                continue
            seen.add(addr)
            try:
                node = self._node_for(nid, addr) if nid else None
                if node is not None:
                    resp = node.cluster.Members(pb.MembersRequest(), timeout=dl.node(self.node_timeout), metadata=self._md)
                else:
                    ch = _channel(addr, self._options, self._tls)
                    try:
                        resp = pbg.ClusterStub(ch).Members(pb.MembersRequest(), timeout=dl.node(self.node_timeout), metadata=self._md)
                    finally:
                        ch.close()
                self._apply(resp)
                return
            except Exception as e:  # try the next source
                errs.append(E.from_rpc("members", e, nid or addr))
                if nid:
                    self._suspect(nid)
        if raise_errors:
            for e in errs:  # a refusal (bad token, ...) says more than "unreachable"
                if not E.node_failed(e):
                    raise e
            first = errs[0] if errs else None
            raise E.UnavailableError(f"strata: no node gave a membership view ({'; '.join(str(e) for e in errs)})") from first

    def _apply(self, resp) -> None:
        members = [
            Member(m.node_id, m.grpc_address, _MEMBER_STATES.get(m.state, str(m.state)), float(m.weight), m.gossip_address)
            for m in resp.members
        ]
        v = _View(members, resp.node_id)
        with self._lock:
            self._view = v
            self.stats["view_refreshes"] += 1
            for nid in list(self._nodes):
                if v.addr.get(nid) != self._nodes[nid].address:
                    self._nodes.pop(nid).close()

    def _node_for(self, node_id: str, address: str) -> _Node:
        with self._lock:
            if self._closed:
                raise E.ClosedError("strata: client closed")
            n = self._nodes.get(node_id)
            if n is not None and n.address == address:
                return n
            if n is not None:
                n.close()
            n = _Node(node_id, address, self._options, self._tls)
            self._nodes[node_id] = n
            return n

    def _node(self, r: _Routing, i: int) -> _Node:
        nid = r.view.ids[i]
        return self._node_for(nid, r.view.addr[nid])

    def _down(self) -> set:
        now = time.monotonic()
        with self._lock:
            for nid, until in list(self._quarantine.items()):
                if now >= until:
                    del self._quarantine[nid]
            return set(self._quarantine)

    def _suspect(self, node_id: str) -> None:
        with self._lock:
            self._quarantine[node_id] = time.monotonic() + self.quarantine
            self.stats["node_failures"] += 1

    def _routing(self) -> _Routing:
        if self._closed:
            raise E.ClosedError("strata: client closed")
        return _Routing(self._view, self._down())

    def _fan_out(self, groups: Dict[int, Any], fn: Callable[[int, Any], Any]) -> Dict[int, Any]:
        """Run fn(node index, group) for every group in parallel."""
        if not groups:
            return {}
        if len(groups) == 1:
            (i, g), = groups.items()
            return {i: fn(i, g)}
        futs = {i: self._pool.submit(fn, i, g) for i, g in groups.items()}
        return {i: f.result() for i, f in futs.items()}

    # ---- namespaces ----------------------------------------------------------

    def open(self, descriptor: Union[Descriptor, Dict[str, Any]], timeout: Optional[float] = None) -> "Namespace":  # noqa: F821
        """Open a namespace: validate the descriptor, compute its ID and page
        size, and perform the handshake with every alive node in parallel
        (a node that fails it is tried again when a call needs it). Fails
        only if no node accepts; a node that computes a different ID or
        page size answers VERSION_MISMATCH (VersionMismatchError)."""
        d = descriptor if isinstance(descriptor, Descriptor) else Descriptor.from_dict(descriptor)
        d = d.normalize()
        try:
            d.validate()
        except ValueError as e:
            raise E.InvalidArgumentError(f"open namespace: {e}") from e
        from .namespace import Namespace  # the namespace module builds on this one

        ns = Namespace(self, d)
        r = self._routing()
        dl = _Deadline(timeout)
        groups = {i: None for i in range(len(r.view.ids))}

        def hs(i, _):
            try:
                ns._handle(self._node(r, i), dl)
                return None
            except Exception as e:
                err = E.from_rpc("open namespace", e, r.view.ids[i])
                if E.node_failed(err):
                    self._suspect(r.view.ids[i])
                return err

        res = self._fan_out(groups, hs)
        errs = [e for e in res.values() if e is not None]
        if len(errs) < len(res):
            return ns
        # Prefer the error the caller must act on over plain unavailability.
        for e in errs:
            if not isinstance(e, E.UnavailableError):
                raise e
        raise errs[0]

    # ---- transfer rooms (transfer.py; docs/design.md §14) -----------------------

    def open_room(self, room: str, timeout: Optional[float] = None) -> "Room":
        """Open a new attempt at ``room`` for the producer (RoomBusyError
        while the room has a live attempt)."""
        return _transfer().open_room(self, room, timeout)

    def publish_room(self, room: "Room", ns: "Namespace", keys: Sequence[bytes], tokens: int,
                     timeout: Optional[float] = None) -> int:
        """Pin the producer's committed pages (``keys`` in order, holding
        ``tokens`` tokens, of ``ns``) for the consumer and make the attempt
        visible to it; returns when the pin expires (unix ms). Every page
        must be committed (PageNotPresentError, nothing pinned); an attempt
        aborted first publishes nothing (TransferAbortedError)."""
        return _transfer().publish_room(self, room, ns, keys, tokens, timeout)

    def await_room(self, room: str, ns: "Namespace", attempt: int = 0, timeout: float = 10.0) -> "Grant":
        """Wait at most ``timeout`` seconds (DeadlineError) until ``room``
        has a published attempt (``attempt``, or whichever comes when 0) and
        take it for the consumer, whose namespace ``ns`` must be the
        producer's: NamespaceMismatchError, naming the differing fields,
        otherwise (the attempt is then aborted and the producer told)."""
        return _transfer().await_room(self, room, ns, attempt, timeout)

    def ack_room(self, room: "Room", timeout: Optional[float] = None) -> None:
        """The consumer's word that it loaded the pages, or, after an abort,
        that it stopped reading them: the pin is released."""
        _transfer().ack_room(self, room, timeout)

    def abort_room(self, room: "Room", reason: str, detail: str = "", timeout: Optional[float] = None) -> str:
        """End an attempt, from either side, for ``reason`` (user_cancel,
        timeout, producer_failure, consumer_failure). Returns the state
        after: "aborted", or "draining" while a consumer that took the pages
        may read them (its ack_room ends it)."""
        return _transfer().abort_room(self, room, reason, detail, timeout)

    def room_status(self, room: str, timeout: Optional[float] = None) -> "RoomInfo":
        """The room's current record: the producer learns here how its
        attempt ended, a consumer's namespace mismatch among it."""
        return _transfer().room_status(self, room, timeout)

    def list_rooms(self, tenant: str = "", timeout: Optional[float] = None) -> Dict[str, List["RoomInfo"]]:
        """The rooms of ``tenant`` ("": the caller's, or every tenant's for
        the admin) on every node not quarantined, by node ID."""
        return _transfer().list_rooms(self, tenant, timeout)


def _transfer():
    from . import transfer  # the transfer module builds on this one

    return transfer


# The Go package calls the cluster client "Cluster".
Cluster = Client
