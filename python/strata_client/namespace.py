"""A namespace opened on a strata cluster: page keys, lookup with leases,
get into caller buffers, the one-call Put stream, delete, listing.

Get and Put batches run on the client's native plane (native.py: the Go
client, one call per batch, shared memory with a node on this host) when
it has one; otherwise they move page bytes over a node's raw tcp data
plane (raw.py) when the node advertises one and a connection can be had,
over gRPC otherwise.

See client.py for the routing and failure model: a failed node's keys are
misses, never exceptions; only request errors are raised.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import errors as E
from . import frame as F
from ._proto import strata_pb2 as pb
from .buffers import dest as _dest
from .buffers import readable_bytes
from .checksum import Hasher, checksum
from .client import (
    PROTOCOL_VERSION,
    _STATUS_NAMES,
    Client,
    EventInfo,
    Lease,
    LookupResult,
    Page,
    PutResult,
    _Deadline,
    _Node,
    _NSHandle,
    _Routing,
    chain_pages,
    with_chain_depths,
)
from .descriptor import KEY_SIZE, Descriptor, key_from_engine_hash, page_keys
from .indexer import PrefixQuery, Snapshot, query_prefix, snapshot
from .native import ForkedClientError, NativeNamespace
from .raw import ADDR_HEADER, MAX_WRITE_CHUNK, ONE_CALL_MAX_PAGES, ConnectionLost, PutSpec, RawConn, RawSession

__all__ = ["Namespace"]

_log = logging.getLogger("strata_client")
# How long a namespace that would not open on the native plane keeps its
# calls on the Python planes before it is tried there again.
_NATIVE_RETRY_S = 5.0


class Namespace:
    """A namespace opened on the cluster. Safe for concurrent use."""

    def __init__(self, client: Client, d: Descriptor):
        self.client = client
        self.descriptor = d
        self.id: bytes = d.id
        self.page_bytes: int = d.page_size()
        self.page_tokens: int = d.page_tokens
        self.checksum_algorithm: str = d.checksum
        self.key_format: str = d.key_format
        self.page_format: str = d.page_format  # how a page's bytes are laid out; "" = not stated
        self._native: Optional[NativeNamespace] = None  # opened on first use (_native_ns)
        self._native_failed = 0.0  # when it last would not open (time.monotonic)

    def __repr__(self) -> str:
        return f"Namespace(id={self.id.hex()[:12]}, page_bytes={self.page_bytes}, page_tokens={self.page_tokens})"

    # ---- keys ------------------------------------------------------------------

    def page_keys(self, tokens: Any, prev: Optional[bytes] = None) -> List[bytes]:
        """Native keys of the full pages of ``tokens`` in the namespace's key
        format (chained from the namespace ID, or from ``prev``, the key of
        the page before)."""
        return page_keys(self.id, tokens, self.page_tokens, prev=prev, key_format=self.key_format)

    def key_from_engine_hash(self, engine_hash: Union[bytes, str]) -> bytes:
        return key_from_engine_hash(self.id, engine_hash)

    def adopt_lease(self, exported: Tuple[int, Dict[str, List[Tuple[int, int]]]]) -> Lease:
        """A Lease of this namespace from ``Lease.export()`` of another
        client (e.g. taken by an engine's scheduler process, used by its
        workers): gets name it, ``renew``/``release`` end it."""
        pages, node_leases = exported
        return Lease(self, int(pages), {str(n): [(int(i), int(e)) for i, e in ls] for n, ls in node_leases.items()})

    # ---- the native plane (native.py) ---------------------------------------------

    def _native_ns(self, timeout: Optional[float]) -> Optional[NativeNamespace]:
        """This namespace on the client's native plane, opened on first
        use; None: the Python planes serve the call (no native client, or
        the namespace would not open there: logged, counted in
        native_fallbacks, tried again after _NATIVE_RETRY_S)."""
        c = self.client
        if c._native is None:
            return None
        nn = self._native
        if nn is not None:
            return nn
        with c._lock:
            last = self._native_failed
        if last and time.monotonic() - last < _NATIVE_RETRY_S:
            c._count("native_fallbacks")
            return None
        try:
            nn = c._native.open(self.descriptor.canonical(), timeout)
        except ForkedClientError:
            raise
        except E.StrataError as e:
            _log.error("strata: namespace %s would not open on the native plane, its calls run in Python: %s",
                       self.id.hex()[:12], e)
            with c._lock:
                self._native_failed = time.monotonic()
            c._count("native_fallbacks")
            return None
        with c._lock:
            if self._native is None:
                self._native = nn
            else:
                nn.close()
            return self._native

    def _get_native(self, nn: NativeNamespace, keys: List[bytes], bufs: Sequence[Any], lease: Optional[Lease],
                    timeout: Optional[float]) -> List[Optional[Any]]:
        """get in one native call: every page read and verified by the Go
        client on its best plane, straight into bufs."""
        found, err, bad = nn.get(keys, bufs, lease.export() if lease is not None else None, timeout,
                                 self.page_bytes)
        c = self.client
        c._count("native_gets")
        if bad:
            c._count("checksum_failures", bad)
        if err is not None:
            raise err
        return [b if f else None for b, f in zip(bufs, found)]

    def _put_native(self, nn: NativeNamespace, ps: List[Page], timeout: Optional[float],
                    evs: Sequence[Optional[EventInfo]], skip_present: bool = False) -> List[PutResult]:
        """put in one native call: each page copied and checksummed once,
        published on its owner (or its spill candidate) by the Go client;
        with skip_present the pages present are looked up in the same
        call."""
        events = None
        if any(e is not None for e in evs):
            events = [F.event_info(list(e.tokens), e.lora_name, bytes(e.extra_keys or b"")) if e is not None else b""
                      for e in evs]
        got, err = nn.put([_key(p.key) for p in ps], [_key(p.parent) if p.parent else None for p in ps],
                          [int(p.depth) for p in ps], [int(p.chain_depth) for p in ps],
                          [float(p.cost_hint or 0.0) for p in ps], [p.data for p in ps], timeout, self.page_bytes, events,
                          skip_present)
        self.client._count("native_puts")
        if err is not None:
            raise err
        return [PutResult(_STATUS_NAMES.get(st, str(st)), reason) for st, reason in got]

    # ---- handshake ---------------------------------------------------------------

    def _handle(self, node: _Node, dl: _Deadline) -> _NSHandle:
        h = node.handles.get(self.id)
        if h is not None:
            return h
        c = self.client
        resp, call = node.data.OpenNamespace.with_call(
            pb.OpenNamespaceRequest(protocol=PROTOCOL_VERSION, descriptor=self.descriptor.to_proto(), expected_id=self.id),
            timeout=dl.node(c.node_timeout),
            metadata=c._md,
        )
        if bytes(resp.namespace_id) != self.id or int(resp.page_bytes) != self.page_bytes:
            raise E.VersionMismatchError(
                f"open namespace (node {node.id}): node answered id {bytes(resp.namespace_id).hex()}, {resp.page_bytes}-byte pages; "
                f"client has {self.id.hex()}, {self.page_bytes}",
                node=node.id,
            )
        h = _NSHandle(resp)
        if c.raw_enabled:
            node.set_raw(_header(call, ADDR_HEADER), c._token)
        node.handles[self.id] = h
        return h

    # ---- the raw data plane -------------------------------------------------------

    def _raw_conn(self, node: _Node, t: float) -> Tuple[Optional[RawSession], Optional[RawConn]]:
        """A raw connection to node (session, connection), its socket
        operations bounded by t seconds from now, or (None, None) when the
        node advertises no raw plane or none can be had: the call then goes
        over gRPC."""
        s = node.raw
        if s is None or not self.client.raw_enabled:
            return None, None
        end = time.monotonic() + t
        conn = s.acquire(t)
        if conn is None:
            self.client._count("raw_fallbacks")
            return None, None
        conn.deadline(end)
        return s, conn

    def _get_raw(self, node: _Node, keys: List[bytes], dests: List[Any], found: List[bool], lease_id: int, t: float) -> bool:
        """Get over the raw plane, in batches of the node's Welcome limit:
        found[i] is set as page i verifies. False: no raw connection could
        be had (nothing was sent; use gRPC). Raises the node's refusals
        (the connection stays pooled) and connection failures (it is
        closed), as UnavailableError."""
        s, conn = self._raw_conn(node, t)
        if conn is None:
            return False
        c = self.client
        try:
            step = conn.max_batch
            bad = 0
            caller_err = None
            for start in range(0, len(keys), step):
                b, err = conn.read(self.id, lease_id, keys[start:start + step], dests[start:start + step],
                                   self.checksum_algorithm, self.page_bytes, found, start)
                c._count("raw_reads")
                bad += b
                caller_err = caller_err or err
            if bad:
                c._count("checksum_failures", bad)
            if caller_err is not None:
                raise caller_err
            return True
        finally:
            s.release(conn)

    def _put_raw(self, node: _Node, pages: List[Page], views: List[memoryview], sums: List[bytes], t: float,
                 evs: Optional[Sequence[Optional[EventInfo]]] = None) -> List[PutResult]:
        """Put pages over the raw plane, in batches of the node's Welcome
        limit. Returns the results of the leading pages it put: all of
        them, or fewer when the plane is not usable (no connection, or it
        failed before the node answered a commit while the deadline had
        not passed): the caller puts the rest over gRPC, where pages the
        lost batch did publish answer EXISTS. Pages carry their cost hints
        (protocol 5); a node of an older protocol gets a batch with a hint
        over gRPC, which carries it. On a protocol-3 connection a batch of
        at most ONE_CALL_MAX_PAGES pages is Put frames, one round trip
        (stats raw_put_one_calls). Event info rides protocol 6 alike."""
        evs = evs if evs is not None else [None] * len(pages)
        s, conn = self._raw_conn(node, t)
        if conn is None:
            return []
        if (conn.version < F.COST_HINT_VERSION and any(p.cost_hint for p in pages)) or \
                (conn.version < F.EVENT_VERSION and any(e is not None for e in evs)):
            s.release(conn)
            return []
        specs = [PutSpec(bytes(p.key), bytes(p.parent) if p.parent else None, int(p.depth), len(v), int(p.chain_depth),
                         float(p.cost_hint or 0.0), *((list(e.tokens), e.lora_name, bytes(e.extra_keys or b"")) if e else ()))
                 for p, v, e in zip(pages, views, evs)]
        out: List[PutResult] = []
        try:
            step = conn.max_batch
            for start in range(0, len(pages), step):
                args = (self.id, specs[start:start + step], views[start:start + step], sums[start:start + step])
                if conn.version >= F.SINCE[F.OP_PUT] and len(args[1]) <= ONE_CALL_MAX_PAGES and self.page_bytes <= MAX_WRITE_CHUNK:
                    got = conn.put_one_call(*args)
                    self.client._count("raw_put_one_calls")
                else:
                    got = conn.put(*args)
                self.client._count("raw_puts")
                out.extend(PutResult(_STATUS_NAMES.get(st, str(st)), reason) for st, reason in got)
        except ConnectionLost as e:
            if e.timed_out:
                raise
        finally:
            s.release(conn)
        return out

    def _call(self, r: _Routing, i: int, dl: _Deadline, op: str, fn: Callable[[_Node, _NSHandle, float], Any]) -> Any:
        """Run fn on node i with the namespace open there; re-handshake once
        if the node lost the namespace. Node failures quarantine the node and
        are raised as UnavailableError (callers turn them into misses)."""
        c = self.client
        node_id = r.view.ids[i]
        last: Optional[BaseException] = None
        for attempt in range(2):
            try:
                node = c._node(r, i)
                h = self._handle(node, dl)
                return fn(node, h, dl.node(c.node_timeout))
            except Exception as e:
                err = E.from_rpc(op, e, node_id)
                last = err
                if isinstance(err, E.NamespaceNotFoundError) and attempt == 0:
                    try:
                        node.handles.pop(self.id, None)
                    except Exception:
                        pass
                    continue
                if E.node_failed(err):
                    c._suspect(node_id)
                raise err from None
        raise last  # pragma: no cover

    def _fan(self, r: _Routing, dl: _Deadline, op: str, groups: Dict[int, List[int]],
             begin: Callable[[int, List[int]], Tuple[Any, Callable[[_Node, _NSHandle, float], Any]]]
             ) -> Tuple[Dict[int, Tuple[Any, Optional[E.StrataError]]], List[E.StrataError]]:
        """Run op on each group's node in parallel: begin(i, group) makes
        the group's result and the fn that fills it on node i (through
        _call). What fn filled before a failure stays with the error.
        Returns per node (result, error or None), and the errors that are
        the request's own rather than a node's failure."""
        def one(i: int, group: List[int]):
            acc, fn = begin(i, group)
            try:
                self._call(r, i, dl, op, fn)
                return acc, None
            except E.StrataError as err:
                return acc, err

        answers = self.client._fan_out(groups, one)
        return answers, [err for _, err in answers.values() if err is not None and not E.node_failed(err)]

    def _lookup_raw(self, node: _Node, keys: List[bytes], present: List[bool], spans: List[Tuple[int, int, List[int]]],
                    group: List[int], lease: bool, ttl_ms: int, t: float) -> bool:
        """Lookup over the raw plane (protocol 3), in batches of the node's
        Welcome limit, filling present and spans as the gRPC path does.
        False: the plane is not usable (no connection, a protocol-2 node,
        or the connection broke before an answer while the deadline had
        not passed): the caller asks over gRPC (a lease taken for a lost
        answer ends at its expiry). Raises the node's refusals and a
        deadline that passed."""
        s = node.raw
        if s is None or not self.client.raw_enabled or s.version < F.SINCE[F.OP_LOOKUP]:
            return False
        s, conn = self._raw_conn(node, t)
        if conn is None:
            return False
        c = self.client
        try:
            if conn.version < F.SINCE[F.OP_LOOKUP]:
                return False
            step = conn.max_batch
            covered = 0
            for start in range(0, len(keys), step):
                batch = keys[start:start + step]
                want = lease and covered == start
                hit, lease_id, expires, _pages, got = conn.lookup(self.id, batch, want, int(ttl_ms))
                c._count("raw_lookups")
                present[start:start + len(batch)] = got
                if lease_id:
                    spans.append((lease_id, expires, group[start:start + hit]))
                    covered = start + hit
            return True
        except ConnectionLost as e:
            if e.timed_out:
                raise
            spans.clear()
            return False
        finally:
            s.release(conn)

    # ---- lookup ----------------------------------------------------------------

    def lookup(self, keys: Sequence[bytes], lease: bool = False, ttl_ms: int = 0, timeout: Optional[float] = None) -> LookupResult:
        """How many keys from the start are present (the hit prefix), which
        are present, and with ``lease`` a lease on the hit prefix. A node
        that fails counts as having none of its keys."""
        self.client._check_fork()
        keys = [_key(k) for k in keys]
        res = LookupResult(0, [False] * len(keys), None)
        if not keys:
            return res
        if not lease:
            nn = self._native_ns(timeout)
            if nn is not None:
                hit, present, err = nn.lookup(keys, timeout)
                self.client._count("native_lookups")
                if err is not None:
                    raise err
                return LookupResult(hit, present, None)
        r, dl = self.client._routing(), _Deadline(timeout)
        groups = _by_primary(r, keys)

        def begin(i: int, group: List[int]):
            spans: List[Tuple[int, int, List[int]]] = []  # (lease id, expires, positions)
            present = [False] * len(group)

            def fn(node: _Node, h: _NSHandle, t: float):
                spans.clear()
                if self._lookup_raw(node, [keys[p] for p in group], present, spans, group, lease, ttl_ms, t):
                    return present
                covered = 0
                for start in range(0, len(group), h.max_batch):
                    batch = group[start:start + h.max_batch]
                    want = lease and covered == start
                    resp = node.data.Lookup(
                        pb.LookupRequest(namespace_id=self.id, keys=[keys[p] for p in batch], lease=want, lease_ttl_ms=int(ttl_ms)),
                        timeout=t,
                        metadata=self.client._md,
                    )
                    if len(resp.present) != len(batch) or resp.hit_prefix > len(batch):
                        raise E.ProtocolError(f"lookup: {len(resp.present)} answers for {len(batch)} keys", node=node.id)
                    for j, v in enumerate(resp.present):
                        present[start + j] = bool(v)
                    if resp.HasField("lease") and resp.lease.id:
                        spans.append((int(resp.lease.id), int(resp.lease.expires_unix_ms), batch[: resp.hit_prefix]))
                        covered = start + resp.hit_prefix
                return present

            return (present, spans), fn

        answers, request_errors = self._fan(r, dl, "lookup", groups, begin)
        all_spans: List[Tuple[str, int, int, List[int]]] = []
        drop: List[Tuple[str, int]] = []
        for i, ((present, spans), err) in answers.items():
            nid = r.view.ids[i]
            if err is not None:
                # A failed node's keys are misses; leases it granted before
                # failing are released (or expire).
                drop.extend((nid, s[0]) for s in spans)
                continue
            for s in spans:
                all_spans.append((nid,) + s)
            for j, p in enumerate(groups[i]):
                res.present[p] = present[j]
        hit = 0
        while hit < len(keys) and res.present[hit]:
            hit += 1
        res.hit_prefix = hit
        keep: Dict[str, List[Tuple[int, int]]] = {}
        for nid, lid, exp, pos in all_spans:
            # A node lease is kept when it covers part of the global prefix.
            if hit > 0 and pos and pos[0] < hit:
                keep.setdefault(nid, []).append((lid, exp))
            else:
                drop.append((nid, lid))
        if lease and keep:
            res.lease = Lease(self, hit, keep)
        self._release_later(r, drop)
        if not request_errors and all(err is None for _, err in answers.values()):
            # Pages past the first miss have an absent ancestor, which their
            # node cannot see when the miss is on another node: tell it, so
            # it evicts them first (a miss on a node that failed proves
            # nothing). Those in the node's own hit prefix (its leading
            # present keys) it counted as hits: they go first, and it
            # takes them back (OrphansRequest.counted).
            orphans: Dict[str, Tuple[List[bytes], int]] = {}
            for i, group in groups.items():
                present = answers[i][0][0]
                counted: List[bytes] = []
                rest: List[bytes] = []
                leading = True
                for j, p in enumerate(group):
                    leading = leading and present[j]
                    if p > hit and present[j]:
                        (counted if leading else rest).append(keys[p])
                if counted or rest:
                    orphans[r.view.ids[i]] = (counted + rest, len(counted))
            for nid, (ks, n) in orphans.items():
                try:
                    self.client._pool.submit(self._mark_orphans, r, nid, ks, n)
                except RuntimeError:  # pool shut down
                    break
        if request_errors:
            raise request_errors[0]
        return res

    def _mark_orphans(self, r: _Routing, nid: str, keys: List[bytes], counted: int) -> None:
        self._background_call(r, nid, "orphan_marks_failed",
                              lambda node, c: node.data.Orphans(
                                  pb.OrphansRequest(namespace_id=self.id, keys=keys, counted=counted),
                                  timeout=c.node_timeout, metadata=c._md))

    def _background_call(self, r: _Routing, nid: str, failed_stat: str, fn) -> None:
        """fn(node, client) on node nid, off the caller's path: a failure is
        only counted in stats[failed_stat]."""
        c = self.client
        try:
            addr = r.view.addr.get(nid) or c._view.addr.get(nid)
            if addr is None:
                return
            fn(c._node_for(nid, addr), c)
        except Exception:
            with c._lock:
                c.stats[failed_stat] += 1

    def exists(self, keys: Sequence[bytes], timeout: Optional[float] = None) -> int:
        """The hit prefix (count of consecutive present keys from the start)."""
        return self.lookup(keys, timeout=timeout).hit_prefix

    def _release_later(self, r: _Routing, leases: List[Tuple[str, int]]) -> None:
        for nid, lid in leases:
            try:
                self.client._pool.submit(self._release_one, r, nid, lid)
            except RuntimeError:  # pool shut down
                return

    def _release_one(self, r: _Routing, nid: str, lid: int) -> None:
        self._background_call(r, nid, "lease_releases_failed",
                              lambda node, c: node.data.ReleaseLease(pb.ReleaseLeaseRequest(namespace_id=self.id, lease_id=lid),
                                                                     timeout=c.node_timeout, metadata=c._md))

    def _release(self, lease: Lease, timeout: Optional[float]) -> None:
        c = self.client
        r = c._routing()
        items = [(nid, lid) for nid, ls in lease._node_leases.items() for lid, _ in ls]
        futs = []
        for nid, lid in items:
            futs.append(c._pool.submit(self._release_one, r, nid, lid))
        for f in futs:
            f.result()

    def _renew(self, lease: Lease, ttl_ms: int, timeout: Optional[float]) -> None:
        c = self.client
        dl = _Deadline(timeout)
        errs = []
        for nid, ls in lease._node_leases.items():
            addr = c._view.addr.get(nid)
            for j, (lid, _) in enumerate(ls):
                try:
                    if addr is None:
                        raise E.UnavailableError(f"node {nid} left the view", node=nid)
                    node = c._node_for(nid, addr)
                    resp = node.data.RenewLease(
                        pb.RenewLeaseRequest(namespace_id=self.id, lease_id=lid, ttl_ms=int(ttl_ms)),
                        timeout=dl.node(c.node_timeout),
                        metadata=c._md,
                    )
                    ls[j] = (lid, int(resp.lease.expires_unix_ms))
                except Exception as e:
                    err = E.from_rpc("renew lease", e, nid)
                    if E.node_failed(err):
                        c._suspect(nid)
                    errs.append(err)
        if errs:
            for e in errs:
                if isinstance(e, E.LeaseExpiredError):
                    raise e
            raise errs[0]

    # ---- get -----------------------------------------------------------------------

    def get(self, keys: Sequence[bytes], bufs: Optional[Sequence[Any]] = None, lease: Optional[Lease] = None,
            timeout: Optional[float] = None) -> List[Optional[Any]]:
        """Read pages into caller buffers (bytearray, memoryview, numpy array,
        CPU torch tensor, ScatterBuffer) or, with ``bufs`` None, into new
        bytearrays. Returns, per key, the buffer holding the verified page or
        None for a miss (absent, node failed, or checksum mismatch)."""
        self.client._check_fork()
        keys = [_key(k) for k in keys]
        n = len(keys)
        if bufs is None:
            bufs = [bytearray(self.page_bytes) for _ in range(n)]
        elif len(bufs) != n:
            raise E.InvalidArgumentError(f"get: {len(bufs)} buffers for {n} keys")
        if n:
            nn = self._native_ns(timeout)
            if nn is not None:
                return self._get_native(nn, keys, bufs, lease, timeout)
        dests = [_dest(b) for b in bufs]
        for j, d in enumerate(dests):
            if len(d) < self.page_bytes:
                raise E.InvalidArgumentError(f"get: buffer {j} has {len(d)} bytes, pages are {self.page_bytes}")
        out: List[Optional[Any]] = [None] * n
        if n == 0:
            return out
        r, dl = self.client._routing(), _Deadline(timeout)
        groups = _by_primary(r, keys)

        def begin(i: int, group: List[int]):
            found = [False] * len(group)
            lease_id = lease.lease_id_on(r.view.ids[i]) if lease is not None else 0

            def fn(node: _Node, h: _NSHandle, t: float):
                if self._get_raw(node, [keys[p] for p in group], [dests[p] for p in group], found, lease_id, t):
                    return found
                for start in range(0, len(group), h.max_batch):
                    batch = group[start:start + h.max_batch]
                    self._get_batch(node, [keys[p] for p in batch], [dests[p] for p in batch], found, start, lease_id, t)
                return found

            return found, fn

        # Pages fully received and verified before a failure are kept.
        answers, request_errors = self._fan(r, dl, "get", groups, begin)
        for i, (found, _) in answers.items():
            for j, p in enumerate(groups[i]):
                if found[j]:
                    out[p] = bufs[p]
        if request_errors:
            raise request_errors[0]
        return out

    def _get_batch(self, node: _Node, keys: List[bytes], dests: List[Any], found: List[bool], base: int, lease_id: int, t: float) -> None:
        c = self.client
        stream = node.data.Get(pb.GetRequest(namespace_id=self.id, keys=keys, lease_id=lease_id), timeout=t, metadata=c._md)
        cur = None  # [index, size, got, hasher, checksum, dest or None]
        try:
            for msg in stream:
                if msg.HasField("header"):
                    if cur is not None:
                        raise E.ProtocolError(f"get: page {msg.header.index} header inside page {cur[0]}", node=node.id)
                    hd = msg.header
                    idx = int(hd.index)
                    if idx >= len(keys):
                        raise E.ProtocolError(f"get: page index {idx} out of range", node=node.id)
                    if not hd.found:
                        continue
                    size = int(hd.size)
                    dest = dests[idx] if size == self.page_bytes and size <= len(dests[idx]) else None
                    algo = "sha256" if hd.checksum_algorithm == pb.CHECKSUM_ALGORITHM_SHA256 else "crc32c"
                    cur = [idx, size, 0, Hasher(algo), bytes(hd.checksum), dest]
                data = msg.data
                if data:
                    if cur is None:
                        raise E.ProtocolError("get: data without a page header", node=node.id)
                    if cur[2] + len(data) > cur[1]:
                        raise E.ProtocolError(f"get: page {cur[0]} longer than its size", node=node.id)
                    if cur[5] is not None:
                        cur[5].write(cur[2], data)
                    cur[3].update(data)
                    cur[2] += len(data)
                if cur is not None and cur[2] == cur[1]:
                    ok = cur[5] is not None and cur[3].digest() == cur[4]
                    if ok:
                        found[base + cur[0]] = True
                    elif cur[5] is not None:
                        with c._lock:
                            c.stats["checksum_failures"] += 1
                    cur = None
        finally:
            try:
                stream.cancel()
            except Exception:
                pass
        if cur is not None:
            raise E.ProtocolError(f"get: stream ended inside page {cur[0]}", node=node.id)

    # ---- put -----------------------------------------------------------------------

    def put(self, pages: Sequence[Union[Page, Tuple[bytes, Any]]], timeout: Optional[float] = None,
            events: Optional[Sequence[Optional[EventInfo]]] = None, skip_present: bool = False) -> List[PutResult]:
        """Publish pages with the one-call Put stream (header + data chunks
        per page, checksummed). Each page goes to its owner; a page the owner
        rejects (no room) or cannot take (node down) is retried once on its
        next placement candidate. Returns one PutResult per page.

        events, when given, has one EventInfo (or None) per page: the page's
        tokens, LoRA and extra keys for the nodes' KV event stream (its
        BlockStored carries them). Every plane carries them (the frame
        planes from protocol 6; a put to an older node goes over gRPC).

        skip_present: look the pages up first and answer EXISTS for those
        strata has, whose bytes are then neither read nor sent (a failed
        lookup skips nothing). On the native plane the lookup and the put
        are one call, so a caller beside a busy Python thread waits for the
        GIL once, not twice."""
        ps: List[Page] = []
        for p in pages:
            if not isinstance(p, Page):
                k, d = p
                p = Page(key=k, data=d)
            ps.append(p)
        evs: List[Optional[EventInfo]] = list(events) if events is not None else [None] * len(ps)
        if len(evs) != len(ps):
            raise E.InvalidArgumentError(f"put: {len(evs)} event infos for {len(ps)} pages")
        self.client._check_fork()
        if ps:
            nn = self._native_ns(timeout)
            if nn is not None:  # the Go client sets the chain depths
                return self._put_native(nn, ps, timeout, evs, skip_present)
        if skip_present and ps:
            try:
                present = self.lookup([p.key for p in ps], timeout=timeout).present
            except E.StrataError:
                present = [False] * len(ps)
            todo = [i for i, x in enumerate(present) if not x]
            out = [PutResult("EXISTS") for _ in ps]
            if todo:
                for i, r in zip(todo, self.put([ps[i] for i in todo], timeout, [evs[i] for i in todo])):
                    out[i] = r
            return out
        ps = with_chain_depths(ps)  # before the sequence is split over nodes
        views = []
        for j, p in enumerate(ps):
            mv = readable_bytes(p.data)
            if len(mv) != self.page_bytes:
                raise E.InvalidArgumentError(f"put page {j}: {len(mv)} bytes, namespace pages are {self.page_bytes}")
            _key(p.key)
            views.append(mv)
        results: List[Optional[PutResult]] = [None] * len(ps)
        if not ps:
            return []
        sums = [checksum(self.checksum_algorithm, v) for v in views]
        r = self.client._routing()
        dl = _Deadline(timeout)
        tried: List[List[int]] = [[] for _ in ps]
        todo = list(range(len(ps)))
        request_errors = []
        for _round in range(2):
            groups: Dict[int, List[int]] = {}
            for p in todo:
                k = _key(ps[p].key)
                if not tried[p]:
                    i = r.primary(k)
                else:
                    cands = r.candidates(k, exclude=tried[p])
                    if not cands:
                        continue
                    i = cands[0]
                tried[p].append(i)
                groups.setdefault(i, []).append(p)
            if not groups:
                break

            def begin(i: int, group: List[int]):
                res: List[Optional[PutResult]] = [None] * len(group)

                def fn(node: _Node, h: _NSHandle, t: float):
                    done = self._put_raw(node, [ps[p] for p in group], [views[p] for p in group], [sums[p] for p in group], t,
                                         [evs[p] for p in group])
                    res[:len(done)] = done
                    for start in range(len(done), len(group), h.max_batch):
                        batch = group[start:start + h.max_batch]
                        got = self._put_batch(node, h, [ps[p] for p in batch], [views[p] for p in batch], [sums[p] for p in batch], t,
                                              [evs[p] for p in batch])
                        res[start:start + len(batch)] = got
                    return res

                return res, fn

            answers, errs = self._fan(r, dl, "put", groups, begin)
            request_errors.extend(errs)
            todo = []
            for i, (res, err) in answers.items():
                for j, p in enumerate(groups[i]):
                    pr = res[j]
                    if pr is None:
                        pr = PutResult("UNAVAILABLE", str(err) if err else "no answer")
                    results[p] = pr
                    if pr.status in ("UNAVAILABLE", "REJECTED", "FAILED") and (err is None or E.node_failed(err)):
                        todo.append(p)
            if not todo:
                break
        if request_errors:
            raise request_errors[0]
        out = [x if x is not None else PutResult("UNAVAILABLE", "no node could take the page") for x in results]
        self._drop_past(r, dl, ps, out, [t[-1] if t else -1 for t in tried])
        return out

    def _drop_past(self, r: _Routing, dl: _Deadline, ps: List[Page], results: List[PutResult], at: List[int]) -> None:
        """Delete the pages this put committed past a page of their sequence
        (by parent links) that it stored nowhere, and answer them REJECTED
        (as the Go client does). Pages are stored in parallel per node, so a
        page every candidate refused does not keep its descendants on other
        nodes from being stored: they are orphans from birth, which no
        parent-gone notice names and no lookup reaches. EXISTS pages are
        left (an earlier put stored them); UNAVAILABLE and FAILED pages may
        lie on a node that failed, so they cut nothing. A failed delete
        leaves the pages for lookups to find."""
        def nowhere(res: PutResult) -> bool:
            return not res.stored and res.status not in ("UNAVAILABLE", "FAILED")

        gap = next((i for i, res in enumerate(results) if nowhere(res)), -1)
        if gap < 0 or gap == len(ps) - 1:
            return
        index = {bytes(p.key): i for i, p in enumerate(ps)}
        cut = [False] * len(ps)
        groups: Dict[int, List[int]] = {}
        for i in range(gap, len(ps)):
            if nowhere(results[i]):
                cut[i] = True
                continue
            j = index.get(bytes(ps[i].parent)) if ps[i].parent else None
            if j is None or j >= i or not cut[j]:
                continue
            cut[i] = True
            if results[i].status == "COMMITTED" and at[i] >= 0:
                groups.setdefault(at[i], []).append(i)
                results[i] = PutResult("REJECTED", "deleted again: a page before it in its sequence is stored nowhere")

        def begin(i: int, group: List[int]):
            def fn(node: _Node, h: _NSHandle, t: float):
                keys = [bytes(ps[p].key) for p in reversed(group)]  # deepest first, as a node drops pages
                for start in range(0, len(keys), h.max_batch):
                    node.data.Delete(pb.DeleteRequest(namespace_id=self.id, keys=keys[start:start + h.max_batch]),
                                     timeout=t, metadata=self.client._md)
            return None, fn

        if groups:
            self._fan(r, dl, "delete", groups, begin)

    def _put_batch(self, node: _Node, h: _NSHandle, pages: List[Page], views: List[memoryview], sums: List[bytes], t: float,
                   evs: Sequence[Optional[EventInfo]]) -> List[PutResult]:
        chunk = h.max_chunk
        ns_id = self.id

        def gen() -> Iterator[Any]:
            first = True
            for p, mv, cs, ev in zip(pages, views, sums, evs):
                spec = pb.PageSpec(key=bytes(p.key), depth=int(p.depth), size=len(mv), cost_hint=float(p.cost_hint or 0.0),
                                   chain_depth=int(p.chain_depth))
                if p.parent:
                    spec.parent_key = bytes(p.parent)
                if ev is not None:
                    spec.event_info.CopyFrom(ev.to_proto())
                msg = pb.PutRequest(header=pb.PutHeader(page=spec, checksum=cs), data=bytes(mv[:chunk]))
                if first:
                    msg.namespace_id = ns_id
                    first = False
                yield msg
                for off in range(chunk, len(mv), chunk):
                    yield pb.PutRequest(data=bytes(mv[off:off + chunk]))

        resp = node.data.Put(gen(), timeout=t, metadata=self.client._md)
        if len(resp.results) != len(pages):
            raise E.ProtocolError(f"put: {len(resp.results)} answers for {len(pages)} pages", node=node.id)
        return [PutResult(_STATUS_NAMES.get(x.status, str(x.status)), x.reason) for x in resp.results]

    def put_chain(self, keys: Sequence[bytes], data: Sequence[Any], first_depth: int = 0, parent: Optional[bytes] = None,
                  timeout: Optional[float] = None) -> List[PutResult]:
        """Put the pages of one token sequence (parent = previous key)."""
        return self.put(chain_pages(keys, data, first_depth, parent), timeout=timeout)

    # ---- delete -----------------------------------------------------------------

    def delete(self, keys: Sequence[bytes], timeout: Optional[float] = None) -> int:
        """Delete pages on their owner and spill candidate; returns how many
        the nodes deleted. Unreachable nodes are skipped."""
        keys = [_key(k) for k in keys]
        if not keys:
            return 0
        r = self.client._routing()
        dl = _Deadline(timeout)
        groups: Dict[int, List[int]] = {}
        for p, k in enumerate(keys):
            for i in r.candidates(k)[:2]:
                groups.setdefault(i, []).append(p)

        def begin(i: int, group: List[int]):
            deleted = [0]  # set once the node answered every batch

            def fn(node: _Node, h: _NSHandle, t: float):
                n = 0
                for start in range(0, len(group), h.max_batch):
                    batch = group[start:start + h.max_batch]
                    resp = node.data.Delete(pb.DeleteRequest(namespace_id=self.id, keys=[keys[p] for p in batch]), timeout=t, metadata=self.client._md)
                    n += int(resp.deleted)
                deleted[0] = n

            return deleted, fn

        answers, request_errors = self._fan(r, dl, "delete", groups, begin)
        total = sum(deleted[0] for deleted, _ in answers.values())
        if request_errors:
            raise request_errors[0]
        return total

    # ---- for cache-aware routers (indexer.py) -------------------------------------

    def query_prefix(self, keys: Optional[Sequence[bytes]] = None, tokens: Optional[Sequence[int]] = None,
                     per_key: bool = False, timeout: Optional[float] = None) -> PrefixQuery:
        """How many of a prompt's pages, from the first, the cluster holds,
        in any tier and per tier (Admin.QueryPrefix with cluster set: one
        node asks the others and merges their answers). The prompt is its
        page keys, or its token ids (full pages only). Not a use of the
        pages: no hit counted, no lease taken."""
        return query_prefix(self, keys, tokens, per_key, timeout)

    def snapshot(self, node_id: Optional[str] = None, page_size: int = 0,
                 timeout: Optional[float] = None) -> Snapshot:
        """The namespace's pages on one node (default: the first alive in
        the view) at a point of its tenant's KV event stream
        (Admin.SnapshotKeys): apply them, then the node's stream from
        ``next_seq``, and nothing is missed or counted twice. A router that
        follows the cluster takes one per node."""
        return snapshot(self, node_id, page_size, timeout)

    # ---- listing (admin API) ------------------------------------------------------

    def list_keys(self, limit: int = 0, timeout: Optional[float] = None) -> List[bytes]:
        """Every key of the namespace on every alive node (Admin.ListKeys),
        up to ``limit`` (0: all). Unreachable nodes are skipped."""
        c = self.client
        r = c._routing()
        dl = _Deadline(timeout)
        out: List[bytes] = []
        for i, nid in enumerate(r.view.ids):
            if nid in r.down:
                continue
            after = b""
            try:
                node = c._node(r, i)
                while True:
                    resp = node.admin.ListKeys(pb.ListKeysRequest(namespace_id=self.id, after_key=after, limit=1000),
                                               timeout=dl.node(c.node_timeout), metadata=c._md)
                    out.extend(bytes(k.key) for k in resp.keys)
                    if limit and len(out) >= limit:
                        return out[:limit]
                    after = bytes(resp.next_after_key)
                    if not after:
                        break
            except Exception as e:
                err = E.from_rpc("list keys", e, nid)
                if E.node_failed(err):
                    c._suspect(nid)
                elif not isinstance(err, E.NamespaceNotFoundError):
                    raise err from None
        return out


def _by_primary(r: _Routing, keys: List[bytes]) -> Dict[int, List[int]]:
    """The keys' positions grouped by the node that owns them."""
    groups: Dict[int, List[int]] = {}
    for p, k in enumerate(keys):
        groups.setdefault(r.primary(k), []).append(p)
    return groups


def _header(call: Any, name: str) -> Optional[str]:
    """The value of a gRPC response header, or None."""
    for k, v in E.call_metadata(call, "initial_metadata"):
        if k == name:
            return v.decode() if isinstance(v, bytes) else str(v)
    return None


def _key(k: Any) -> bytes:
    b = bytes(k)
    if len(b) != KEY_SIZE:
        raise E.InvalidArgumentError(f"page key is {len(b)} bytes, want {KEY_SIZE}")
    return b
