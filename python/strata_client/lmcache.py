"""LMCache remote connector on strata (a remote storage plugin).

LMCache configuration (YAML)::

    chunk_size: 256
    local_cpu: true
    max_local_cpu_size: 5
    remote_serde: naive
    remote_storage_plugins: ["strata"]
    extra_config:
      remote_storage_plugin.strata.module_path: strata_client.lmcache
      remote_storage_plugin.strata.class_name: StrataConnectorAdapter
      remote_storage_plugin.strata.addr: "10.0.0.5:7070,10.0.0.6:7070"
      remote_storage_plugin.strata.tenant: acme
      remote_storage_plugin.strata.model_revision: 0e9e39f

(or the deprecated ``remote_url: strata://10.0.0.5:7070,10.0.0.6:7070``).

Matched against LMCache/LMCache ``lmcache/v1/storage_backend/connector/
__init__.py`` (ConnectorAdapter, ConnectorContext, the
``remote_storage_plugin.<name>.module_path``/``class_name`` plugin loader,
``plugin://<name>`` URLs) and ``connector/base_connector.py`` (RemoteConnector
with ``__init__(config, metadata)``, ``exists``/``exists_sync``/``get``/
``put``/``list``/``close``, ``batched_get``/``batched_put``,
``batched_contains(keys) -> int`` (prefix hits), ``batched_async_contains``
and ``batched_get_non_blocking``), as in LMCache's dev branch (2025-2026).

Never raises into LMCache: failures are misses (``None``/``False``/0) or
dropped writes, and are counted in ``StrataConnector.counters()``.

Storage format: one LMCache chunk is one strata page of a fixed size,
``16 + [remote metadata] + full chunk bytes``: a 16-byte header (magic
``SLC1``, u32 reserved, u64 payload length, little-endian), then the
LMCache RemoteMetadata when ``save_chunk_meta`` is on, then the KV bytes,
zero-padded (a partial last chunk is shorter). Keys are
``key_from_engine_hash(namespace, SHA-256(key.to_string()))``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import hashlib
import logging
import struct
from typing import Any, Dict, List, Optional

from ._connector import Connected
from .buffers import readable_bytes
from .client import Lease, Page
from .namespace import Namespace
from .descriptor import key_from_engine_hash
from .engines import lmcache_descriptor

logger = logging.getLogger(__name__)

PLUGIN_TYPE = "strata"
SCHEME = "strata://"
HEADER = struct.Struct("<4sIQ")
MAGIC = b"SLC1"

try:  # the real interfaces when LMCache is installed
    from lmcache.v1.storage_backend.connector import ConnectorAdapter, ConnectorContext  # type: ignore
    from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector  # type: ignore

    HAVE_LMCACHE = True
except Exception:  # stand-ins with the same shape
    HAVE_LMCACHE = False

    class RemoteConnector:  # type: ignore[no-redef]
        """Minimal stand-in for LMCache's RemoteConnector base class."""

        def __init__(self, config: Any = None, metadata: Any = None):
            pass

        def post_init(self):
            pass

        def _unsupported(self) -> bool:
            return False

        support_ping = support_batched_get = support_batched_put = _unsupported
        support_batched_contains = support_batched_async_contains = support_batched_get_non_blocking = _unsupported

    class ConnectorAdapter:  # type: ignore[no-redef]
        def __init__(self, schema: str = "") -> None:
            self.schema = schema

        def can_parse(self, url: str) -> bool:
            return self.schema != "" and url.startswith(self.schema)

    class ConnectorContext:  # type: ignore[no-redef]
        def __init__(self, url, loop, local_cpu_backend, config, metadata, plugin_name=None):
            self.url = url
            self.loop = loop
            self.local_cpu_backend = local_cpu_backend
            self.config = config
            self.metadata = metadata
            self.plugin_name = plugin_name


__all__ = ["StrataConnectorAdapter", "StrataConnector", "HAVE_LMCACHE"]


def _plugin_type(name: str) -> str:
    return name.split(".", 1)[0]


class StrataConnectorAdapter(ConnectorAdapter):
    """Matches ``strata://host:port[,host:port]`` and ``plugin://strata[.x]``."""

    def __init__(self) -> None:
        super().__init__(SCHEME)

    def can_parse(self, url: str) -> bool:
        if url.startswith(SCHEME):
            return True
        if url.startswith("plugin://"):
            return _plugin_type(url[len("plugin://"):]) == PLUGIN_TYPE
        return False

    def create_connector(self, context: Any) -> "StrataConnector":
        return StrataConnector(
            url=context.url,
            loop=context.loop,
            local_cpu_backend=context.local_cpu_backend,
            config=context.config,
            metadata=getattr(context, "metadata", None),
            plugin_name=getattr(context, "plugin_name", None),
        )


class StrataConnector(Connected, RemoteConnector):
    """An LMCache RemoteConnector backed by a strata cluster."""

    def __init__(self, url: str = "", loop: Optional[asyncio.AbstractEventLoop] = None, local_cpu_backend: Any = None,
                 config: Any = None, metadata: Any = None, plugin_name: Optional[str] = None):
        if metadata is None:
            metadata = getattr(local_cpu_backend, "metadata", None)
        if config is None:
            config = getattr(local_cpu_backend, "config", None)
        try:
            super().__init__(config, metadata)  # newer LMCache: chunk geometry
        except TypeError:
            super().__init__()  # older LMCache: no constructor arguments
        except Exception as e:  # the base needs LMCache internals we cannot rely on
            logger.warning("strata connector: base init: %s", e)
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.metadata = metadata
        self.plugin_name = plugin_name or PLUGIN_TYPE
        extra = dict(getattr(config, "extra_config", None) or {})
        pre = f"remote_storage_plugin.{self.plugin_name}."

        def opt(name: str, default: Any = None) -> Any:
            for k in (pre + name, "strata_" + name):
                if extra.get(k) not in (None, ""):
                    return extra[k]
            return default

        addr = opt("addr", "")
        if not addr and url.startswith(SCHEME):
            addr = url[len(SCHEME):].split("/", 1)[0].split("?", 1)[0]
        if not addr:
            raise ValueError(f"strata connector: set {pre}addr in extra_config (or use a strata://host:port url)")
        self.addresses = str(addr)
        self.tenant = str(opt("tenant", "default"))
        self.token = opt("token", None)
        self.model_revision = str(opt("model_revision", ""))
        self.node_timeout = float(opt("node_timeout", 2.0))
        self.reconnect_interval = float(opt("reconnect_interval", 5.0))

        # Chunk geometry (newer LMCache sets these in the base constructor).
        if not hasattr(self, "save_chunk_meta") or getattr(self, "full_chunk_size_bytes", None) is None:
            self._derive_chunk_meta(config, metadata)
        self.meta_bytes = int(getattr(self, "remote_metadata_bytes", 0) or 28) if self.save_chunk_meta else 0
        # LMCache's RemoteMetadata (shape/dtype/format of a chunk), needed
        # only with save_chunk_meta.
        try:
            from lmcache.v1.protocol import RemoteMetadata  # type: ignore

            self.remote_metadata_cls: Any = RemoteMetadata
        except Exception:
            self.remote_metadata_cls = None
        self.payload_max = self.meta_bytes + int(self.full_chunk_size_bytes)
        self.page_bytes = HEADER.size + self.payload_max

        self._init_connected("strata connector", logger, (
            "exists", "exists_hits", "get", "get_hits", "get_misses", "put", "put_stored", "put_failed", "failures",
            "bad_pages", "alloc_failures"))
        self._pool = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="strata-lmcache")
        self._pins: Dict[str, Lease] = {}
        try:
            self._ensure()
        except Exception as e:  # retried on use; LMCache keeps running on misses
            self._fail("connect", e)

    # ---- setup -------------------------------------------------------------------

    def _derive_chunk_meta(self, config: Any, metadata: Any) -> None:
        extra = dict(getattr(config, "extra_config", None) or {})
        self.save_chunk_meta = bool(extra.get("save_chunk_meta", True))
        shapes = None
        if metadata is not None and hasattr(metadata, "get_shapes"):
            try:
                shapes = list(metadata.get_shapes())
                dtypes = list(metadata.get_dtypes())
            except Exception:
                shapes = None
        if shapes is None:
            kv_shape = tuple(getattr(metadata, "kv_shape", ()) or ())
            shapes = [kv_shape]
            dtypes = [getattr(metadata, "kv_dtype", None)]
        total = 0
        for s, dt in zip(shapes, dtypes):
            n = 1
            for x in s:
                n *= int(x)
            total += n * _dtype_size(dt)
        self.meta_shapes = shapes
        self.meta_dtypes = dtypes
        self.meta_fmt = None
        self.full_chunk_size_bytes = total

    def descriptor(self):
        return lmcache_descriptor(self.metadata, tenant=self.tenant, page_bytes=self.page_bytes,
                                  model_revision=self.model_revision, save_chunk_meta=self.save_chunk_meta)

    def _key(self, ns: Namespace, key: Any) -> bytes:
        s = key.to_string() if hasattr(key, "to_string") else str(key)
        return key_from_engine_hash(ns.id, hashlib.sha256(s.encode("utf-8")).digest())

    async def _run(self, fn, *args):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    # ---- existence -------------------------------------------------------------------

    def _contains_prefix(self, keys: List[Any], pin: bool = False, lookup_id: Optional[str] = None) -> int:
        try:
            if not keys:
                return 0
            ns = self._ensure()
            r = ns.lookup([self._key(ns, k) for k in keys], lease=pin)
            if pin and r.lease is not None and lookup_id is not None:
                with self._lock:
                    old = self._pins.pop(lookup_id, None)
                    self._pins[lookup_id] = r.lease
                if old is not None:
                    old.release()
            elif r.lease is not None:
                r.lease.release()
            self._count(exists=len(keys), exists_hits=r.hit_prefix)
            return int(r.hit_prefix)
        except Exception as e:
            self._fail("contains", e)
            return 0

    def exists_sync(self, key: Any) -> bool:
        return self._contains_prefix([key]) == 1

    async def exists(self, key: Any) -> bool:
        return await self._run(self.exists_sync, key)

    def support_batched_contains(self) -> bool:
        return True

    def batched_contains(self, keys: List[Any], *args: Any, **kw: Any) -> int:
        """Number of consecutive keys present from the start (prefix hit)."""
        return self._contains_prefix(list(keys))

    def support_batched_async_contains(self) -> bool:
        return True

    async def batched_async_contains(self, lookup_id: str, keys: List[Any], pin: bool = False) -> int:
        """Prefix hit count; with ``pin`` the hit prefix is leased on the
        nodes until batched_get_non_blocking(lookup_id, ...) loads it (or the
        lease's TTL passes), so it cannot be evicted in between."""
        return await self._run(self._contains_prefix, list(keys), pin, lookup_id)

    # ---- get -------------------------------------------------------------------------

    def _get_many(self, keys: List[Any], lease: Optional[Lease] = None) -> List[Any]:
        n = len(keys)
        try:
            if n == 0:
                return []
            ns = self._ensure()
            bufs = [bytearray(ns.page_bytes) for _ in range(n)]
            out = ns.get([self._key(ns, k) for k in keys], bufs, lease=lease)
            res = []
            for o in out:
                res.append(self._decode(o) if o is not None else None)
            hits = sum(r is not None for r in res)
            self._count(get=n, get_hits=hits, get_misses=n - hits)
            return res
        except Exception as e:
            self._fail("get", e)
            self._count(get=n, get_misses=n)
            return [None] * n

    def _decode(self, page: bytearray) -> Any:
        """A verified page -> a MemoryObj from the local CPU backend, or None."""
        mv = memoryview(page)
        magic, _, length = HEADER.unpack_from(mv, 0)
        if magic != MAGIC or length > self.payload_max or length < self.meta_bytes:
            self._count(bad_pages=1)
            return None
        body = mv[HEADER.size:HEADER.size + length]
        backend = self.local_cpu_backend
        if self.save_chunk_meta:
            md = self.remote_metadata_cls.deserialize(bytearray(body[: self.meta_bytes]))
            shapes = getattr(md, "shapes", None) or [md.shape]
            dtypes = getattr(md, "dtypes", None) or [md.dtype]
            obj = _allocate(backend, shapes, dtypes, md.fmt)
            data = body[self.meta_bytes:]
            if obj is None:
                self._count(alloc_failures=1)
                return None
            dst = memoryview(obj.byte_array).cast("B")
            n = min(len(dst), len(data))
            dst[:n] = data[:n]
            return obj
        obj = _allocate(backend, self.meta_shapes, self.meta_dtypes, self.meta_fmt)
        if obj is None:
            self._count(alloc_failures=1)
            return None
        dst = memoryview(obj.byte_array).cast("B")
        n = min(len(dst), len(body))
        dst[:n] = body[:n]
        if n < len(dst) and hasattr(self, "reshape_partial_chunk"):
            try:
                obj = self.reshape_partial_chunk(obj, n)
            except Exception:
                obj.ref_count_down()
                self._count(bad_pages=1)
                return None
        return obj

    async def get(self, key: Any) -> Any:
        return (await self._run(self._get_many, [key]))[0]

    def support_batched_get(self) -> bool:
        return True

    async def batched_get(self, keys: List[Any]) -> List[Any]:
        return await self._run(self._get_many, list(keys))

    def support_batched_get_non_blocking(self) -> bool:
        return True

    async def batched_get_non_blocking(self, lookup_id: str, keys: List[Any]) -> List[Any]:
        """The consecutive prefix of loaded chunks (later ones are released);
        ends the pin taken by batched_async_contains(lookup_id, pin=True)."""
        with self._lock:
            lease = self._pins.pop(lookup_id, None)
        try:
            objs = await self._run(self._get_many, list(keys), lease)
        finally:
            if lease is not None:
                self._pool.submit(_quiet, lease.release)
        out = []
        for o in objs:
            if o is None:
                break
            out.append(o)
        for o in objs[len(out):]:
            if o is not None:
                try:
                    o.ref_count_down()
                except Exception:
                    pass
        return out

    # ---- put -----------------------------------------------------------------------------

    def _encode(self, memory_obj: Any) -> bytes:
        data = readable_bytes(memory_obj.byte_array)
        meta = b""
        if self.save_chunk_meta:
            md = self.remote_metadata_cls(len(data), memory_obj.get_shapes(), memory_obj.get_dtypes(), memory_obj.get_memory_format())
            meta = bytes(md.serialize())[: self.meta_bytes].ljust(self.meta_bytes, b"\0")
        length = len(meta) + len(data)
        if length > self.payload_max:
            raise ValueError(f"chunk of {len(data)} bytes is larger than the namespace's {self.full_chunk_size_bytes}")
        page = bytearray(self.page_bytes)
        HEADER.pack_into(page, 0, MAGIC, 0, length)
        page[HEADER.size:HEADER.size + len(meta)] = meta
        page[HEADER.size + len(meta):HEADER.size + length] = data
        return bytes(page)

    def _put_many(self, keys: List[Any], objs: List[Any]) -> None:
        n = len(keys)
        try:
            if n == 0:
                return
            ns = self._ensure()
            pages = []
            for k, o in zip(keys, objs):
                try:
                    pages.append(Page(key=self._key(ns, k), data=self._encode(o)))
                except Exception as e:
                    self._fail("encode", e)
            stored = sum(r.stored for r in ns.put(pages)) if pages else 0
            self._count(put=n, put_stored=stored, put_failed=n - stored)
        except Exception as e:
            self._fail("put", e)
            self._count(put=n, put_failed=n)

    async def put(self, key: Any, memory_obj: Any) -> None:
        await self._run(self._put_many, [key], [memory_obj])

    def support_batched_put(self) -> bool:
        return True

    async def batched_put(self, keys: List[Any], memory_objs: List[Any]) -> None:
        await self._run(self._put_many, list(keys), list(memory_objs))

    # ---- management ------------------------------------------------------------------

    def remove_sync(self, key: Any) -> bool:
        try:
            ns = self._ensure()
            return ns.delete([self._key(ns, key)]) > 0
        except Exception as e:
            self._fail("remove", e)
            return False

    def _list(self) -> List[str]:
        try:
            return [k.hex() for k in self._ensure().list_keys()]
        except Exception as e:
            self._fail("list", e)
            return []

    async def list(self) -> List[str]:
        """The strata keys (hex) of this namespace: keys are hashes, so
        LMCache key strings cannot be listed back."""
        return await self._run(self._list)

    def support_ping(self) -> bool:
        return True

    async def ping(self) -> int:
        def p() -> int:
            try:
                self._ensure()
                self._client.refresh(timeout=self.node_timeout)
                return 0
            except Exception:
                return 1

        return await self._run(p)

    def _close(self) -> None:
        with self._lock:
            pins, self._pins = list(self._pins.values()), {}
            c, self._client, self._ns = self._client, None, None
        for l in pins:
            _quiet(l.release)
        if c is not None:
            _quiet(c.close)

    async def close(self) -> None:
        await self._run(self._close)
        self._pool.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<StrataConnector {self.addresses}>"


def _quiet(fn, *a):
    try:
        fn(*a)
    except Exception:
        pass


def _allocate(backend: Any, shapes: Any, dtypes: Any, fmt: Any) -> Any:
    """LocalCPUBackend.allocate across versions (lists of shapes/dtypes in
    newer LMCache, a single shape/dtype in older)."""
    try:
        return backend.allocate(shapes, dtypes, fmt)
    except TypeError:
        return backend.allocate(shapes[0], dtypes[0], fmt)


def _dtype_size(dt: Any) -> int:
    if dt is None:
        return 1
    if hasattr(dt, "itemsize"):
        return int(dt.itemsize)
    from .descriptor import dtype_bytes

    return dtype_bytes(str(dt)) or 1
