"""SGLang HiCache storage backend (L3) on strata.

Load it through SGLang's dynamic storage backend (no SGLang patch)::

    python -m sglang.launch_server ... --enable-hierarchical-cache \\
      --hicache-mem-layout page_first \\
      --hicache-storage-backend dynamic \\
      --hicache-storage-backend-extra-config '{
        "backend_name": "strata",
        "module_path": "strata_client.sglang",
        "class_name": "StrataHiCacheStorage",
        "interface_v1": 1,
        "hicache_storage_pass_prefix_keys": true,
        "strata_addr": "10.0.0.5:7070,10.0.0.6:7070",
        "strata_tenant": "acme",
        "strata_model_revision": "0e9e39f"}'

Matched against sglang==0.5.23 as installed (``sglang/srt/mem_cache/
hicache_storage.py``, ``mem_cache/storage/backend_factory.py``,
``managers/cache_controller.py``, ``mem_cache/hybrid_cache/
hybrid_cache_controller.py``, the host pools of ``mem_cache/pool_host`` and
``memory_pool_host.py``):

- the factory imports ``module_path``, checks the class is a subclass of
  SGLang's ``HiCacheStorage`` and constructs it as ``cls(storage_config,
  kwargs)``; the controller then calls ``register_mem_pool_host`` with its
  storage host pool, a hybrid controller calls ``register_mem_host_pool_v2``
  once per pool of its group, and ``on_host_pools_registered`` ends the burst;
- ``interface_v1`` in the extra config selects ``batch_get_v1`` /
  ``batch_set_v1`` (pages moved straight between strata and the host pool's
  buffers named by ``get_page_buffer_meta``); without it the controller
  uses ``batch_get``/``batch_set`` with torch tensors of the pool's dtype;
- ``batch_exists`` is called per ``STORAGE_BATCH_SIZE`` (128) pages with
  ``HiCacheStorageExtraInfo(prefix_keys)``: the page hashes before the
  call's keys from the sequence start, or None unless the operator set
  ``hicache_storage_pass_prefix_keys`` (SGLang pops it from the extra
  config; default False);
- a hybrid model's anchor pool can be logical (DeepSeek V4's
  ``LogicalHostPool``, recognised by its class): its KV pages hold no bytes, so, as SGLang's Mooncake backend does, they
  count as present and transfer nothing while the side pools carry the
  data; a KV pool with a buffer given through ``register_mem_host_pool_v2``
  sizes the KV namespace instead;
- ``batch_exists_v2`` returns ``PoolTransferResult`` with
  ``restorable_prefix_pages``: a TRAILING_PAGES pool (mamba, SWA) holds only
  a window ending at a page, so prefix lengths 5 and 3 can be restorable
  while 4 is not; the controller intersects these sets across ranks.

Contract kept with the engine: only the attach raises (the constructor,
``register_mem_pool_host`` and ``on_host_pools_registered``, with
``UnservableConfiguration`` for a pool whose pages strata cannot name:
SGLang's start fails, saying why); no transfer method raises and none
returns None where a list or count is expected. Any failure after the
attach (node down, timeout, checksum mismatch) is a miss or a failed write
and is counted in :meth:`StrataHiCacheStorage.counters`.

Identity: each pool's page format (``page_format``) is derived at the
attach from the bytes the path in use moves (``_pool_format``), so two
paths or formats that serialise differently never share a namespace.

Keys: SGLang's page hashes (64 hex digits, chained over the prefix) are
scoped to the namespace with ``key_from_engine_hash``; other key strings
are hashed first. Each page is published with its parent (the page before
it) and depth (its index in the sequence): from ``prefix_keys`` when SGLang
passes them; without them a call's first page has no parent and depths
count from the call's first page, which the backend says once in its log
and counts (``sets_without_prefix_keys``).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

try:
    from sglang.srt.mem_cache.hicache_storage import (  # type: ignore
        HiCacheStorage,
        HiCacheStorageConfig,
        HiCacheStorageExtraInfo,
        PoolTransferResult,
    )
except ImportError as e:  # pragma: no cover - exercised only without SGLang
    raise ImportError(
        "strata_client.sglang is SGLang's HiCache storage backend and needs SGLang "
        f"(pip install './python[sglang]'): {e}") from e

from ._connector import Connected
from .buffers import ScatterBuffer, readable_bytes
from .client import Client, Page
from .descriptor import key_from_engine_hash, normalize_dtype, page_format_string
from .engines import sglang_descriptor
from .namespace import Namespace

logger = logging.getLogger(__name__)

__all__ = ["StrataHiCacheStorage", "HiCacheStorageConfig", "HiCacheStorageExtraInfo"]

# _TP_SHARDED_POOLS are the pools split across TP ranks even on a
# rank-replicated (MLA) model: SGLang 0.5.23 keys "mamba" by TP rank in its
# file backend and backs it up on every rank. More can be named with the
# extra-config key strata_tp_sharded_pools.
_TP_SHARDED_POOLS = ("mamba",)

# _STAGING_BYTES bounds the staging buffer batch_set_v1 copies pages into
# (at least one page): a page_first page is two segments (K and V) in the
# host pool, sent as one contiguous page.
_STAGING_BYTES = 64 << 20


@dataclass
class _StorageMetrics:
    """Same fields as sglang.srt.observability.metrics_collector.StorageMetrics,
    used only where that module cannot be imported (SGLang always can)."""

    prefetch_pgs: List[int] = field(default_factory=list)
    backup_pgs: List[int] = field(default_factory=list)
    prefetch_bandwidth: List[float] = field(default_factory=list)
    backup_bandwidth: List[float] = field(default_factory=list)


def _storage_metrics_class() -> Any:
    """SGLang's StorageMetrics: its metrics collector asserts isinstance on
    what get_stats returns (sglang 0.5.23 moved it from
    sglang.srt.metrics.collector to sglang.srt.observability)."""
    try:
        from sglang.srt.observability.metrics_collector import StorageMetrics  # type: ignore

        return StorageMetrics
    except ImportError:
        return _StorageMetrics


class _Indices(list):
    """A list that answers ``tolist()``/``numel()`` like the torch index
    tensors SGLang passes, for asking a host pool about one page."""

    def tolist(self):
        return list(self)

    def numel(self):
        return len(self)


def _cfg(extra: Dict[str, Any], key: str, env: str, default: Any = None) -> Any:
    v = extra.get(key)
    if v is None or v == "":
        v = os.environ.get(env)
    return default if v is None or v == "" else v


def _name(n: Any) -> str:
    """A pool name as a plain string (PoolName is a str Enum)."""
    return str(getattr(n, "value", n))


class _Staging(threading.local):
    buf: Optional[bytearray] = None


class StrataHiCacheStorage(Connected, HiCacheStorage):
    """HiCacheStorage backend that stores pages in a strata cluster."""

    def __init__(self, storage_config: Any = None, kwargs: Any = None, mem_pool_host: Any = None, **kw: Any):
        self.storage_config = storage_config
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        if isinstance(kwargs, dict):
            extra.update({k: v for k, v in kwargs.items() if isinstance(k, str) and k.startswith("strata_")})
        extra.update(kw)
        self.extra = extra
        self.addresses = str(_cfg(extra, "strata_addr", "STRATA_ADDR", ""))
        if not self.addresses:
            raise ValueError("StrataHiCacheStorage: set strata_addr in the extra config (or STRATA_ADDR)")
        self.tenant = str(_cfg(extra, "strata_tenant", "STRATA_TENANT", "default"))
        self.token = _cfg(extra, "strata_token", "STRATA_TOKEN", None)
        self.model_revision = str(_cfg(extra, "strata_model_revision", "STRATA_MODEL_REVISION", ""))
        self.node_timeout = float(_cfg(extra, "strata_node_timeout", "STRATA_NODE_TIMEOUT", 2.0))
        self.reconnect_interval = float(_cfg(extra, "strata_reconnect_interval", "STRATA_RECONNECT_INTERVAL", 5.0))
        self.explicit_page_bytes = int(_cfg(extra, "strata_page_bytes", "STRATA_PAGE_BYTES", 0) or 0)
        self.model_override = _cfg(extra, "strata_model", "STRATA_MODEL", None)
        sharded = str(extra.get("strata_tp_sharded_pools", "") or "")
        self.tp_sharded_pools = set(_TP_SHARDED_POOLS) | {x.strip() for x in sharded.split(",") if x.strip()}
        self.zero_copy = bool(int(extra.get("interface_v1", 0) or 0))
        self.mem_pool_host = None
        self.registered_pools: Dict[Any, Any] = {}
        self._init_connected("strata HiCache backend", logger, (
            "exists_calls", "exists_keys", "exists_hits", "get_pages", "get_hits", "get_misses", "set_pages",
            "set_stored", "set_failed", "set_skipped_existing", "sets_without_prefix_keys", "failures",
            "not_connected"))
        self._aux: Dict[str, Namespace] = {}
        self._aux_tried: Dict[str, float] = {}
        self._formats: Dict[Any, _PoolFormat] = {}  # (id(pool), meta path) -> its page format
        self._warned_prefix = False
        self._staging = _Staging()
        self._metrics = _storage_metrics_class()()
        self._metrics_lock = threading.Lock()
        if mem_pool_host is not None:
            self.register_mem_pool_host(mem_pool_host)

    # ---- setup ----------------------------------------------------------------

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """The controller's storage host pool: the KV pool, or a hybrid
        model's logical anchor (SGLang's LogicalHostPool: then the KV
        namespace waits for a "kv" pool from register_mem_host_pool_v2).
        A KV pool whose pages strata cannot store raises
        UnservableConfiguration here, which fails SGLang's attach (and so
        the server's start) with the engine's own reason."""
        self.mem_pool_host = mem_pool_host
        if mem_pool_host is not None and not _is_logical_anchor(mem_pool_host):
            self._format(mem_pool_host, kv=True)
            self._connect_early("register_mem_pool_host")

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        self.registered_pools[host_pool_name] = host_pool

    def on_host_pools_registered(self) -> None:
        """The registration burst is over: every pool's page format is
        derived now (an unservable pool raises into the attach), then the
        KV namespace opens (a connection failure is retried on use, never
        raised)."""
        for name, pool in self.registered_pools.items():
            if pool is not None and not _is_logical_anchor(pool):
                self._format(pool, kv=_name(name) == "kv")
        if self._kv_pool() is not None:
            self._connect_early("on_host_pools_registered")

    def _connect_early(self, op: str) -> None:
        try:
            self._ensure()
        except Exception as e:  # connecting is retried on use
            self._fail(op, e)

    def _pool_of(self, name: Any) -> Any:
        key = _name(name)
        for k, v in self.registered_pools.items():
            if _name(k) == key:
                return v
        if key in ("kv", "__default__"):
            return self.mem_pool_host
        raise KeyError(f"no host pool registered for {key!r}")

    def _format(self, pool: Any, kv: bool, meta: Optional[bool] = None) -> _PoolFormat:
        """A pool's page format, derived once per pool and path: through
        get_page_buffer_meta (meta: interface_v1 and every batch_*_v2
        transfer) or get_data_page (the generic path); by default the path
        batch_get/batch_set take for the KV pool, and meta for side pools
        (they move through batch_*_v2 only)."""
        if meta is None:
            meta = self.zero_copy or not kv
        f = self._formats.get((id(pool), meta))
        if f is None:
            f = _pool_format(pool, meta, kv)
            if kv and self.explicit_page_bytes and self.explicit_page_bytes != f.page_bytes:
                raise UnservableConfiguration(
                    f"strata_page_bytes {self.explicit_page_bytes} but a page of SGLang {f.pool_class} "
                    f"is {f.page_bytes} bytes ({f.page_format})")
            self._formats[(id(pool), meta)] = f
            self._log.info("%s: SGLang %s pages: %d bytes, format %s", self._what, f.pool_class, f.page_bytes,
                           f.page_format)
        return f

    def _kv_pool(self) -> Any:
        """The pool holding KV bytes: the registered host pool unless it is
        a logical anchor, else a "kv" pool from register_mem_host_pool_v2,
        else None (KV pages hold no bytes)."""
        pool = self.mem_pool_host
        if pool is not None and not _is_logical_anchor(pool):
            return pool
        for k, v in self.registered_pools.items():
            if _name(k) == "kv" and v is not pool and v is not None and not _is_logical_anchor(v):
                return v
        return None

    def descriptor(self):
        """The namespace descriptor of this shard's KV pages (see
        engines.sglang_descriptor), with the page's bytes and format as
        derived from the pool."""
        return self._kv_descriptor()

    def _kv_descriptor(self, meta: Optional[bool] = None):
        pool = self._kv_pool()
        if pool is None:
            raise ValueError("no host pool with a KV buffer is registered (a logical anchor holds no KV bytes)")
        f = self._format(pool, kv=True, meta=meta)
        return sglang_descriptor(
            self.storage_config,
            pool,
            tenant=self.tenant,
            model=self.model_override,
            model_revision=self.model_revision,
            page_bytes=f.page_bytes,
            page_format=f.page_format,
            dtype=f.kv_dtype,
            extra=dict({"sglang_pool": f.pool_class}, **({"sglang_dtypes": f.dtypes} if f.dtypes else {})),
            page_tokens=int(getattr(pool, "page_size", 0) or self.extra.get("strata_page_tokens", 0) or 0),
        )

    def _pool_descriptor(self, name: str, pool: Any):
        f = self._format(pool, kv=False)
        return sglang_descriptor(self.storage_config, pool, tenant=self.tenant, model=self.model_override,
                                 model_revision=self.model_revision, page_bytes=f.page_bytes,
                                 page_format=f.page_format,
                                 extra=dict({"pool": name, "sglang_pool": f.pool_class},
                                            **({"sglang_dtypes": f.dtypes} if f.dtypes else {})),
                                 keep_tp=name in self.tp_sharded_pools)

    def _keys(self, ns: Namespace, keys: Sequence[str]) -> List[bytes]:
        out = []
        for k in keys:
            k = str(k)
            if len(k) == 64:
                try:
                    out.append(key_from_engine_hash(ns.id, bytes.fromhex(k)))
                    continue
                except ValueError:
                    pass
            out.append(key_from_engine_hash(ns.id, hashlib.sha256(k.encode("utf-8")).digest()))
        return out

    # ---- existence -------------------------------------------------------------

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    def batch_exists(self, keys: List[str], extra_info: Optional[Any] = None) -> int:
        """Number of consecutive keys present from the start (0 for a
        logical anchor's pages: nothing of them is stored)."""
        try:
            if not keys:
                return 0
            if self._kv_pool() is None:
                return 0
            ns = self._ensure()
            hit = ns.lookup(self._keys(ns, keys)).hit_prefix
            self._count(exists_calls=1, exists_keys=len(keys), exists_hits=hit)
            return int(hit)
        except Exception as e:
            self._fail("batch_exists", e)
            return 0

    # ---- generic (copying) path ---------------------------------------------------

    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None) -> Any:
        """The page into ``target_location`` (returned), or None on a miss."""
        try:
            return self.batch_get([key], [target_location] if target_location is not None else None)[0]
        except Exception as e:  # pragma: no cover - batch_get does not raise
            self._fail("get", e)
            return None

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None, target_sizes: Optional[Any] = None) -> List[Any]:
        """Per key, the filled target (a flat tensor of the pool's dtype, as
        the controller's get_dummy_flat_data_page makes) or None for a miss."""
        n = len(keys)
        try:
            if n == 0:
                return []
            if self._kv_pool() is None and target_locations is not None:
                return list(target_locations)  # a logical anchor's pages: nothing to move
            ns = self._ensure()
            t0 = time.perf_counter()
            if target_locations is None:
                bufs = [bytearray(ns.page_bytes) for _ in range(n)]
                out = ns.get(self._keys(ns, keys), bufs)
                res = [_as_tensor(b) if o is not None else None for o, b in zip(out, bufs)]
            else:
                targets = list(target_locations)
                res = [None] * n
                idx = [i for i, t in enumerate(targets) if t is not None and _nbytes(t) == ns.page_bytes]
                if len(idx) < n:
                    self._count(failures=n - len(idx))
                if idx:
                    skeys = self._keys(ns, [keys[i] for i in idx])
                    out = ns.get(skeys, [targets[i] for i in idx])
                    for j, i in enumerate(idx):
                        if out[j] is not None:
                            res[i] = targets[i]
            hits = sum(r is not None for r in res)
            self._count(get_pages=n, get_hits=hits, get_misses=n - hits)
            self._record("prefetch", hits, hits * ns.page_bytes, time.perf_counter() - t0)
            return res
        except Exception as e:
            self._fail("batch_get", e)
            self._count(get_pages=n, get_misses=n)
            return [None] * n

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], [value] if value is not None else None, [target_location] if target_location is not None else None)

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        """True when every page is stored (or was already). Values are the
        controller's get_data_page tensors (the pool's dtype: bf16, fp8)."""
        try:
            if not keys:
                return True
            vals = values if values is not None else target_locations
            if vals is None:
                self._count(set_pages=len(keys), set_failed=len(keys))
                return False
            if self._kv_pool() is None:
                return True  # a logical anchor's pages: nothing to store
            ok = self._put(keys, [readable_bytes(v) for v in vals], None)
            return all(ok)
        except Exception as e:
            self._fail("batch_set", e)
            self._count(set_pages=len(keys), set_failed=len(keys))
            return False

    def _chain(self, ns: Namespace, keys: Sequence[str], extra_info: Any, generic: bool = False):
        """Per page its strata key, parent key and depth. prefix_keys (the
        SGLang hashes before keys from the sequence start) give the first
        page's parent and depth; without them the call is all we know."""
        skeys = self._keys(ns, keys)
        prefix = getattr(extra_info, "prefix_keys", None)
        if prefix is None:
            self._count(sets_without_prefix_keys=1)
            if not self._warned_prefix:
                self._warned_prefix = True
                if generic:
                    # cache_controller.py's generic page set calls
                    # batch_set(keys, values) with no extra_info at all,
                    # whatever hicache_storage_pass_prefix_keys says.
                    fix = ("SGLang's generic path (interface_v1 off) passes no prefix keys whatever "
                           "hicache_storage_pass_prefix_keys says; set \"interface_v1\": 1 in "
                           "--hicache-storage-backend-extra-config")
                else:
                    fix = ("set \"hicache_storage_pass_prefix_keys\": true in "
                           "--hicache-storage-backend-extra-config")
                self._log.warning(
                    "%s: SGLang passes no prefix_keys: each write's first page is stored without a parent "
                    "and depths count from it, so strata prices deep pages as shallow ones and cannot "
                    "evict leaf first across writes; %s", self._what, fix)
            prefix = []
        parent0 = self._keys(ns, [prefix[-1]])[0] if prefix else None
        parents = [skeys[i - 1] if i else parent0 for i in range(len(skeys))]
        return skeys, parents, len(prefix)

    def _put(self, keys: Sequence[str], datas: Sequence[Any], extra_info: Optional[Any], ns: Optional[Namespace] = None) -> List[bool]:
        return self._store(ns if ns is not None else self._ensure(), keys, extra_info, lambda i, j: datas[i],
                           generic=True)

    def _store(self, ns: Namespace, keys: Sequence[str], extra_info: Any, page_at: Any, per_round: int = 0,
               generic: bool = False) -> List[bool]:
        """Publish the pages of keys that strata lacks (content addressed:
        present ones are not sent, nor read from the pool). page_at(i, j)
        gives page i's bytes, j its place in the round of at most per_round
        pages (0: one round); each round is put before the next is asked."""
        t0 = time.perf_counter()
        skeys, parents, depth0 = self._chain(ns, keys, extra_info, generic)
        n = len(keys)
        deepest = depth0 + n - 1  # one chain: its last page is the deepest
        # On the native plane one call looks the pages up and puts those
        # missing (skip_present): beside the scheduler's busy thread each
        # call's return waits for the GIL (up to the 5 ms switch interval),
        # so a lookup of its own would cost one wait more. Elsewhere the
        # lookup comes first, so that present pages are not even staged.
        native = not per_round and ns.client.native_active
        if native:
            ok, todo, skipped = [False] * n, list(range(n)), 0
        else:
            ok = [bool(x) for x in ns.lookup(skeys).present]
            todo = [i for i in range(n) if not ok[i]]
            skipped = n - len(todo)
        per = per_round or len(todo) or 1
        stored = 0
        for start in range(0, len(todo), per):
            pages, where = [], []
            for j, i in enumerate(todo[start:start + per]):
                d = page_at(i, j)
                if d is None or len(d) != ns.page_bytes:
                    continue
                pages.append(Page(key=skeys[i], data=d, parent=parents[i], depth=depth0 + i, chain_depth=deepest))
                where.append(i)
            if pages:
                for r, i in zip(ns.put(pages, skip_present=native), where):
                    ok[i] = r.stored
                    if native and r.status == "EXISTS":
                        skipped += 1
                    elif r.stored:
                        stored += 1
        self._count(set_pages=n, set_stored=stored, set_skipped_existing=skipped, set_failed=n - sum(ok))
        self._record("backup", stored, stored * ns.page_bytes, time.perf_counter() - t0)
        return ok

    # ---- zero-copy path (interface_v1) ---------------------------------------------

    def _segments(self, keys: Sequence[str], host_indices: Any, pool: Any) -> List[List[Any]]:
        """Per key, (pointer, size) segments of its page in the host pool."""
        meta = pool.get_page_buffer_meta(host_indices)
        if meta is None:
            raise ValueError("host pool has no page buffers")
        ptrs, sizes = meta
        ptrs = list(ptrs)
        if not isinstance(sizes, (list, tuple)):
            sizes = [int(sizes)] * len(ptrs)
        sizes = list(sizes)
        n = len(keys)
        if n == 0 or len(ptrs) % n or len(sizes) != len(ptrs):
            raise ValueError(f"host pool gave {len(ptrs)} buffers for {n} pages")
        per = len(ptrs) // n
        return [[(int(ptrs[i * per + j]), int(sizes[i * per + j])) for j in range(per)] for i in range(n)]

    def _get_pool(self, ns: Namespace, pool: Any, keys: Sequence[str], host_indices: Any) -> List[bool]:
        """Pages read straight into the pool's buffers: over the raw plane
        each segment is received into with recv_into and checksummed as it
        arrives; nothing counts before its checksum verified."""
        n = len(keys)
        t0 = time.perf_counter()
        segs = self._segments(keys, host_indices, pool)
        bufs, idx = [], []
        for i, s in enumerate(segs):
            if sum(sz for _, sz in s) != ns.page_bytes:
                continue
            bufs.append(ScatterBuffer([_ptr_view(p, sz) for p, sz in s]))
            idx.append(i)
        res = [False] * n
        if idx:
            out = ns.get(self._keys(ns, [keys[i] for i in idx]), bufs)
            for j, i in enumerate(idx):
                res[i] = out[j] is not None
        hits = sum(res)
        self._count(get_pages=n, get_hits=hits, get_misses=n - hits)
        self._record("prefetch", hits, hits * ns.page_bytes, time.perf_counter() - t0)
        return res

    def _set_pool(self, ns: Namespace, pool: Any, keys: Sequence[str], host_indices: Any, extra_info: Any) -> List[bool]:
        """Pages written from the pool's buffers with at most one copy each:
        a page of one segment is sent from the pool itself; a page of
        several (K and V of a page_first pool) goes to the native plane as
        its segments (gathered there, in the call that publishes the
        batch) or, on the Python planes, is copied once into a reused
        staging buffer (ctypes.memmove, which releases the GIL), in rounds
        of at most _STAGING_BYTES."""
        segs = self._segments(keys, host_indices, pool)
        size = ns.page_bytes
        if all(len(s) == 1 for s in segs):
            return self._store(ns, keys, extra_info,
                               lambda i, j: _ptr_view(*segs[i][0]) if segs[i][0][1] == size else None)
        if ns.client.native_active:
            # The native plane gathers a page's segments itself, off the
            # GIL, in the same call that publishes the batch.
            return self._store(ns, keys, extra_info,
                               lambda i, j: ScatterBuffer([_ptr_view(p, sz) for p, sz in segs[i]])
                               if sum(sz for _, sz in segs[i]) == size else None)
        per_round = max(1, min(len(keys), _STAGING_BYTES // max(1, size)))
        buf = self._staging.buf
        if buf is None or len(buf) < per_round * size:
            buf = self._staging.buf = bytearray(per_round * size)
        base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        mv = memoryview(buf)

        def page_at(i: int, j: int) -> Optional[memoryview]:
            if sum(sz for _, sz in segs[i]) != size:
                return None  # not a page of this namespace: a failed write
            off = j * size
            for p, sz in segs[i]:
                ctypes.memmove(base + off, p, sz)
                off += sz
            return mv[j * size:(j + 1) * size]

        return self._store(ns, keys, extra_info, page_at, per_round)

    def batch_get_v1(self, keys: List[str], host_indices: Any, extra_info: Optional[Any] = None) -> List[bool]:
        """Read pages straight into the registered host pool."""
        return self._v1("batch_get_v1", len(keys), ("get_pages", "get_misses"),
                        lambda ns, pool: self._get_pool(ns, pool, keys, host_indices))

    def batch_set_v1(self, keys: List[str], host_indices: Any, extra_info: Optional[Any] = None) -> List[bool]:
        """Write pages from the registered host pool."""
        return self._v1("batch_set_v1", len(keys), ("set_pages", "set_failed"),
                        lambda ns, pool: self._set_pool(ns, pool, keys, host_indices, extra_info))

    def _v1(self, op: str, n: int, failed: Tuple[str, ...], move: Callable[[Namespace, Any], List[bool]]) -> List[bool]:
        """A v1 call of n pages: move(ns, pool) moves them between the node
        and the registered host pool. Without a pool (a logical anchor)
        there is nothing to move: all True. On an error, op's failure is
        logged and the n pages are counted in each counter of failed: all
        False."""
        try:
            if n == 0:
                return []
            pool = self._kv_pool()
            if pool is None:
                return [True] * n
            return move(self._ensure(), pool)
        except Exception as e:
            self._fail(op, e)
            self._count(**{c: n for c in failed})
            return [False] * n

    # ---- per-pool transfers (v2: KV plus side pools) ------------------------------

    def _pool_ns(self, name: str) -> Namespace:
        """KV pages live in the shard's namespace; every side pool (indexer,
        mamba, swa, ...) has its own page size and so its own namespace
        (descriptor extra ``pool``; TP kept for TP-sharded pools)."""
        if name in ("kv", "__default__"):
            return self._ensure()
        ns = self._aux.get(name)
        if ns is not None:
            return ns
        with self._lock:
            ns = self._aux.get(name)
            if ns is not None:
                return ns
            now = time.monotonic()
            last = self._aux_tried.get(name, 0.0)
            if last and now - last < self.reconnect_interval:
                raise ConnectionError(f"strata not connected (pool {name})")
            self._aux_tried[name] = now
            if name == "kv@meta":
                d = self._kv_descriptor(meta=True)
            else:
                d = self._pool_descriptor(name, self._pool_of(name))
            if self._client is None:
                self._client = Client(self.addresses, token=self.token, node_timeout=self.node_timeout)
            client = self._client
        ns = client.open(d)
        with self._lock:
            self._aux[name] = ns
        return ns

    def _kv_meta_ns(self) -> Namespace:
        """The namespace of KV pages moved through get_page_buffer_meta
        (batch_*_v2): the KV namespace when that is the KV path's format
        too, else one of its own (interface_v1 off on a layout whose
        generic path serialises a page in another order)."""
        pool = self._kv_pool()
        if self.zero_copy or self._format(pool, kv=True, meta=True) == self._format(pool, kv=True):
            return self._ensure()
        return self._pool_ns("kv@meta")

    def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[List[Any]] = None,
                        extra_info: Optional[Any] = None) -> Any:
        """The usable prefix over the KV pages and every side pool, with the
        set of restorable prefix lengths (ALL_PAGES: every page of the
        prefix; TRAILING_PAGES: the last len(transfer.keys) pages of it;
        BLOCK_GROUPS, declared but used by no controller in 0.5.23: its
        leading complete groups, never gating the KV hit)."""
        try:
            transfers = list(pool_transfers or [])
            if self._kv_pool() is None:
                # A logical anchor: the side pools decide (Mooncake's rule).
                kv = len(keys) if transfers else 0
            elif keys:
                ns = self._kv_meta_ns()
                kv = int(ns.lookup(self._keys(ns, keys)).hit_prefix)
                self._count(exists_calls=1, exists_keys=len(keys), exists_hits=kv)
            else:
                kv = 0
            hits: Dict[str, int] = {"kv": kv} if kv else {}
            restorable = list(range(1, kv + 1))
            for t in transfers:
                if not restorable:
                    break
                name = _name(t.name)
                try:
                    ns = self._pool_ns(name)
                    present = list(ns.lookup(self._keys(ns, keys[:kv])).present)
                except Exception as e:
                    self._fail("batch_exists_v2", e)
                    present = [False] * kv
                policy = _name(getattr(t, "hit_policy", "all_pages"))
                if policy == "trailing_pages":
                    window = max(1, len(t.keys) if t.keys else 1)
                    pool_ok = {p for p in range(1, kv + 1) if all(present[max(0, p - window):p])}
                    boundary = max(pool_ok, default=0)
                elif policy == "block_groups":
                    group = max(1, int(getattr(t, "group_pages", 0) or 1))
                    whole = 0
                    while whole + group <= kv and all(present[whole:whole + group]):
                        whole += group
                    if whole:
                        hits[name] = whole
                    continue
                else:
                    boundary = present.index(False) if False in present else kv
                    pool_ok = set(range(1, boundary + 1))
                if boundary:
                    hits[name] = boundary
                restorable = [p for p in restorable if p in pool_ok]
            final = restorable[-1] if restorable else 0
            return PoolTransferResult(final, hits, restorable)
        except Exception as e:
            self._fail("batch_exists_v2", e)
            return PoolTransferResult(0, {}, [])

    def _batch_v2(self, transfers: List[Any], write: bool, extra_info: Any) -> Dict[Any, List[bool]]:
        out: Dict[Any, List[bool]] = {}
        for t in transfers or []:
            name = _name(t.name)
            keys = list(t.keys or [])
            try:
                if not keys:
                    out[t.name] = []
                    continue
                if name in ("kv", "__default__"):
                    pool = self._kv_pool()
                    if pool is None:  # a logical anchor: nothing to move
                        out[t.name] = [True] * len(keys)
                        continue
                    ns = self._kv_meta_ns()
                else:
                    pool, ns = self._pool_of(name), self._pool_ns(name)
                hi = t.host_indices
                want = len(keys) * int(getattr(pool, "page_size", 1) or 1)
                if hi is None or int(hi.numel()) != want:
                    raise ValueError(f"pool {name}: {0 if hi is None else int(hi.numel())} host indices for {len(keys)} pages")
                if write:
                    out[t.name] = self._set_pool(ns, pool, keys, hi, extra_info)
                else:
                    out[t.name] = self._get_pool(ns, pool, keys, hi)
            except Exception as e:
                self._fail("batch_set_v2" if write else "batch_get_v2", e)
                out[t.name] = [False] * len(keys)
        return out

    def batch_get_v2(self, transfers: List[Any], extra_info: Optional[Any] = None) -> Dict[Any, List[bool]]:
        return self._batch_v2(transfers, False, extra_info)

    def batch_set_v2(self, transfers: List[Any], extra_info: Optional[Any] = None) -> Dict[Any, List[bool]]:
        return self._batch_v2(transfers, True, extra_info)

    # ---- management -----------------------------------------------------------

    def clear(self) -> bool:
        """Delete every page of this shard's KV namespace."""
        try:
            ns = self._ensure()
            keys = ns.list_keys()
            for i in range(0, len(keys), 4096):
                ns.delete(keys[i:i + 4096])
            return True
        except Exception as e:
            self._fail("clear", e)
            return False

    def _record(self, kind: str, pages: int, nbytes: int, seconds: float) -> None:
        if pages <= 0:
            return
        gbps = nbytes / max(seconds, 1e-9) / 1e9
        with self._metrics_lock:
            m = self._metrics
            if kind == "prefetch":
                m.prefetch_pgs.append(pages)
                m.prefetch_bandwidth.append(gbps)
            else:
                m.backup_pgs.append(pages)
                m.backup_bandwidth.append(gbps)

    def get_stats(self):
        """SGLang's StorageMetrics since the last call (pages and GB/s per
        prefetch/backup batch); the cumulative counters are attached as
        ``.strata_counters``."""
        with self._metrics_lock:
            m, self._metrics = self._metrics, _storage_metrics_class()()
        try:
            m.strata_counters = self.counters()
        except AttributeError as e:  # a StorageMetrics that takes no new attributes
            self._fail("get_stats", e)
        return m

    def close(self) -> None:
        with self._lock:
            c, self._client, self._ns = self._client, None, None
            self._aux = {}
        if c is not None:
            try:
                c.close()
            except Exception as e:  # closing sockets to a node that is gone: nothing is lost
                self._log.info("%s: closing the client: %s", self._what, e)


class UnservableConfiguration(RuntimeError):
    """SGLang runs a configuration whose pages strata cannot store as they
    are (raised at attach, so the server does not start with a backend that
    would do nothing)."""


# _AXES names the axes of SGLang 0.5.23's host kv_buffer, outermost first,
# by pool class and layout, as their init_kv_buffer builds it
# (mem_cache/pool_host/mha.py, pool_host/mla.py): S K/V stack, L layer, T
# token, P page, H head, D head dim, C latent width. A page's format is
# derived from which of these axes its bytes walk, in the order the path in
# use (get_page_buffer_meta or get_data_page) serialises them. Other pools'
# pages are their class's opaque format (see _pool_format).
_AXES = {
    ("MHATokenToKVPoolHost", "layer_first"): ("kv", "SLTHD"),
    ("MHATokenToKVPoolHost", "page_first"): ("kv", "STLHD"),
    ("MHATokenToKVPoolHost", "page_first_direct"): ("kv", "SPLTHD"),
    ("MHATokenToKVPoolHost", "page_head"): ("kv", "SPHTLD"),
    ("MLATokenToKVPoolHost", "layer_first"): ("latent", "LTHC"),
    ("MLATokenToKVPoolHost", "page_first"): ("latent", "TLHC"),
    ("MLATokenToKVPoolHost", "page_first_direct"): ("latent", "PLTHC"),
}


@dataclass
class _PoolFormat:
    """One host pool's page as strata stores it: its bytes and format."""

    page_bytes: int
    page_format: str
    kv_dtype: str
    pool_class: str
    dtypes: str = ""  # a side pool's tensor dtypes, by attribute: its bytes are its class's format of these


def _is_logical_anchor(pool: Any) -> bool:
    """SGLang's own marker of a pool that holds no bytes: LogicalHostPool
    (mem_cache/memory_pool_host.py), DeepSeek V4's anchor."""
    try:
        from sglang.srt.mem_cache.memory_pool_host import LogicalHostPool  # type: ignore
    except ImportError:  # pragma: no cover - an SGLang without it has no logical anchors
        return False
    return isinstance(pool, LogicalHostPool)


def _kv_elem(pool: Any) -> str:
    """The numeric format of a KV pool's elements. SGLang keeps fp8 KV in
    uint8 tensors (mem_cache/memory_pool.py, KVCache.__init__: store_dtype
    is uint8 for e4m3fn, e5m2 and e4m3fnuz alike), so uint8 says nothing:
    the format is then the server's --kv-cache-dtype as
    model_executor/model_runner.py configure_kv_cache_dtype resolves it
    (mem_cache/kv_cache_dtype.py: fp8_e4m3 -> float8_e4m3fn, fp8_e5m2 ->
    float8_e5m2, "auto" with an FP8 KV quant config -> float8_e4m3fn; on
    ROCm the platform's fp8_dtype), read from SGLang's runtime context."""
    import torch  # type: ignore

    dt = getattr(pool, "dtype", None)
    if dt is None:
        raise UnservableConfiguration(f"{type(pool).__name__} has no dtype")
    if dt != torch.uint8:
        return normalize_dtype(str(dt))
    from sglang.srt import runtime_context  # type: ignore

    try:
        arg = str(runtime_context.get_model().kv_cache_dtype)
    except ValueError as e:
        raise UnservableConfiguration(
            f"{type(pool).__name__} stores its KV as uint8 and SGLang's runtime context is not published, "
            f"so strata cannot tell fp8_e4m3 from fp8_e5m2 pages ({e})") from e
    if arg in ("fp8_e4m3", "fp8_e5m2", "auto"):
        if torch.version.hip:
            from sglang.kernels.ops.quantization.fp8_kernel import fp8_dtype  # type: ignore

            return normalize_dtype(str(fp8_dtype))
        return "fp8_e5m2" if arg == "fp8_e5m2" else "fp8_e4m3"
    raise UnservableConfiguration(
        f"--kv-cache-dtype {arg}: {type(pool).__name__} stores it as uint8 and strata knows no page format for it")


def _pool_format(pool: Any, zero_copy: bool, kv: bool) -> _PoolFormat:
    """The format of one page of a host pool, derived from the bytes the
    path in use moves: the segments get_page_buffer_meta names for one page
    (interface_v1) or the view get_data_page returns (the generic path), as
    runs of the pool's kv_buffer. Engine errors (a pool that has no flat L3
    pages, an unsupported layout) propagate, wrapped with the pool and
    layout: the backend refuses at attach."""
    cls = type(pool).__name__
    layout = str(getattr(pool, "layout", "") or "")
    try:
        ps = int(getattr(pool, "page_size", 1) or 1)
        if zero_copy:
            meta = pool.get_page_buffer_meta(_Indices(range(ps)))
            if meta is None:
                raise ValueError("get_page_buffer_meta named no buffers for a page")
            ptrs, sizes = meta
            ptrs = [int(p) for p in ptrs]
            sizes = [int(x) for x in sizes] if isinstance(sizes, (list, tuple)) else [int(sizes)] * len(ptrs)
            runs = list(zip(ptrs, sizes))
        else:
            runs = []
            _view_runs(pool.get_data_page(0, flat=False), runs)
    except Exception as e:
        raise UnservableConfiguration(
            f"SGLang {cls} (layout {layout!r}, {'interface_v1' if zero_copy else 'generic path'}) gives no "
            f"page strata can store: {type(e).__name__}: {e}") from e
    nbytes = sum(n for _, n in runs)
    if nbytes <= 0:
        raise UnservableConfiguration(f"SGLang {cls} (layout {layout!r}) gives pages of {nbytes} bytes")
    buf = getattr(pool, "kv_buffer", None)
    role, names = None, ""
    for c in type(pool).__mro__:
        if (c.__name__, layout) in _AXES:
            role, names = _AXES[(c.__name__, layout)]
            break
    if not kv or role is None or buf is None or not hasattr(buf, "data_ptr"):
        # A side pool's bytes (mamba state, indexer keys with scales) and a
        # KV pool of a class strata has no axes for (DeepSeek V4's packed
        # pages) are their class's own format of the dtypes it names:
        # described by class, layout, dtypes and size.
        fmt = page_format_string([("state" if not kv else "kv", [("B", nbytes)], "uint8")])
        return _PoolFormat(nbytes, fmt, normalize_dtype(str(getattr(pool, "dtype", "") or "")), cls,
                           _dtypes_of(pool))
    elem = _kv_elem(pool)
    itemsize = int(buf.element_size())
    base = int(buf.data_ptr())
    shape = tuple(int(x) for x in buf.shape)
    if len(names) != len(shape):
        raise UnservableConfiguration(
            f"SGLang {cls} (layout {layout!r}) has a kv_buffer of shape {shape}, not the {names} strata knows")
    try:
        axes = _axes_of_runs(shape, itemsize, [(p - base, n) for p, n in runs])
    except ValueError as e:
        raise UnservableConfiguration(f"SGLang {cls} (layout {layout!r}): {e}") from e
    fmt = page_format_string([(role, [(names[k], e) for k, e in axes if e > 1], elem)])
    return _PoolFormat(nbytes, fmt, elem, cls)


def _dtypes_of(pool: Any) -> str:
    """The torch dtypes a pool names (dtype, conv_dtype, temporal_dtype,
    indexer_dtype, ...), as "attr=dtype" sorted: a mamba pool of bf16 and
    one of fp16 state have pages of one size and other bytes."""
    import torch  # type: ignore

    out = []
    for k, v in sorted(vars(pool).items()):
        if k.endswith("dtype") and isinstance(v, torch.dtype):
            out.append(f"{k}={normalize_dtype(str(v))}")
    return ",".join(out)


def _view_runs(v: Any, out: List[Any]) -> None:
    """The contiguous runs of tensor view v, in its logical order, as
    (address, bytes)."""
    if v.is_contiguous():
        out.append((int(v.data_ptr()), int(v.numel()) * int(v.element_size())))
        return
    for i in range(v.shape[0]):
        _view_runs(v[i], out)


def _axes_of_runs(shape: Sequence[int], itemsize: int, runs: Sequence[Any]) -> List[Any]:
    """The axes of a C-contiguous buffer of ``shape`` that a page's runs
    (byte offset, bytes) walk, outermost first, as (axis, extent): the axes
    one run covers, after the axes the runs step through in order. Raises
    ValueError when the runs are not a regular walk of the buffer."""
    if not runs:
        raise ValueError("a page of no runs")
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    n0 = runs[0][1]
    if any(n != n0 or n % itemsize or off % itemsize or off < 0 for off, n in runs):
        raise ValueError(f"page runs {list(runs)[:4]} are not equal whole elements of the buffer")
    rem = n0 // itemsize
    inner: List[Any] = []
    for k in range(len(shape) - 1, -1, -1):
        if rem == 1:
            break
        if rem >= shape[k]:
            if rem % shape[k]:
                raise ValueError(f"a run of {n0} bytes does not cover whole rows of axis {k}")
            inner.append((k, shape[k]))
            rem //= shape[k]
        else:
            inner.append((k, rem))
            rem = 1
    if rem != 1:
        raise ValueError(f"a run of {n0} bytes is larger than the buffer")
    inner.reverse()
    coords = []
    for off, _ in runs:
        e = off // itemsize
        coords.append(tuple((e // strides[k]) % shape[k] for k in range(len(shape))))
    varying = [k for k in range(len(shape)) if len({c[k] for c in coords}) > 1]
    changes = {k: sum(1 for a, b in zip(coords, coords[1:]) if a[k] != b[k]) for k in varying}
    order = sorted(varying, key=lambda k: (changes[k], k))
    extents = [len({c[k] for c in coords}) for k in order]
    total = 1
    for x in extents:
        total *= x
    if total != len(runs):
        raise ValueError(f"{len(runs)} runs do not walk a grid of {extents}")
    lo = {k: min(c[k] for c in coords) for k in order}
    for i, c in enumerate(coords):
        rest = i
        for k, ext in reversed(list(zip(order, extents))):
            if c[k] - lo[k] != rest % ext:
                raise ValueError("the runs do not walk their axes in nested order")
            rest //= ext
    return [(k, e) for k, e in zip(order, extents)] + inner


def _nbytes(t: Any) -> int:
    if t is None:
        return 0
    if hasattr(t, "numel") and hasattr(t, "element_size"):
        return int(t.numel()) * int(t.element_size())
    if hasattr(t, "nbytes"):
        return int(t.nbytes)
    return len(memoryview(t).cast("B"))


def _ptr_view(ptr: int, size: int) -> memoryview:
    return memoryview((ctypes.c_char * size).from_address(ptr)).cast("B")


def _as_tensor(buf: bytearray) -> Any:
    import torch  # type: ignore

    return torch.frombuffer(buf, dtype=torch.uint8)
