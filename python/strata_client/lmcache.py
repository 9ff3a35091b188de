"""LMCache remote connector on strata (a remote storage plugin of
LMCache's in-process engine mode), for ``lmcache==0.5.6``.

LMCache configuration (YAML)::

    chunk_size: 256
    local_cpu: true
    max_local_cpu_size: 5
    remote_serde: naive
    pre_caching_hash_algorithm: sha256_cbor   # not "builtin": see below
    remote_storage_plugins: ["strata"]
    extra_config:
      remote_storage_plugin.strata.module_path: strata_client.lmcache
      remote_storage_plugin.strata.class_name: StrataConnectorAdapter
      remote_storage_plugin.strata.addr: "10.0.0.5:7070,10.0.0.6:7070"
      remote_storage_plugin.strata.tenant: acme
      remote_storage_plugin.strata.model_revision: 0e9e39f

LMCache loads it as 0.5.6's ``ConnectorManager`` does: it imports
``module_path``, instantiates ``class_name`` (a ``ConnectorAdapter``) with
no arguments, and asks it to ``can_parse("plugin://strata")`` for each
``RemoteBackend(plugin_name="strata")``; the adapter then gets a
``ConnectorContext`` with the config and the ``LMCacheMetadata``. A bare
``remote_url: strata://...`` does not load in 0.5.6 (third-party adapters
are imported only for names in ``remote_storage_plugins``); the adapter
still parses ``strata://host:port`` URLs, for a ``remote_url`` set beside
the plugin.

Matched against the installed ``lmcache/v1/storage_backend/connector/
base_connector.py`` (``RemoteConnector.__init__(config, metadata)`` sets the
chunk geometry and ``save_chunk_meta``; ``batched_contains(keys) -> int``,
the prefix hit count), ``remote_backend.py`` (which calls these; the
``InstrumentedRemoteConnector`` wrapper drops each put's reference after
``put``/``batched_put`` return) and ``protocol.py`` (``RemoteMetadata``).

Never raises into LMCache: failures are misses (``None``/``False``/0) or
dropped writes, counted in ``StrataConnector.counters()``.

Storage format: one LMCache chunk (in layerwise mode one layer of a chunk)
is one strata page of a fixed size, ``16 + [remote metadata] + chunk
bytes``: a 16-byte header (magic ``SLC1``, u32 reserved, u64 payload length,
little-endian), LMCache's ``RemoteMetadata`` when ``save_chunk_meta`` is on
(always in layerwise mode), then the KV bytes, zero-padded when the chunk is
a partial last chunk. strata pages have one size per namespace, so the
padding is stored; the MemoryObj handed back to LMCache has exactly the
partial chunk's shape. In layerwise mode the page is one layer's chunk, not
the whole chunk. Keys are ``key_from_engine_hash(namespace,
SHA-256(key.to_string()))``.

Copies: a put copies each chunk once (into its framed page); a get reads
each page straight into the MemoryObj LMCache allocated (a partial last
chunk is copied once more, into an object of its own shape).

Key hash: LMCache's default ``pre_caching_hash_algorithm`` is ``builtin``,
Python's ``hash()``, which is randomised per process unless
``PYTHONHASHSEED`` is set to a number; then no two engine processes ever
compute the same key and every lookup misses. The connector logs a warning
once and counts ``random_hash`` when it finds that configuration.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import hashlib
import logging
import os
import struct
import time
from typing import Any, Dict, List, Optional

try:
    import torch
    from lmcache.v1.exceptions import IrrecoverableException
    from lmcache.v1.memory_management import MemoryFormat
    from lmcache.v1.protocol import RemoteMetadata
    from lmcache.v1.storage_backend.connector import ConnectorAdapter
    from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
except ImportError as _e:  # pragma: no cover - exercised only without LMCache
    raise ImportError(f"strata_client.lmcache needs LMCache (pip install 'strata-client[lmcache]'): {_e}") from _e

from ._connector import Connected, spans as _spans
from .buffers import ScatterBuffer, readable_bytes
from .client import Lease, Page
from .descriptor import dtype_bytes, key_from_engine_hash, normalize_dtype, page_format_string
from .engines import lmcache_descriptor, vllm_kv_elem
from .namespace import Namespace

logger = logging.getLogger(__name__)

PLUGIN_TYPE = "strata"
SCHEME = "strata://"
HEADER = struct.Struct("<4sIQ")
MAGIC = b"SLC1"

__all__ = ["StrataConnectorAdapter", "StrataConnector", "UnservableConfiguration", "hash_is_random",
           "lmcache_kv_elem"]


class UnservableConfiguration(IrrecoverableException, ValueError):
    """An engine configuration whose chunks strata cannot name safely.
    LMCache's RemoteBackend re-raises an IrrecoverableException from the
    connector's construction instead of running on without a remote tier,
    so the engine does not start with a backend that would do nothing or
    mix byte formats."""


# _FMT_AXES names the dimensions of LMCache's MemoryFormats
# (lmcache/v1/memory_management.py): S the K/V pair, L layer, T token, D
# hidden (heads x head size), C MLA width; MLA's leading 1 is Xa.
_FMT_AXES = {
    "KV_2LTD": ["S", "L", "T", "D"],
    "KV_T2D": ["T", "S", "D"],
    "KV_2TD": ["S", "T", "D"],
    "KV_MLA_FMT": ["Xa", "L", "T", "C"],
}


def lmcache_kv_elem(metadata: Any, declared: Any = None) -> str:
    """The numeric format of LMCache's KV elements. LMCache's vLLM
    integration (lmcache/integration/vllm/utils.py) sets
    ``LMCacheMetadata.kv_dtype`` with vLLM's get_kv_cache_torch_dtype,
    which is torch.uint8 for every fp8 --kv-cache-dtype (fp8, fp8_e4m3,
    fp8_e5m2): uint8 then says nothing, and the format is read from vLLM's
    own configuration in this process (get_current_vllm_config_or_none:
    cache_config.cache_dtype), or, where no vLLM config is current, from
    the plugin's ``kv_format`` option. Without either the connector
    refuses (UnservableConfiguration at construction, which LMCache lets
    through to the engine's start), naming the configuration."""
    dt = getattr(metadata, "kv_dtype", None)
    if dt is not None and dt != torch.uint8:
        return normalize_dtype(str(dt))
    try:
        from vllm.config import get_current_vllm_config_or_none  # type: ignore
    except ImportError:
        get_current_vllm_config_or_none = None
    cfg = get_current_vllm_config_or_none() if get_current_vllm_config_or_none is not None else None
    if cfg is not None:
        elem = vllm_kv_elem(None, str(cfg.cache_config.cache_dtype))
        if elem != "uint8":
            return elem
    if declared:
        elem = normalize_dtype(str(declared))
        if dtype_bytes(elem) != 1 or elem == "uint8":
            raise UnservableConfiguration(f"strata connector: kv_format {declared!r} is not a one-byte KV format "
                                          "(fp8_e4m3, fp8_e5m2, fp8_e4m3fnuz, ...)")
        return elem
    raise UnservableConfiguration(
        "strata connector: LMCache's KV dtype is uint8, vLLM's storage type for every fp8 --kv-cache-dtype, and "
        "no vLLM config is current in this process: set remote_storage_plugin.<name>.kv_format to the cache's "
        "format (fp8_e4m3 or fp8_e5m2) so that e4m3 and e5m2 pages never share a namespace")


def _plugin_type(name: str) -> str:
    return name.split(".", 1)[0]


def hash_is_random(config: Any) -> bool:
    """Whether LMCache's chunk hash, for this engine config, is Python's
    ``hash()`` with a per-process random seed. LMCache (token_database.py)
    uses ``hash`` when ``pre_caching_hash_algorithm`` is ``builtin`` (the
    default) and also when it cannot load the named function from vLLM."""
    seed = os.environ.get("PYTHONHASHSEED")
    if seed is not None and seed != "random":
        return False
    algo = str(getattr(config, "pre_caching_hash_algorithm", "builtin") or "builtin")
    if algo == "builtin":
        return True
    for mod in ("vllm.utils.hashing", "vllm.utils"):  # where LMCache looks
        try:
            m = __import__(mod, fromlist=["get_hash_fn_by_name"])
        except ImportError:
            continue
        if hasattr(m, "get_hash_fn_by_name") or hasattr(m, algo):
            return False
    return True


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
            metadata=context.metadata,
            plugin_name=context.plugin_name,
        )


class StrataConnector(Connected, RemoteConnector):
    """An LMCache RemoteConnector backed by a strata cluster."""

    def __init__(self, url: str, loop: Optional[asyncio.AbstractEventLoop], local_cpu_backend: Any,
                 config: Any, metadata: Any, plugin_name: Optional[str] = None):
        if config is None or metadata is None:
            raise ValueError("strata connector: LMCache passed no config or no metadata (both are needed to size pages)")
        super().__init__(config, metadata)  # chunk geometry, save_chunk_meta, remote metadata size
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.metadata = metadata
        self.plugin_name = plugin_name or PLUGIN_TYPE
        extra = dict(getattr(config, "extra_config", None) or {})
        pre = f"remote_storage_plugin.{self.plugin_name}."

        def opt(name: str, default: Any = None) -> Any:
            v = extra.get(pre + name)
            return default if v in (None, "") else v

        addr = opt("addr", "")
        if not addr and url.startswith(SCHEME):
            addr = url[len(SCHEME):].split("/", 1)[0].split("?", 1)[0]
        if not addr:
            raise ValueError(f"strata connector: set {pre}addr in extra_config (or use a strata://host:port remote_url)")
        self.addresses = str(addr)
        self.tenant = str(opt("tenant", "default"))
        self.token = opt("token", None)
        self.model_revision = str(opt("model_revision", ""))
        self.node_timeout = float(opt("node_timeout", 2.0))
        self.reconnect_interval = float(opt("reconnect_interval", 5.0))
        # A node call moves at most this many bytes, so that a batch of big
        # chunks is not one call bounded by one node_timeout.
        self.max_call_bytes = int(opt("max_call_bytes", 64 << 20))

        self.layerwise = bool(getattr(config, "use_layerwise", False))
        self.num_layers = int(metadata.kv_shape[0])
        self._setup_geometry()
        self.kv_elem = lmcache_kv_elem(metadata, opt("kv_format"))

        self._init_connected("strata connector", logger, (
            "exists", "exists_hits", "get", "get_hits", "get_misses", "put", "put_stored", "put_failed", "failures",
            "bad_pages", "alloc_failures", "partial_copies", "random_hash"))
        if hash_is_random(config):
            self._counters["random_hash"] = 1
            logger.warning(
                "strata connector: LMCache's chunk hash is Python's hash() with a random per-process seed "
                "(pre_caching_hash_algorithm=%r, PYTHONHASHSEED=%r): no two engine processes will ever share "
                "a key and every strata lookup from another process misses. Set "
                "pre_caching_hash_algorithm: sha256_cbor (with vLLM installed) or export PYTHONHASHSEED=0 "
                "in every engine process.",
                getattr(config, "pre_caching_hash_algorithm", None), os.environ.get("PYTHONHASHSEED"))
        self._pool = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="strata-lmcache")
        self._pins: Dict[str, Lease] = {}
        try:
            self._ensure()
        except Exception as e:  # retried on use; LMCache keeps running on misses
            self._fail("connect", e)

    # ---- setup -------------------------------------------------------------------

    def _setup_geometry(self) -> None:
        """Page size and the shapes a full page is read into."""
        full = int(self.full_chunk_size_bytes)
        if self.layerwise:
            if full % self.num_layers:
                raise ValueError(f"strata connector: chunk of {full} bytes does not split over {self.num_layers} layers")
            self.chunk_bytes = full // self.num_layers
            t, kv = int(self.metadata.chunk_size), int(self.metadata.kv_shape[1])
            hidden = int(self.metadata.kv_shape[3]) * int(self.metadata.kv_shape[4])
            if self.metadata.use_mla:  # LocalCPUBackend's layerwise formats
                self.read_shapes, self.read_fmt = [torch.Size([t, hidden])], MemoryFormat.KV_MLA_FMT
            elif getattr(self.config, "enable_blending", False):
                self.read_shapes, self.read_fmt = [torch.Size([kv, t, hidden])], MemoryFormat.KV_2TD
            else:
                self.read_shapes, self.read_fmt = [torch.Size([t, kv, hidden])], MemoryFormat.KV_T2D
            self.read_dtypes = list(self.meta_dtypes[:1])
        else:
            self.chunk_bytes = full
            self.read_shapes, self.read_dtypes, self.read_fmt = list(self.meta_shapes), list(self.meta_dtypes), self.meta_fmt
        self.meta_bytes = int(self.remote_metadata_bytes) if self.save_chunk_meta else 0
        self.payload_max = self.meta_bytes + self.chunk_bytes
        self._zeros = b""  # the zero padding of encoded pages (_encode), grown as needed
        self.page_bytes = HEADER.size + self.payload_max

    def descriptor(self):
        extra = {"lmcache_layerwise": "1"} if self.layerwise else None
        return lmcache_descriptor(self.metadata, tenant=self.tenant, page_bytes=self.page_bytes,
                                  model_revision=self.model_revision, save_chunk_meta=self.save_chunk_meta, extra=extra,
                                  page_format=self.page_format(), kv_dtype=self.kv_elem)

    def page_format(self) -> str:
        """The page as this connector frames it: the 16-byte header,
        LMCache's RemoteMetadata when save_chunk_meta is on, then the chunk
        (or, layerwise, one layer of it) in the MemoryFormat LMCache
        allocates it in, its elements in their numeric format."""
        segs: List[Any] = [("hdr", [("B", HEADER.size)], "uint8")]
        if self.meta_bytes:
            segs.append(("meta", [("B", self.meta_bytes)], "uint8"))
        names = _FMT_AXES.get(getattr(self.read_fmt, "name", str(self.read_fmt)), "")
        for shape, dt in zip(self.read_shapes, self.read_dtypes):
            dims = [int(x) for x in shape]
            axes = names if len(names) == len(dims) else ["X" + chr(ord("a") + i) for i in range(len(dims))]
            elem = self.kv_elem if dt == torch.uint8 else normalize_dtype(str(dt))
            segs.append(("kv", [(a, n) for a, n in zip(axes, dims) if n > 1 or a == "T"], elem))
        return page_format_string(segs)

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
                now_ms = time.time() * 1000
                with self._lock:
                    old = self._pins.pop(lookup_id, None)
                    # pins of lookups never loaded (aborted requests) go
                    # once their lease has expired on the nodes
                    for lid in [i for i, l in self._pins.items() if 0 < l.expires_unix_ms < now_ms]:
                        del self._pins[lid]
                    self._pins[lookup_id] = r.lease
                if old is not None:
                    self._quiet(old.release)
            elif r.lease is not None:
                self._quiet(r.lease.release)
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

    def batched_contains(self, keys: List[Any]) -> int:
        """Number of consecutive keys present from the start (prefix hit):
        0.5.6's RemoteBackend.batched_contains returns it as is."""
        return self._contains_prefix(list(keys))

    def support_batched_async_contains(self) -> bool:
        return True

    async def batched_async_contains(self, lookup_id: str, keys: List[Any], pin: bool = False) -> int:
        """Prefix hit count; with ``pin`` the hit prefix is leased on the
        nodes until batched_get_non_blocking(lookup_id, ...) loads it (or the
        lease's TTL passes), so it cannot be evicted in between."""
        return await self._run(self._contains_prefix, list(keys), pin, lookup_id)

    # ---- get -------------------------------------------------------------------------

    def _alloc(self, shapes: Any, dtypes: Any, fmt: Any) -> Any:
        """A MemoryObj from LMCache's allocator (evicting its hot cache if
        need be), or None: never LocalCPUBackend's busy wait, which a batch
        holding its own earlier objects could wait on for ever."""
        obj = self.local_cpu_backend.allocate(shapes, dtypes, fmt, busy_loop=False)
        if obj is None:
            self._count(alloc_failures=1)
        return obj

    def _get_many(self, keys: List[Any], lease: Optional[Lease] = None) -> List[Any]:
        """Pages read straight into MemoryObjs of the full chunk (layer)
        shape, each behind a small header buffer; a page that is a partial
        chunk or of another shape gets an object of its own shape."""
        n = len(keys)
        objs: List[Any] = [None] * n
        heads: List[bytearray] = []
        try:
            if n == 0:
                return []
            ns = self._ensure()
            bufs = []
            for i in range(n):
                obj = self._alloc(self.read_shapes, self.read_dtypes, self.read_fmt)
                if obj is None:
                    break
                objs[i] = obj
                head = bytearray(HEADER.size + self.meta_bytes)
                heads.append(head)
                bufs.append(ScatterBuffer([head, obj.byte_array]))
            m = len(bufs)  # keys past an allocation failure are misses
            skeys = [self._key(ns, k) for k in keys[:m]]
            out: List[Any] = []
            for a, b in _spans(m, ns.page_bytes, self.max_call_bytes):
                out.extend(ns.get(skeys[a:b], bufs[a:b], lease=lease))
            res: List[Any] = [None] * n
            for i, o in enumerate(out):
                if o is not None:
                    res[i] = self._finish(objs[i], heads[i])
                    objs[i] = None  # handed on (or freed by _finish)
            hits = sum(r is not None for r in res)
            self._count(get=n, get_hits=hits, get_misses=n - hits)
            return res
        except Exception as e:
            self._fail("get", e)
            self._count(get=n, get_misses=n)
            return [None] * n
        finally:
            for o in objs:  # misses and failures give their buffers back
                if o is not None:
                    self._quiet(o.ref_count_down)

    def _finish(self, obj: Any, head: bytearray) -> Any:
        """A verified page read into obj -> the MemoryObj for LMCache, or
        None (obj is then released)."""
        magic, _, length = HEADER.unpack_from(head, 0)
        data_len = length - self.meta_bytes
        if magic != MAGIC or length > self.payload_max or data_len <= 0:
            return self._bad(obj)
        if self.save_chunk_meta:
            md = RemoteMetadata.deserialize(bytes(head[HEADER.size:]))
            shapes, dtypes, fmt = list(md.shapes), list(md.dtypes), md.fmt
            if md.length != data_len or _size(shapes, dtypes) != data_len:
                return self._bad(obj)
        elif data_len == self.chunk_bytes:
            return obj
        else:
            if data_len % self.single_token_size:
                return self._bad(obj)
            shapes, dtypes, fmt = self.metadata.get_shapes(data_len // self.single_token_size), list(self.meta_dtypes), self.meta_fmt
        if shapes == list(obj.get_shapes()) and dtypes == list(obj.get_dtypes()) and fmt == obj.get_memory_format():
            return obj
        # A partial last chunk (or a layout other than the full chunk's):
        # an object of exactly its shape, never a padded full chunk.
        own = self._alloc(shapes, dtypes, fmt)
        if own is None:
            self._quiet(obj.ref_count_down)
            return None
        try:
            memoryview(own.byte_array).cast("B")[:data_len] = memoryview(obj.byte_array).cast("B")[:data_len]
        except Exception as e:  # a chunk whose bytes do not fit its own shape: a miss, counted in bad_pages
            self._fail("get", e)
            self._quiet(own.ref_count_down)
            return self._bad(obj)
        self._quiet(obj.ref_count_down)
        self._count(partial_copies=1)
        return own

    def _quiet(self, fn, *a) -> None:
        """fn(*a) for a clean-up (a MemoryObj's reference, a lease): a
        failure changes no answer given to LMCache, so it is counted and
        logged, not raised."""
        try:
            fn(*a)
        except Exception as e:
            self._fail(getattr(fn, "__name__", "clean-up"), e)

    def _bad(self, obj: Any) -> None:
        self._count(bad_pages=1)
        self._quiet(obj.ref_count_down)
        return None

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
                self._pool.submit(self._quiet, lease.release)
        out = []
        for o in objs:
            if o is None:
                break
            out.append(o)
        for o in objs[len(out):]:
            if o is not None:
                self._quiet(o.ref_count_down)
        return out

    # ---- put -----------------------------------------------------------------------------

    def _encode(self, memory_obj: Any) -> ScatterBuffer:
        """The framed page of a chunk: its header, the chunk's own bytes
        and zeros to the page size, as segments. The put gathers them (the
        native plane off the GIL, in the call that publishes the batch; the
        Python planes with one copy), so the chunk is not copied here."""
        data = readable_bytes(memory_obj.byte_array)
        length = self.meta_bytes + len(data)
        if len(data) == 0 or length > self.payload_max:
            raise ValueError(f"chunk of {len(data)} bytes does not fit pages of {self.chunk_bytes} chunk bytes")
        head = bytearray(HEADER.size + self.meta_bytes)
        HEADER.pack_into(head, 0, MAGIC, 0, length)
        if self.save_chunk_meta:
            md = RemoteMetadata(len(data), memory_obj.get_shapes(), memory_obj.get_dtypes(), memory_obj.get_memory_format())
            md.serialize_into(memoryview(head)[HEADER.size:])
        pad = self.page_bytes - HEADER.size - length
        if len(self._zeros) < pad:
            self._zeros = bytes(pad)
        return ScatterBuffer.of_data([head, data, memoryview(self._zeros)[:pad]])

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
            stored = 0
            for a, b in _spans(len(pages), ns.page_bytes, self.max_call_bytes):
                stored += sum(r.stored for r in ns.put(pages[a:b]))
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
            except Exception as e:  # LMCache's health check: non-zero is unhealthy
                self._fail("ping", e)
                return 1

        return await self._run(p)

    def _close(self) -> None:
        with self._lock:
            pins, self._pins = list(self._pins.values()), {}
            c, self._client, self._ns = self._client, None, None
        for l in pins:
            self._quiet(l.release)
        if c is not None:
            self._quiet(c.close)

    async def close(self) -> None:
        await self._run(self._close)
        self._pool.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<StrataConnector {self.addresses}>"


def _size(shapes: Any, dtypes: Any) -> int:
    n = 0
    for s, d in zip(shapes, dtypes):
        n += int(torch.Size(s).numel()) * int(d.itemsize)
    return n
