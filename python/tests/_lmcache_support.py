"""Shared set-up of the LMCache tests: the installed lmcache package (a
skip, or with STRATA_REQUIRE_ENGINES=1 a failure, when it is missing), an
asyncio loop on a thread (LMCache's RemoteBackend submits coroutines to
one), and the real LMCache objects an engine process builds."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import unittest

import _support  # puts python/ on sys.path

try:
    import torch
    import lmcache
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.metadata import LMCacheMetadata
    from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
    from lmcache.v1.storage_backend.remote_backend import RemoteBackend
    from lmcache.utils import CacheEngineKey, LayerCacheEngineKey
except ImportError:  # pragma: no cover - require_lmcache() says why
    pass


def require_lmcache() -> None:
    """The installed lmcache (0.5.6): a clear skip without it, a failure
    under STRATA_REQUIRE_ENGINES=1 or when a stand-in is on sys.path."""
    _support.require_engine("lmcache.v1.storage_backend.remote_backend")
    _support.require_engine("lmcache.v1.distributed.storage_manager")


def assert_real(tc: unittest.TestCase, *objs) -> None:
    """The objects' classes come from the installed lmcache package (under
    site-packages), not from a stand-in in this tree."""
    root = os.path.dirname(os.path.abspath(lmcache.__file__))
    tc.assertIn("site-packages", root)
    import sys

    for o in objs:
        mod = sys.modules[type(o).__module__]
        tc.assertTrue(os.path.abspath(mod.__file__).startswith(root), f"{type(o)} from {mod.__file__}")


class Loop:
    """An asyncio loop running on its own thread, stopped by close()."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="lmcache-test-loop", daemon=True)
        self.thread.start()

    def run(self, coro, timeout=30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


MODEL = "meta-llama/Llama-3.2-1B"
LAYERS, HEADS, HEAD_DIM, CHUNK = 2, 2, 8, 16


def metadata(dtype=None, worker_id=0, world_size=1, use_mla=False):
    """LMCacheMetadata of a small model: (layers, K/V, chunk, heads, head
    size) as vLLM's LMCache integration fills it in."""
    kv = 1 if use_mla else 2
    return LMCacheMetadata(model_name=MODEL, world_size=world_size, local_world_size=world_size, worker_id=worker_id,
                           local_worker_id=worker_id, kv_dtype=dtype or torch.bfloat16,
                           kv_shape=(LAYERS, kv, CHUNK, HEADS, HEAD_DIM), use_mla=use_mla, chunk_size=CHUNK)


def engine_config(addr, plugin="strata", layerwise=False, save_chunk_meta=None, kv_format=None, **over):
    """An LMCacheEngineConfig as an operator writes it for the strata plugin."""
    extra = {
        f"remote_storage_plugin.{plugin}.module_path": "strata_client.lmcache",
        f"remote_storage_plugin.{plugin}.class_name": "StrataConnectorAdapter",
        f"remote_storage_plugin.{plugin}.addr": addr,
        f"remote_storage_plugin.{plugin}.tenant": "acme",
        f"remote_storage_plugin.{plugin}.node_timeout": 1.0,
        f"remote_storage_plugin.{plugin}.reconnect_interval": 0.2,
    }
    if save_chunk_meta is not None:
        extra["save_chunk_meta"] = save_chunk_meta
    if kv_format is not None:
        extra[f"remote_storage_plugin.{plugin}.kv_format"] = kv_format
    d = {"chunk_size": CHUNK, "local_cpu": False, "max_local_cpu_size": 0.02, "remote_serde": "naive",
         "remote_storage_plugins": [plugin], "use_layerwise": layerwise, "extra_config": extra,
         "blocking_timeout_secs": 10}
    d.update(over)
    return LMCacheEngineConfig.from_dict(d)


class Stack:
    """What LMCache's storage manager builds for one remote plugin:
    LocalCPUBackend (the allocator of every MemoryObj) and RemoteBackend,
    which loads the connector through CreateConnector."""

    def __init__(self, loop: Loop, config, md, plugin="strata"):
        self.config, self.md, self.loop = config, md, loop
        self.cpu = LocalCPUBackend(config, md)
        self.remote = RemoteBackend(config, md, loop.loop, self.cpu, "cpu", plugin_name=plugin)
        self.conn = self.remote.connection  # InstrumentedRemoteConnector
        self.strata = self.conn.getWrappedConnector() if self.conn is not None else None

    def usage(self):
        a = self.cpu.memory_allocator.pin_allocator
        return a.num_active_allocations, a.total_allocated_size

    def key(self, h, layer=None):
        if layer is None:
            return CacheEngineKey(MODEL, self.md.world_size, self.md.worker_id, h, self.md.kv_dtype)
        return LayerCacheEngineKey(MODEL, self.md.world_size, self.md.worker_id, h, self.md.kv_dtype, layer_id=layer)

    def chunk(self, seed, tokens=CHUNK, layerwise=False):
        """A MemoryObj from LMCache's allocator filled with seeded values."""
        from lmcache.v1.memory_management import MemoryFormat

        if layerwise:
            shapes = [torch.Size([tokens, 2, HEADS * HEAD_DIM])]
            obj = self.cpu.allocate(shapes, [self.md.kv_dtype], MemoryFormat.KV_T2D)
        else:
            obj = self.cpu.allocate(self.md.get_shapes(tokens), self.md.get_dtypes(), MemoryFormat.KV_2LTD)
        g = torch.Generator().manual_seed(seed)
        vals = torch.randn(obj.tensor.shape, generator=g).to(self.md.kv_dtype) if self.md.kv_dtype.is_floating_point \
            else torch.randint(0, 255, obj.tensor.shape, generator=g, dtype=torch.uint8)
        obj.tensor.copy_(vals)
        return obj

    def put(self, keys, objs, timeout=20.0):
        """batched_submit_put_task as the storage manager calls it (then
        the caller's references are dropped), waiting until the connector
        has handled the batch (0.5.6 tracks no batched put in put_tasks)."""
        before = self.strata.counters()["put"] if self.strata is not None else 0
        self.remote.batched_submit_put_task(keys, objs)
        for o in objs:
            o.ref_count_down()
        if self.strata is None:
            return
        deadline = time.monotonic() + timeout
        while self.strata.counters()["put"] < before + len(keys) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert self.strata.counters()["put"] >= before + len(keys), "puts did not finish"

    def close(self):
        self.remote.close()
        self.cpu.close()
