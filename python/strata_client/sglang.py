"""SGLang HiCache storage backend (L3) on strata.

Load it through SGLang's dynamic storage backend (no SGLang patch)::

    python -m sglang.launch_server ... --enable-hierarchical-cache \\
      --hicache-storage-backend dynamic \\
      --hicache-storage-backend-extra-config '{
        "backend_name": "strata",
        "module_path": "strata_client.sglang",
        "class_name": "StrataHiCacheStorage",
        "interface_v1": 1,
        "strata_addr": "10.0.0.5:7070,10.0.0.6:7070",
        "strata_tenant": "acme",
        "strata_model_revision": "0e9e39f"}'

Matched against sgl-project/sglang ``python/sglang/srt/mem_cache/
hicache_storage.py`` (HiCacheStorage, HiCacheStorageConfig,
HiCacheStorageExtraInfo), ``mem_cache/storage/backend_factory.py`` (the
"dynamic" backend: ``backend_class(storage_config, kwargs)``) and
``managers/cache_controller.py`` (``interface_v1`` selects the zero-copy
``batch_get_v1``/``batch_set_v1`` path, which reads and writes the host KV
pool through ``get_page_buffer_meta``) at commit 001067ff.

Contract kept with the engine: no method raises and none returns None where
a list or count is expected. Any failure (node down, timeout, checksum
mismatch, misconfiguration discovered late) is a miss or a failed write and
is counted in :meth:`StrataHiCacheStorage.counters`.

Keys: SGLang's page hashes (64 hex digits, chained over the prefix) are
scoped to the namespace with ``key_from_engine_hash``; other key strings
(component keys such as ``"<hash>.indexer"``) are hashed first.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ._connector import Connected
from .buffers import ScatterBuffer, readable_bytes
from .client import Page
from .namespace import Namespace
from .descriptor import key_from_engine_hash
from .engines import sglang_descriptor

logger = logging.getLogger(__name__)

try:  # the real interface when SGLang is installed
    from sglang.srt.mem_cache.hicache_storage import (  # type: ignore
        HiCacheStorage,
        HiCacheStorageConfig,
        HiCacheStorageExtraInfo,
    )

    HAVE_SGLANG = True
except Exception:  # stand-ins with the same shape, for use without SGLang
    HAVE_SGLANG = False

    @dataclass
    class HiCacheStorageConfig:  # type: ignore[no-redef]
        tp_rank: int = 0
        tp_size: int = 1
        pp_rank: int = 0
        pp_size: int = 1
        attn_cp_rank: int = 0
        attn_cp_size: int = 1
        is_mla_model: bool = False
        enable_storage_metrics: bool = False
        is_page_first_layout: bool = True
        model_name: Optional[str] = None
        dp_rank: int = 0
        dp_size: int = 1
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False
        extra_config: Optional[dict] = None

    @dataclass
    class HiCacheStorageExtraInfo:  # type: ignore[no-redef]
        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[dict] = None

    class HiCacheStorage:  # type: ignore[no-redef]
        """Minimal stand-in for sglang's HiCacheStorage base class."""

        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

        def register_mem_host_pool_v2(self, host_pool, host_pool_name):
            if not hasattr(self, "registered_pools"):
                self.registered_pools = {}
            self.registered_pools[host_pool_name] = host_pool

        def batch_exists(self, keys, extra_info=None) -> int:
            for i, k in enumerate(keys):
                if not self.exists(k):
                    return i
            return len(keys)

        def clear(self) -> None:
            pass

        def get_stats(self):
            return None


try:
    from sglang.srt.metrics.collector import StorageMetrics  # type: ignore
except Exception:

    @dataclass
    class StorageMetrics:  # type: ignore[no-redef]
        """Same fields as sglang.srt.metrics.collector.StorageMetrics."""

        prefetch_pgs: List[int] = field(default_factory=list)
        backup_pgs: List[int] = field(default_factory=list)
        prefetch_bandwidth: List[float] = field(default_factory=list)
        backup_bandwidth: List[float] = field(default_factory=list)


__all__ = ["StrataHiCacheStorage", "HiCacheStorageConfig", "HiCacheStorageExtraInfo", "HAVE_SGLANG"]


class _Indices(list):
    """A list that answers ``tolist()`` like the torch index tensors SGLang
    passes, for asking a host pool about one page without torch."""

    def tolist(self):
        return list(self)

    def numel(self):
        return len(self)


def _cfg(extra: Dict[str, Any], key: str, env: str, default: Any = None) -> Any:
    v = extra.get(key)
    if v is None or v == "":
        v = os.environ.get(env)
    return default if v is None or v == "" else v


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
        self.zero_copy = bool(int(extra.get("interface_v1", 0) or 0))
        self.mem_pool_host = None
        self._init_connected("strata HiCache backend", logger, (
            "exists_calls", "exists_keys", "exists_hits", "get_pages", "get_hits", "get_misses", "set_pages",
            "set_stored", "set_failed", "set_skipped_existing", "failures", "not_connected"))
        self._aux: Dict[str, Namespace] = {}
        self._metrics = StorageMetrics()
        self._metrics_lock = threading.Lock()
        if mem_pool_host is not None:
            self.register_mem_pool_host(mem_pool_host)

    # ---- setup ----------------------------------------------------------------

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.mem_pool_host = mem_pool_host
        try:
            self._ensure()
        except Exception as e:  # connecting is retried on use
            self._fail("register_mem_pool_host", e)

    def _page_bytes(self) -> int:
        if self.explicit_page_bytes:
            return self.explicit_page_bytes
        pool = self.mem_pool_host
        if pool is None:
            return 0
        if self.zero_copy and hasattr(pool, "get_page_buffer_meta"):
            try:
                n = int(getattr(pool, "page_size", 1) or 1)
                _, sizes = pool.get_page_buffer_meta(_Indices(range(n)))
                sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [int(sizes)]
                return int(sum(int(s) for s in sizes))
            except Exception:
                pass
        try:
            page = pool.get_dummy_flat_data_page()
            return _nbytes(page)
        except Exception:
            return 0

    def descriptor(self):
        """The namespace descriptor this shard uses (see engines.sglang_descriptor)."""
        return sglang_descriptor(
            self.storage_config,
            self.mem_pool_host,
            tenant=self.tenant,
            model=self.model_override,
            model_revision=self.model_revision,
            page_bytes=self._page_bytes(),
            page_tokens=int(getattr(self.mem_pool_host, "page_size", 0) or self.extra.get("strata_page_tokens", 0) or 0),
            dtype=None if self.mem_pool_host is not None else self.extra.get("strata_dtype", ""),
        )

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
        """Number of consecutive keys present from the start."""
        try:
            if not keys:
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
        """Per key, the filled target (or a new buffer) or None for a miss."""
        n = len(keys)
        try:
            if n == 0:
                return []
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
        """True when every page is stored (or was already)."""
        try:
            if not keys:
                return True
            vals = values if values is not None else target_locations
            if vals is None:
                self._count(set_pages=len(keys), set_failed=len(keys))
                return False
            ok = self._put(keys, [readable_bytes(v) for v in vals], None)
            return all(ok)
        except Exception as e:
            self._fail("batch_set", e)
            self._count(set_pages=len(keys), set_failed=len(keys))
            return False

    def _put(self, keys: Sequence[str], datas: Sequence[Any], extra_info: Optional[Any], ns: Optional[Namespace] = None) -> List[bool]:
        ns = ns if ns is not None else self._ensure()
        t0 = time.perf_counter()
        skeys = self._keys(ns, keys)
        ok = [False] * len(keys)
        # Content addressed: skip what is already there instead of sending it.
        present = ns.lookup(skeys).present
        prefix = list(getattr(extra_info, "prefix_keys", None) or [])
        parent0 = self._keys(ns, prefix[-1:])[0] if prefix else None
        pages, where = [], []
        for i, (k, d) in enumerate(zip(skeys, datas)):
            if present[i]:
                ok[i] = True
                continue
            if len(d) != ns.page_bytes:
                continue
            parent = skeys[i - 1] if i else parent0
            pages.append(Page(key=k, data=d, parent=parent, depth=len(prefix) + i))
            where.append(i)
        skipped = sum(present)
        stored = 0
        if pages:
            for j, r in enumerate(ns.put(pages)):
                if r.stored:
                    ok[where[j]] = True
                    stored += 1
        n_ok = sum(ok)
        self._count(set_pages=len(keys), set_stored=stored, set_skipped_existing=skipped, set_failed=len(keys) - n_ok)
        self._record("backup", stored, stored * ns.page_bytes, time.perf_counter() - t0)
        return ok

    # ---- zero-copy path (interface_v1) ---------------------------------------------

    def _segments(self, keys: Sequence[str], host_indices: Any, pool: Any = None) -> List[List[Any]]:
        """Per key, (pointer, size) segments of its page in the host pool."""
        pool = pool if pool is not None else self.mem_pool_host
        ptrs, sizes = pool.get_page_buffer_meta(host_indices)
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
        segs = self._segments(keys, host_indices, pool)
        datas = [b"".join(ctypes.string_at(p, sz) for p, sz in s) for s in segs]
        return self._put(keys, datas, extra_info, ns)

    def batch_get_v1(self, keys: List[str], host_indices: Any, extra_info: Optional[Any] = None) -> List[bool]:
        """Read pages straight into the registered host pool (no staging
        copy: received chunks are written into the pool's page buffers and
        verified before the page counts)."""
        n = len(keys)
        try:
            if n == 0:
                return []
            return self._get_pool(self._ensure(), self.mem_pool_host, keys, host_indices)
        except Exception as e:
            self._fail("batch_get_v1", e)
            self._count(get_pages=n, get_misses=n)
            return [False] * n

    def batch_set_v1(self, keys: List[str], host_indices: Any, extra_info: Optional[Any] = None) -> List[bool]:
        """Write pages from the registered host pool."""
        n = len(keys)
        try:
            if n == 0:
                return []
            return self._set_pool(self._ensure(), self.mem_pool_host, keys, host_indices, extra_info)
        except Exception as e:
            self._fail("batch_set_v1", e)
            self._count(set_pages=n, set_failed=n)
            return [False] * n

    # ---- per-pool transfers (v2: KV plus auxiliary pools) ------------------------------

    def _pool_ns(self, name: Any) -> Namespace:
        """KV pages live in the shard's namespace; every auxiliary pool
        (indexer, mamba, swa, ...) has its own page size and so its own
        namespace (descriptor extra ``pool``)."""
        name = str(getattr(name, "value", name))
        if name in ("kv", "__default__"):
            return self._ensure()
        ns = self._aux.get(name)
        if ns is not None:
            return ns
        self._ensure()
        pool = self._pool_of(name)
        n = int(getattr(pool, "page_size", 1) or 1)
        _, sizes = pool.get_page_buffer_meta(_Indices(range(n)))
        sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [int(sizes)]
        d = sglang_descriptor(self.storage_config, pool, tenant=self.tenant, model=self.model_override,
                              model_revision=self.model_revision, page_bytes=int(sum(int(x) for x in sizes)),
                              extra={"pool": name})
        ns = self._client.open(d)
        self._aux[name] = ns
        return ns

    def _pool_of(self, name: Any) -> Any:
        key = str(getattr(name, "value", name))
        pools = getattr(self, "registered_pools", None) or {}
        for k, v in pools.items():
            if str(getattr(k, "value", k)) == key:
                return v
        if key in ("kv", "__default__"):
            return self.mem_pool_host
        raise KeyError(f"no host pool registered for {key!r}")

    def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[List[Any]] = None, extra_info: Optional[Any] = None) -> Any:
        """Longest usable prefix over the KV pages and every auxiliary pool
        (ALL_PAGES: each page of the prefix; TRAILING_PAGES: the last
        len(transfer.keys) pages of it)."""
        kv = self.batch_exists(keys, extra_info)
        hits: Dict[str, int] = {"kv": kv} if kv else {}
        final = kv
        for t in pool_transfers or []:
            if final == 0:
                break
            name = str(getattr(t.name, "value", t.name))
            try:
                ns = self._pool_ns(name)
                present = ns.lookup(self._keys(ns, keys[:kv])).present
            except Exception as e:
                self._fail("batch_exists_v2", e)
                present = [False] * kv
            if str(getattr(t.hit_policy, "value", t.hit_policy)) == "trailing_pages":
                trailing = max(1, len(t.keys) if t.keys else 1)
                boundary = 0
                for plen in range(kv, 0, -1):
                    if all(present[max(0, plen - trailing):plen]):
                        boundary = plen
                        break
            else:
                boundary = present.index(False) if False in present else kv
            if boundary:
                hits[name] = boundary
            final = min(final, boundary)
        return _pool_result(final, hits)

    def _batch_v2(self, transfers: List[Any], write: bool, extra_info: Any) -> Dict[str, List[bool]]:
        out: Dict[str, List[bool]] = {}
        for t in transfers or []:
            name = str(getattr(t.name, "value", t.name))
            keys = list(t.keys or [])
            try:
                ns, pool = self._pool_ns(name), self._pool_of(name)
                if write:
                    out[name] = self._set_pool(ns, pool, keys, t.host_indices, extra_info)
                else:
                    out[name] = self._get_pool(ns, pool, keys, t.host_indices)
            except Exception as e:
                self._fail("batch_set_v2" if write else "batch_get_v2", e)
                out[name] = [False] * len(keys)
        return out

    def batch_get_v2(self, transfers: List[Any], extra_info: Optional[Any] = None) -> Dict[str, List[bool]]:
        return self._batch_v2(transfers, False, extra_info)

    def batch_set_v2(self, transfers: List[Any], extra_info: Optional[Any] = None) -> Dict[str, List[bool]]:
        return self._batch_v2(transfers, True, extra_info)

    # ---- management -----------------------------------------------------------

    def clear(self) -> bool:
        """Delete every page of this shard's namespace."""
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
        """SGLang StorageMetrics since the last call (pages and GB/s per
        prefetch/backup batch); the cumulative counters are attached as
        ``.strata_counters``."""
        with self._metrics_lock:
            m, self._metrics = self._metrics, StorageMetrics()
        try:
            m.strata_counters = self.counters()
        except Exception:
            pass
        return m

    def close(self) -> None:
        with self._lock:
            c, self._client, self._ns = self._client, None, None
            self._aux = {}
        if c is not None:
            try:
                c.close()
            except Exception:
                pass


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
    try:
        import torch  # type: ignore

        return torch.frombuffer(buf, dtype=torch.uint8)
    except Exception:
        return buf


def _pool_result(kv_hit_pages: int, extra: Dict[str, int]) -> Any:
    try:
        from sglang.srt.mem_cache.hicache_storage import PoolTransferResult  # type: ignore

        return PoolTransferResult(kv_hit_pages, extra)
    except Exception:
        return _PoolTransferResult(kv_hit_pages, extra)


@dataclass
class _PoolTransferResult:
    """Stand-in for sglang's PoolTransferResult."""

    kv_hit_pages: int
    extra_pool_hit_pages: Dict[str, int]
