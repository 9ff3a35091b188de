"""The LMCache remote connector against a real stratad, loaded the way
LMCache's ConnectorManager loads a remote storage plugin, with stand-ins for
LMCache's metadata, config, keys, memory objects and CPU allocator."""

import asyncio
import importlib
import socket
import struct
import time
import unittest

from _support import Node, NodeTest
from strata_client import lmcache as L


class FakeMetadata:
    def __init__(self, worker_id=0, world_size=1, chunk=16, use_mla=False):
        self.model_name = "meta-llama/Llama-3.2-1B"
        self.world_size, self.worker_id = world_size, worker_id
        self.kv_dtype = "torch.float16"
        self.kv_shape = (2, 2, chunk, 2, 8)  # layers, K/V, tokens, heads, head size
        self.use_mla = use_mla
        self.chunk_size = chunk
        self.fmt = "vllm"

    def get_shapes(self):
        return [(2, 2, self.chunk_size, 16)]

    def get_dtypes(self):
        return ["float16"]


class FakeConfig:
    def __init__(self, extra):
        self.extra_config = extra
        self.use_layerwise = False


class FakeKey:
    def __init__(self, chunk_hash, worker_id=0):
        self.chunk_hash, self.worker_id = chunk_hash, worker_id

    def to_string(self):
        return f"vllm@meta-llama/Llama-3.2-1B@1@{self.worker_id}@{self.chunk_hash:x}"


class FakeMemoryObj:
    def __init__(self, nbytes, shapes=None, dtypes=None, fmt="KV_2LTD"):
        self.byte_array = bytearray(nbytes)
        self.shapes, self.dtypes, self.fmt = shapes or [], dtypes or [], fmt
        self.refs = 1

    def get_shapes(self):
        return self.shapes

    def get_dtypes(self):
        return self.dtypes

    def get_memory_format(self):
        return self.fmt

    def ref_count_down(self):
        self.refs -= 1


class FakeCPUBackend:
    def __init__(self):
        self.allocated = 0

    def allocate(self, shapes, dtypes, fmt=None):
        n = 0
        for s, d in zip(shapes, dtypes):
            k = 1
            for x in s:
                k *= x
            n += k * 2  # float16
        self.allocated += 1
        return FakeMemoryObj(n, shapes, dtypes, fmt)


class FakeRemoteMetadata:
    """Stands in for lmcache.v1.protocol.RemoteMetadata: 28 bytes."""

    def __init__(self, length, shapes, dtypes, fmt):
        self.length, self.shapes, self.dtypes, self.fmt = length, shapes, dtypes, fmt

    def serialize(self):
        s = list(self.shapes[0]) + [0] * (4 - len(self.shapes[0]))
        return struct.pack("<iiiiiii", self.length, 0, 0, *s)

    @classmethod
    def deserialize(cls, b):
        length, _, _, a, b2, c, d = struct.unpack_from("<iiiiiii", bytes(b))
        return cls(length, [(a, b2, c, d)], ["float16"], "KV_2LTD")


CHUNK_BYTES = 2 * 2 * 16 * 16 * 2  # the full chunk of FakeMetadata


def make_connector(addr, save_chunk_meta=False, loop=None, plugin="strata"):
    """What LMCache's ConnectorManager does for remote_storage_plugins:
    import remote_storage_plugin.<name>.module_path, instantiate class_name
    with no arguments, ask can_parse("plugin://<name>"), create_connector."""
    extra = {
        "save_chunk_meta": save_chunk_meta,
        f"remote_storage_plugin.{plugin}.module_path": "strata_client.lmcache",
        f"remote_storage_plugin.{plugin}.class_name": "StrataConnectorAdapter",
        f"remote_storage_plugin.{plugin}.addr": addr,
        f"remote_storage_plugin.{plugin}.tenant": "acme",
        f"remote_storage_plugin.{plugin}.node_timeout": 1.0,
        f"remote_storage_plugin.{plugin}.reconnect_interval": 0.2,
    }
    cfg = FakeConfig(extra)
    mod = importlib.import_module(extra[f"remote_storage_plugin.{plugin}.module_path"])
    adapter = getattr(mod, extra[f"remote_storage_plugin.{plugin}.class_name"])()
    url = f"plugin://{plugin}"
    assert adapter.can_parse(url)
    ctx = L.ConnectorContext(url, loop, FakeCPUBackend(), cfg, FakeMetadata(), plugin)
    conn = adapter.create_connector(ctx)
    conn.full_chunk_size_bytes = getattr(conn, "full_chunk_size_bytes", CHUNK_BYTES)
    return conn


def _filled(seed, n):
    o = FakeMemoryObj(n, [(2, 2, n // 128, 16)], ["float16"])  # float16: 128 bytes a token
    o.byte_array[:] = (bytes(range(seed % 256, 256)) + bytes(range(256))) * (n // 256 + 2)
    del o.byte_array[n:]
    return o


class LMCacheConnectorTest(NodeTest):
    def setUp(self):
        self.loop = asyncio.new_event_loop()

    def tearDown(self):
        self.loop.close()

    def run_(self, coro):
        return self.loop.run_until_complete(coro)

    def test_adapter_urls(self):
        a = L.StrataConnectorAdapter()
        self.assertTrue(a.can_parse("strata://127.0.0.1:7070"))
        self.assertTrue(a.can_parse("plugin://strata"))
        self.assertTrue(a.can_parse("plugin://strata.primary"))
        self.assertFalse(a.can_parse("plugin://fs"))
        self.assertFalse(a.can_parse("redis://x:1"))

    def test_put_get_exists_prefix(self):
        c = make_connector(self.node.addr, loop=self.loop)
        self.assertEqual(c.full_chunk_size_bytes, CHUNK_BYTES)
        self.assertEqual(c.page_bytes, 16 + CHUNK_BYTES)
        keys = [FakeKey(0x1000 + i) for i in range(5)]
        objs = [_filled(i, CHUNK_BYTES) for i in range(5)]
        self.run_(c.put(keys[0], objs[0]))
        self.run_(c.batched_put(keys[1:3], objs[1:3]))
        self.run_(c.put(keys[4], objs[4]))
        self.assertTrue(self.run_(c.exists(keys[0])))
        self.assertTrue(c.exists_sync(keys[2]))
        self.assertFalse(self.run_(c.exists(keys[3])))
        # Prefix semantics: key 3 is missing, so 3 consecutive hits.
        self.assertTrue(c.support_batched_contains())
        self.assertEqual(c.batched_contains(keys), 3)
        self.assertEqual(self.run_(c.batched_async_contains("req-1", keys)), 3)
        got = self.run_(c.get(keys[1]))
        self.assertEqual(bytes(got.byte_array), bytes(objs[1].byte_array))
        many = self.run_(c.batched_get(keys))
        self.assertEqual([m is not None for m in many], [True, True, True, False, True])
        self.assertEqual(bytes(many[4].byte_array), bytes(objs[4].byte_array))
        self.assertIsNone(self.run_(c.get(FakeKey(0xdead))))
        listed = set(self.run_(c.list()))  # strata keys (hex) of the namespace
        ns = c._ensure()
        self.assertTrue({c._key(ns, k).hex() for k in keys[:3] + keys[4:]} <= listed)
        self.assertTrue(c.remove_sync(keys[4]))
        self.assertEqual(self.run_(c.ping()), 0)
        cnt = c.counters()
        self.assertEqual(cnt["put_stored"], 4)
        self.assertEqual(cnt["failures"], 0)
        self.run_(c.close())

    def test_pinned_lookup_then_non_blocking_get(self):
        c = make_connector(self.node.addr, loop=self.loop)
        keys = [FakeKey(0x2000 + i) for i in range(4)]
        objs = [_filled(10 + i, CHUNK_BYTES) for i in range(4)]
        self.run_(c.batched_put(keys[:2] + keys[3:], objs[:2] + objs[3:]))
        self.assertEqual(self.run_(c.batched_async_contains("req-2", keys, pin=True)), 2)
        self.assertIn("req-2", c._pins)
        out = self.run_(c.batched_get_non_blocking("req-2", keys))
        self.assertEqual(len(out), 2)  # the consecutive prefix only
        self.assertEqual(bytes(out[1].byte_array), bytes(objs[1].byte_array))
        self.assertNotIn("req-2", c._pins)
        self.run_(c.close())

    def test_chunk_meta_and_partial_chunk(self):
        c = make_connector(self.node.addr, save_chunk_meta=True, loop=self.loop)
        c.remote_metadata_cls = FakeRemoteMetadata  # LMCache's RemoteMetadata when installed
        self.assertEqual(c.page_bytes, 16 + 28 + CHUNK_BYTES)
        k = FakeKey(0x3000)
        partial = _filled(3, CHUNK_BYTES // 2)  # a last chunk of 8 tokens
        self.run_(c.put(k, partial))
        got = self.run_(c.get(k))
        self.assertIsNotNone(got)
        self.assertEqual(len(got.byte_array), CHUNK_BYTES // 2)
        self.assertEqual(bytes(got.byte_array), bytes(partial.byte_array))
        self.run_(c.close())

    def test_namespace_per_worker(self):
        a = make_connector(self.node.addr, loop=self.loop)
        d0 = a.descriptor()
        self.assertEqual((d0.engine, d0.tp_size, d0.tp_rank, d0.page_tokens, d0.kv_dtype), ("lmcache", 1, 0, 16, "fp16"))
        self.assertEqual(d0.page_bytes, a.page_bytes)
        self.run_(a.close())

    def test_failures_are_misses_and_counted(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
        s.close()
        c = make_connector(dead, loop=self.loop)  # must not raise
        k = FakeKey(1)
        self.assertFalse(self.run_(c.exists(k)))
        self.assertFalse(c.exists_sync(k))
        self.assertIsNone(self.run_(c.get(k)))
        self.assertEqual(self.run_(c.batched_get([k, k])), [None, None])
        self.assertEqual(c.batched_contains([k]), 0)
        self.assertEqual(self.run_(c.batched_async_contains("x", [k], pin=True)), 0)
        self.assertEqual(self.run_(c.batched_get_non_blocking("x", [k])), [])
        self.run_(c.put(k, _filled(1, CHUNK_BYTES)))  # dropped, not raised
        self.assertEqual(self.run_(c.list()), [])
        self.assertFalse(c.remove_sync(k))
        self.assertEqual(self.run_(c.ping()), 1)
        cnt = c.counters()
        self.assertGreaterEqual(cnt["failures"], 8)
        self.assertEqual(cnt["put_failed"], 1)
        self.run_(c.close())

    def test_node_killed_means_misses(self):
        node = Node()
        c = make_connector(node.addr, loop=self.loop)
        try:
            keys = [FakeKey(0x4000 + i) for i in range(2)]
            self.run_(c.batched_put(keys, [_filled(i, CHUNK_BYTES) for i in range(2)]))
            self.assertEqual(c.batched_contains(keys), 2)
            node.kill()
            t0 = time.monotonic()
            self.assertEqual(c.batched_contains(keys), 0)
            self.assertEqual(self.run_(c.batched_get(keys)), [None, None])
            self.assertLess(time.monotonic() - t0, 5)
        finally:
            self.run_(c.close())
            node.kill()


if __name__ == "__main__":
    unittest.main()
