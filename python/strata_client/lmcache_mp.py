"""strata as an L2 adapter of LMCache's multi-process mode (the
``lmcache server`` daemon that SGLang's ``--enable-lmcache`` and vLLM's
multi-process LMCache connector talk to), for ``lmcache==0.5.6``.

The daemon builds its L2 tier from ``--l2-adapter`` JSON specs; 0.5.6's
``plugin`` type (``lmcache/v1/distributed/l2_adapters/plugin_l2_adapter.py``)
imports ``module_path``, takes ``class_name`` (an ``L2AdapterInterface``
subclass) and, finding ``<class_name>Config`` in the module, builds the
config with ``from_dict(adapter_params)``::

    lmcache server --l1-size-gb 20 --eviction-policy LRU \\
      --l2-adapter '{"type": "plugin", "module_path": "strata_client.lmcache_mp",
                     "class_name": "StrataL2Adapter",
                     "adapter_params": {"addr": "10.0.0.5:7070,10.0.0.6:7070",
                                        "tenant": "acme", "model_revision": "0e9e39f"}}'

Matched against the installed ``l2_adapters/base.py`` (non-blocking store,
lookup-and-lock, unlock and load tasks signalled through three event fds,
results as ``L2StoreResult`` and ``Bitmap``) and the daemon's
``storage_controllers/prefetch_controller.py`` (lookup-and-lock, then load,
then ``submit_unlock`` of every key it locked, also for keys it drops).

Mapping onto strata:

- One namespace per (model, kv rank, object group, object layout): an
  object is one page of exactly its bytes (no framing, no padding).
  ``ObjectKey.chunk_hash`` is the engine hash (``key_from_engine_hash``);
  a non-empty ``cache_salt`` is hashed into the key, so salted users never
  share pages.
- Lookup-and-lock is a strata Lookup with a lease: the bits set are the
  hit prefix of each key row, which the lease covers. Each locked key holds
  a reference on its lease; ``submit_unlock`` drops them and the lease is
  released when its last key is unlocked. A load reads under the lease and
  renews it first when more than half its TTL has passed; a background
  thread renews leases still held near their expiry (a prefetch waiting
  for L1 room). A lease that expired anyway costs misses, never bytes that
  are not the page.
- Every failure is a miss, a failed store task or a dropped unlock (the
  lease then expires): nothing raises into the daemon's controllers.

Copies: a store sends each object's own buffer (the client checksums and
writes it; no staging copy here); a load reads each page straight into the
caller's MemoryObj.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import logging
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

try:
    from lmcache.lmcache_native import Bitmap
    from lmcache.v1.distributed.internal_api import L2StoreResult
    from lmcache.v1.distributed.l2_adapters.base import L2AdapterInterface
    from lmcache.v1.distributed.l2_adapters.config import L2AdapterConfigBase
    from lmcache.v1.platform import create_event_notifier
except ImportError as _e:  # pragma: no cover - exercised only without LMCache
    raise ImportError(f"strata_client.lmcache_mp needs LMCache (pip install 'strata-client[lmcache]'): {_e}") from _e

from ._connector import Connected, spans as _spans
from .buffers import writable_view
from .client import Client, Lease, Page
from .descriptor import dtype_bytes, key_from_engine_hash, normalize_dtype, page_format_string
from .engines import engine_descriptor
from .namespace import Namespace

logger = logging.getLogger(__name__)

__all__ = ["StrataL2Adapter", "StrataL2AdapterConfig"]

class StrataL2AdapterConfig(L2AdapterConfigBase):
    """``adapter_params`` of the plugin spec.

    - addr (str, required): strata nodes, ``host:port[,host:port]``.
    - tenant (str, default "default"), token (str, default none).
    - model_revision (str, default ""): part of every namespace.
    - chunk_size (int, default 256): tokens per object, for objects whose
      layout does not show it (the daemon's ``--chunk-size``).
    - node_timeout (float s, default 2.0), reconnect_interval (float s,
      default 5.0), lease_ttl_ms (int, default 0: the nodes' default),
      workers (int, default 4: threads running tasks), max_call_bytes (int,
      default 64 MiB: the most bytes one node call moves, so that a batch
      of big objects is not one call bounded by one node_timeout).
    - kv_format (str, default ""): the numeric format of KV objects the
      daemon hands over as uint8 (fp8_e4m3 or fp8_e5m2). SGLang and vLLM
      keep fp8 KV in uint8 tensors, so an object's dtype cannot tell e4m3
      from e5m2: without kv_format such objects are refused (each store a
      failed task, counted in ``unservable`` and logged as an error).
    """

    def __init__(self, addr: str, tenant: str = "default", token: Optional[str] = None, model_revision: str = "",
                 chunk_size: int = 256, node_timeout: float = 2.0, reconnect_interval: float = 5.0,
                 lease_ttl_ms: int = 0, workers: int = 4, max_call_bytes: int = 64 << 20, kv_format: str = ""):
        self.addr = addr
        self.tenant = tenant
        self.token = token
        self.model_revision = model_revision
        self.chunk_size = chunk_size
        self.node_timeout = node_timeout
        self.reconnect_interval = reconnect_interval
        self.lease_ttl_ms = lease_ttl_ms
        self.workers = workers
        self.max_call_bytes = max_call_bytes
        self.kv_format = kv_format

    @classmethod
    def from_dict(cls, d: dict) -> "StrataL2AdapterConfig":
        addr = d.get("addr")
        if not isinstance(addr, str) or not addr.strip():
            raise ValueError("strata L2 adapter: addr must be a non-empty 'host:port[,host:port]' string")
        known = {"addr", "tenant", "token", "model_revision", "chunk_size", "node_timeout", "reconnect_interval",
                 "lease_ttl_ms", "workers", "max_call_bytes", "kv_format"}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"strata L2 adapter: unknown adapter_params {unknown} (known: {sorted(known)})")
        c = cls(addr=addr.strip(), tenant=str(d.get("tenant", "default")), token=d.get("token"),
                model_revision=str(d.get("model_revision", "")), chunk_size=d.get("chunk_size", 256),
                node_timeout=d.get("node_timeout", 2.0), reconnect_interval=d.get("reconnect_interval", 5.0),
                lease_ttl_ms=d.get("lease_ttl_ms", 0), workers=d.get("workers", 4),
                max_call_bytes=d.get("max_call_bytes", 64 << 20), kv_format=str(d.get("kv_format", "") or ""))
        if c.kv_format:
            c.kv_format = normalize_dtype(c.kv_format)
            if dtype_bytes(c.kv_format) != 1 or c.kv_format == "uint8":
                raise ValueError(f"strata L2 adapter: kv_format {d.get('kv_format')!r} is not a one-byte KV format "
                                 "(fp8_e4m3, fp8_e5m2, fp8_e4m3fnuz, ...)")
        for name, lo in (("chunk_size", 1), ("workers", 1), ("lease_ttl_ms", 0), ("max_call_bytes", 1)):
            v = getattr(c, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ValueError(f"strata L2 adapter: {name} must be an integer >= {lo}, got {v!r}")
        for name in ("node_timeout", "reconnect_interval"):
            v = getattr(c, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"strata L2 adapter: {name} must be a positive number, got {v!r}")
        return c

    @classmethod
    def help(cls) -> str:
        return cls.__doc__ or ""


class _Locks:
    """Which lease holds each locked key: per key a list (one entry per
    lock taken), per lease the number of key locks still on it."""

    def __init__(self):
        self.mu = threading.Lock()
        # guarded by mu:
        self.by_key: Dict[Any, List[Lease]] = {}
        self.refs: Dict[int, List[Any]] = {}  # id(lease) -> [lease, count, taken monotonic]

    def add(self, keys: List[Any], lease: Lease) -> None:
        with self.mu:
            self.refs[id(lease)] = [lease, len(keys), time.monotonic()]
            for k in keys:
                self.by_key.setdefault(k, []).append(lease)

    def lease_of(self, key: Any) -> Optional[Lease]:
        with self.mu:
            ls = self.by_key.get(key)
            return ls[0] if ls else None

    def drop(self, keys: List[Any]) -> List[Lease]:
        """Unlock keys; returns the leases no key holds any more."""
        done = []
        with self.mu:
            for k in keys:
                ls = self.by_key.get(k)
                if not ls:
                    continue
                lease = ls.pop(0)
                if not ls:
                    del self.by_key[k]
                ref = self.refs.get(id(lease))
                if ref is not None:
                    ref[1] -= 1
                    if ref[1] <= 0:
                        del self.refs[id(lease)]
                        done.append(lease)
        return done

    def held(self) -> List[Tuple[Lease, float]]:
        with self.mu:
            return [(r[0], r[2]) for r in self.refs.values()]

    def clear(self) -> List[Lease]:
        with self.mu:
            out = [r[0] for r in self.refs.values()]
            self.refs.clear()
            self.by_key.clear()
        return out


class StrataL2Adapter(Connected, L2AdapterInterface):
    """An L2 adapter of LMCache's multi-process daemon backed by strata
    (Connected gives it counters() and rate-limited failure logs; its
    namespaces, several, are its own)."""

    def __init__(self, config: Any, l1_memory_desc: Any = None):
        super().__init__(max_capacity_bytes=0)  # strata evicts by itself
        if isinstance(config, dict):
            config = StrataL2AdapterConfig.from_dict(config)
        self.cfg: StrataL2AdapterConfig = config
        # first: it also sets _client, _ns and _last_* that are set again below
        self._init_connected("strata L2 adapter", logger, (
            "store_pages", "stored_pages", "store_failed", "lookup_keys", "locked_keys", "load_keys", "loaded_keys",
            "load_misses", "unlocked_keys", "leases", "leases_released", "lease_renewals", "lease_expired",
            "unservable", "failures"))
        self._store_efd = create_event_notifier()
        self._lookup_efd = create_event_notifier()
        self._load_efd = create_event_notifier()
        self._mu = threading.Lock()
        # guarded by _mu:
        self._next_id = 0
        self._stores: Dict[int, Any] = {}
        self._lookups: Dict[int, Any] = {}
        self._loads: Dict[int, Any] = {}
        self._client: Optional[Client] = None
        self._ns: Dict[Tuple, Namespace] = {}
        self._last_attempt = 0.0
        self._last_error = ""
        self._locks = _Locks()
        self._pool = cf.ThreadPoolExecutor(max_workers=self.cfg.workers, thread_name_prefix="strata-l2")
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name="strata-l2-renew", daemon=True)
        self._renewer.start()
        try:  # connect now so that the daemon's /status tells; retried on use
            with self._mu:
                self._last_attempt = time.monotonic()
                self._client = Client(self.cfg.addr, token=self.cfg.token, node_timeout=self.cfg.node_timeout)
        except Exception as e:
            with self._mu:
                self._last_error = str(e)
            self._fail("connect", e)

    # ---- event fds ----------------------------------------------------------------

    def get_store_event_fd(self) -> int:
        return self._store_efd.fileno()

    def get_lookup_and_lock_event_fd(self) -> int:
        return self._lookup_efd.fileno()

    def get_load_event_fd(self) -> int:
        return self._load_efd.fileno()

    # ---- connection and namespaces ------------------------------------------------------

    def _namespace(self, key: Any, shapes: Any, dtypes: Any) -> Namespace:
        """The namespace of key's (model, kv rank, object group) with
        objects of this layout, opened on first use."""
        layout = tuple((tuple(int(x) for x in s), str(d)) for s, d in zip(shapes, dtypes))
        nk = (key.model_name, int(key.kv_rank), int(key.object_group_id), layout)
        with self._mu:
            ns = self._ns.get(nk)
            if ns is not None:
                return ns
            now = time.monotonic()
            if self._client is None:
                if self._last_attempt and now - self._last_attempt < self.cfg.reconnect_interval:
                    raise ConnectionError(f"strata not connected (last error: {self._last_error})")
                self._last_attempt = now
                try:
                    self._client = Client(self.cfg.addr, token=self.cfg.token, node_timeout=self.cfg.node_timeout)
                    self._last_error = ""
                except Exception as e:
                    self._last_error = str(e)
                    raise
            client = self._client
        try:
            d = self._descriptor(nk)
        except ValueError as e:
            self._count(unservable=1)
            self._log.error("%s: %s", self._what, e)
            raise
        ns = client.open(d)
        with self._mu:
            self._ns.setdefault(nk, ns)
            return self._ns[nk]

    def _descriptor(self, nk: Tuple):
        """An object's namespace: its model, kv rank, object group and
        layout, with a page format of one segment per tensor (axes in the
        object's own order, Xa, Xb, ...: the daemon does not name them) in
        the tensor's numeric format: kv_format for uint8 objects, which
        must then be set (ValueError otherwise)."""
        model, rank, group, layout = nk
        page = 0
        segs = []
        for shape, dt in layout:
            n = 1
            for x in shape:
                n *= x
            page += n * _itemsize(dt)
            elem = normalize_dtype(dt)
            if elem == "uint8":
                if not self.cfg.kv_format:
                    raise ValueError(
                        f"objects of model {model!r} arrive as uint8, SGLang's and vLLM's storage type for fp8 KV: "
                        "set kv_format (fp8_e4m3 or fp8_e5m2) in adapter_params so that e4m3 and e5m2 objects "
                        "never share a namespace")
                elem = self.cfg.kv_format
            segs.append(("kv", [("X" + chr(ord("a") + i), int(x)) for i, x in enumerate(shape)], elem))
        first = layout[0][0]
        tokens = first[2] if len(first) == 4 else int(self.cfg.chunk_size)
        return engine_descriptor(
            tenant=self.cfg.tenant, model=model, model_revision=self.cfg.model_revision, engine="lmcache_mp",
            page_tokens=tokens, dtype=segs[0][2], layout="lmcache_mp_object", page_bytes=page,
            page_format=page_format_string(segs),
            extra={"kv_rank": rank, "object_group": group,
                   "object_layout": ";".join("x".join(map(str, s)) + ":" + d for s, d in layout)})

    @staticmethod
    def _key(ns: Namespace, key: Any) -> bytes:
        h = bytes(key.chunk_hash)
        if key.cache_salt:
            h = hashlib.sha256(b"lmcache-salt\x00" + key.cache_salt.encode("utf-8") + b"\x00" + h).digest()
        return key_from_engine_hash(ns.id, h)

    def _task(self, table: Dict[int, Any], efd: Any, fn, *args) -> int:
        with self._mu:
            tid = self._next_id
            self._next_id += 1

        def run():
            result = fn(*args)
            with self._mu:
                table[tid] = result
            efd.notify()

        self._pool.submit(run)
        return tid

    # ---- store -----------------------------------------------------------------------------

    def submit_store_task(self, keys: List[Any], objects: List[Any]) -> int:
        return self._task(self._stores, self._store_efd, self._store, list(keys), list(objects))

    def _store(self, keys: List[Any], objects: List[Any]) -> Any:
        ok, done_bytes = True, 0
        groups: Dict[int, Tuple[Namespace, List[int]]] = {}
        try:
            for i, (k, o) in enumerate(zip(keys, objects)):
                ns = self._namespace(k, o.get_shapes(), o.get_dtypes())
                groups.setdefault(id(ns), (ns, []))[1].append(i)
            stored_keys, sizes = [], []
            for ns, idx in groups.values():
                pages = [Page(key=self._key(ns, keys[i]), data=objects[i].byte_array) for i in idx]
                res = []
                for a, b in _spans(len(pages), ns.page_bytes, self.cfg.max_call_bytes):
                    res.extend(ns.put(pages[a:b]))
                for i, r in zip(idx, res):
                    if r.stored:
                        done_bytes += ns.page_bytes
                        if r.status == "COMMITTED":
                            stored_keys.append(keys[i])
                            sizes.append(ns.page_bytes)
                    else:
                        ok = False
                self._count(store_pages=len(idx), stored_pages=sum(r.stored for r in res))
            if stored_keys:
                self._notify_keys_stored(stored_keys, sizes)
        except Exception as e:
            self._fail("store", e)
            ok = False
        if not ok:
            self._count(store_failed=1)
        return L2StoreResult(ok, done_bytes if ok else 0)

    def pop_completed_store_tasks(self) -> Dict[int, Any]:
        with self._mu:
            out, self._stores = self._stores, {}
        return out

    # ---- lookup and lock ------------------------------------------------------------------

    def submit_lookup_and_lock_task(self, keys: List[Any], group_layout_descs: Dict[int, Any]) -> int:
        return self._task(self._lookups, self._lookup_efd, self._lookup, list(keys), dict(group_layout_descs or {}))

    def _lookup(self, keys: List[Any], layouts: Dict[int, Any]) -> Any:
        bm = Bitmap(len(keys))
        self._count(lookup_keys=len(keys))
        for ns_key, start, end in self._rows(keys, layouts):
            try:
                ns = self._namespace(keys[start], *ns_key)
                r = ns.lookup([self._key(ns, k) for k in keys[start:end]], lease=True, ttl_ms=self.cfg.lease_ttl_ms)
                if r.hit_prefix and r.lease is not None:
                    self._locks.add(keys[start:start + r.hit_prefix], r.lease)
                    self._count(leases=1, locked_keys=r.hit_prefix)
                    for i in range(start, start + r.hit_prefix):
                        bm.set(i)
            except Exception as e:
                self._fail("lookup", e)
        return bm

    @staticmethod
    def _rows(keys: List[Any], layouts: Dict[int, Any]):
        """(layout, start, end) of each run of keys in one namespace: the
        prefetch controller flattens its (object group, kv rank) rows, each
        in chunk order. Keys of a group without a layout are skipped."""
        start = 0
        while start < len(keys):
            k = keys[start]
            end = start + 1
            while end < len(keys) and (keys[end].model_name, keys[end].kv_rank, keys[end].object_group_id) == \
                    (k.model_name, k.kv_rank, k.object_group_id):
                end += 1
            d = layouts.get(k.object_group_id)
            if d is not None:
                yield (list(d.shapes), list(d.dtypes)), start, end
            start = end

    def query_lookup_and_lock_result(self, task_id: int) -> Any:
        with self._mu:
            return self._lookups.pop(task_id, None)

    def submit_unlock(self, keys: List[Any]) -> None:
        done = self._locks.drop(list(keys))
        self._count(unlocked_keys=len(keys))
        for lease in done:
            try:
                self._pool.submit(self._release, lease)
            except RuntimeError:  # closed: the lease expires on the node
                pass

    def _release(self, lease: Lease) -> None:
        try:
            lease.release(timeout=self.cfg.node_timeout)
            self._count(leases_released=1)
        except Exception as e:  # the node lets it expire
            self._fail("release lease", e)

    def _renew_loop(self) -> None:
        """Renews leases still held when under a third of their TTL is left
        (a load renews its own first: _renew_if_old)."""
        while not self._stop.wait(0.5):
            for lease, _ in self._locks.held():
                self._renew_if_old(lease, 1 / 3)

    def _renew_if_old(self, lease: Lease, left: float) -> None:
        exp = lease.expires_unix_ms
        if not exp:
            return
        ttl = self.cfg.lease_ttl_ms or 10_000
        if exp - time.time() * 1000 > ttl * left:
            return
        try:
            lease.renew(self.cfg.lease_ttl_ms, timeout=self.cfg.node_timeout)
            self._count(lease_renewals=1)
        except Exception as e:
            self._fail("renew lease", e)

    # ---- load ---------------------------------------------------------------------------------

    def submit_load_task(self, keys: List[Any], objects: List[Any]) -> int:
        return self._task(self._loads, self._load_efd, self._load, list(keys), list(objects))

    def _load(self, keys: List[Any], objects: List[Any]) -> Any:
        bm = Bitmap(len(keys))
        groups: Dict[Tuple[int, int], Tuple[Namespace, Optional[Lease], List[int]]] = {}
        for i, (k, o) in enumerate(zip(keys, objects)):
            try:
                ns = self._namespace(k, o.get_shapes(), o.get_dtypes())
            except Exception as e:
                self._fail("load", e)
                continue
            lease = self._locks.lease_of(k)
            groups.setdefault((id(ns), id(lease)), (ns, lease, []))[2].append(i)
        loaded = []
        for ns, lease, idx in groups.values():
            try:
                bufs = [writable_view(objects[i].byte_array) for i in idx]
                if any(len(b) != ns.page_bytes for b in bufs):
                    raise ValueError("load buffer of another size than the namespace's pages")
                skeys = [self._key(ns, keys[i]) for i in idx]
                if lease is not None:
                    self._renew_if_old(lease, 1 / 2)
                out = []
                for a, b in _spans(len(skeys), ns.page_bytes, self.cfg.max_call_bytes):
                    try:
                        out.extend(ns.get(skeys[a:b], bufs[a:b], lease=lease))
                    except Exception as e:
                        if lease is None or "expired" not in str(e).lower():
                            raise
                        self._count(lease_expired=1)  # read unprotected: a page that went is a miss
                        out.extend(ns.get(skeys[a:b], bufs[a:b]))
                for i, o in zip(idx, out):
                    if o is not None:
                        bm.set(i)
                        loaded.append(keys[i])
            except Exception as e:
                self._fail("load", e)
        self._count(load_keys=len(keys), loaded_keys=len(loaded), load_misses=len(keys) - len(loaded))
        if loaded:
            self._notify_keys_accessed(loaded)
        return bm

    def query_load_result(self, task_id: int) -> Any:
        with self._mu:
            return self._loads.pop(task_id, None)

    # ---- status and close ------------------------------------------------------------------

    def report_status(self) -> dict:
        c = self.counters()
        with self._mu:
            connected, namespaces, err = self._client is not None, len(self._ns), self._last_error
        # Healthy while connected: a node that fails a call costs misses and
        # is counted in failures, the cluster carries on.
        return {"is_healthy": connected, "type": "StrataL2Adapter", "addr": self.cfg.addr, "connected": connected,
                "last_error": err, "namespaces": namespaces, "held_leases": len(self._locks.held()), **c}

    def close(self) -> None:
        self._stop.set()
        self._renewer.join(5)
        self._pool.shutdown(wait=True)
        for lease in self._locks.clear():
            try:
                lease.release(timeout=self.cfg.node_timeout)
            except Exception as e:  # closing: the node lets it expire
                self._fail("release lease", e)
        with self._mu:
            c, self._client, self._ns = self._client, None, {}
        if c is not None:
            try:
                c.close()
            except Exception as e:  # sockets to a node that is gone: nothing is lost
                self._log.info("%s: closing the client: %s", self._what, e)
        self._store_efd.close()
        self._lookup_efd.close()
        self._load_efd.close()


def _itemsize(dtype_name: str) -> int:
    import torch

    return int(getattr(torch, dtype_name.replace("torch.", "")).itemsize)
