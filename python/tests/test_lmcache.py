"""The LMCache remote connector against a real stratad and the installed
lmcache (0.5.6): LMCacheEngineConfig, LMCacheMetadata, LocalCPUBackend and
its allocator's MemoryObjs, RemoteBackend loading the connector through
CreateConnector and the remote_storage_plugins mechanism."""

import logging
import os
import socket
import threading
import time
import unittest
from unittest import mock

from _support import Node, NodeTest
import _lmcache_support as S


def setUpModule():
    S.require_lmcache()


class LMCacheRemoteTest(NodeTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.loop = S.Loop()

    @classmethod
    def tearDownClass(cls):
        cls.loop.close()
        super().tearDownClass()

    def stack(self, addr=None, md=None, **kw):
        st = S.Stack(self.loop, S.engine_config(addr or self.node.addr, **kw), md or S.metadata())
        self.addCleanup(st.close)
        return st

    def same(self, a, b):
        self.assertEqual(list(a.get_shapes()), list(b.get_shapes()))
        self.assertEqual(list(a.get_dtypes()), list(b.get_dtypes()))
        self.assertEqual(bytes(a.byte_array), bytes(b.byte_array))

    def test_real_classes_and_plugin_loading(self):
        from lmcache.v1.storage_backend.connector.instrumented_connector import InstrumentedRemoteConnector
        from strata_client import lmcache as L

        from lmcache.v1.config import LMCacheEngineConfig

        st = self.stack()
        S.assert_real(self, st.md, st.cpu, st.remote, st.conn)
        self.assertIsInstance(st.config, LMCacheEngineConfig)  # a class LMCache builds at import
        self.assertIsInstance(st.conn, InstrumentedRemoteConnector)
        self.assertIsInstance(st.strata, L.StrataConnector)
        # What 0.5.6 loads: remote_storage_plugins + module_path/class_name,
        # asked for plugin://strata; the legacy remote_url scheme too.
        self.assertEqual(st.remote.remote_url, "plugin://strata")
        a = L.StrataConnectorAdapter()
        for u, ok in (("strata://127.0.0.1:7070", True), ("plugin://strata", True), ("plugin://strata.b", True),
                      ("plugin://fs", False), ("redis://x:1", False)):
            self.assertEqual(a.can_parse(u), ok, u)
        d = st.strata.descriptor()
        self.assertEqual((d.engine, d.tp_size, d.tp_rank, d.page_tokens, d.kv_dtype), ("lmcache", 1, 0, S.CHUNK, "bf16"))
        self.assertEqual(st.strata.page_bytes, 16 + 28 + st.strata.full_chunk_size_bytes)

    def test_legacy_remote_url_is_not_loadable(self):
        # 0.5.6 loads third-party adapters only for names listed in
        # remote_storage_plugins: a bare remote_url: strata://... finds no
        # adapter, and RemoteBackend runs without a connection (all misses).
        cfg = S.engine_config("", remote_storage_plugins=None, remote_url=f"strata://{self.node.addr}")
        st = S.Stack(self.loop, cfg, S.metadata(), plugin=None)
        self.addCleanup(st.close)
        self.assertIsNone(st.remote.connection)

    def _round_trip(self, dtype, salt=0, **kw):
        st = self.stack(md=S.metadata(dtype), **kw)
        base = st.usage()
        keys = [st.key(0x1000 + i + (dtype.itemsize << 20) + (salt << 24)) for i in range(5)]
        want = [st.chunk(i) for i in range(5)]
        copies = [st.chunk(i) for i in range(5)]  # what the puts must bring back
        st.put(keys[:3] + keys[4:], want[:3] + want[4:])
        want[3].ref_count_down()
        # 0.5.6: batched_contains returns the prefix hit count (an int).
        self.assertEqual(st.remote.batched_contains(keys), 3)
        self.assertTrue(st.remote.contains(keys[4]))
        self.assertFalse(st.remote.contains(keys[3]))
        got = st.remote.get_blocking(keys[1])
        self.same(got, copies[1])
        got.ref_count_down()
        many = st.remote.batched_get_blocking(keys)
        self.assertEqual([m is not None for m in many], [True, True, True, False, True])
        for i in (0, 1, 2, 4):
            self.same(many[i], copies[i])
            many[i].ref_count_down()
        self.assertIsNone(st.remote.get_blocking(st.key(0xdead)))
        for c in copies:
            c.ref_count_down()
        self.assertEqual(st.usage(), base)  # every MemoryObj went back
        cnt = st.strata.counters()
        self.assertEqual((cnt["put_stored"], cnt["failures"], cnt["bad_pages"]), (4, 0, 0))

    def test_round_trip_bf16(self):
        import torch

        self._round_trip(torch.bfloat16)

    def test_round_trip_fp8(self):
        # LMCache's vLLM integration sets kv_dtype with vLLM's
        # get_kv_cache_torch_dtype: uint8 for fp8_e4m3 and fp8_e5m2 alike.
        # The format comes from the plugin's kv_format (no vLLM config is
        # current here), and the two formats never share a namespace.
        import torch
        from vllm.utils.torch_utils import get_kv_cache_torch_dtype

        ids = {}
        for fmt in ("fp8_e4m3", "fp8_e5m2"):
            dt = get_kv_cache_torch_dtype(fmt, torch.bfloat16)
            self.assertEqual(dt, torch.uint8)
            with self.subTest(kv_format=fmt):
                self._round_trip(dt, kv_format=fmt, salt=len(ids))
                d = self.stack(md=S.metadata(dt), kv_format=fmt).strata.descriptor()
                self.assertTrue(d.page_format.endswith(":" + fmt), d.page_format)
                self.assertEqual(d.kv_dtype, fmt)
                ids[fmt] = d.id
        self.assertNotEqual(ids["fp8_e4m3"], ids["fp8_e5m2"])

    def test_fp8_format_from_the_current_vllm_config(self):
        import torch

        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # as test_vllm: this machine has no GPU
        from vllm.config import CacheConfig, VllmConfig, set_current_vllm_config
        from vllm.utils.torch_utils import get_kv_cache_torch_dtype

        for fmt, want in (("fp8_e5m2", "fp8_e5m2"), ("fp8", "fp8_e4m3")):
            with self.subTest(cache_dtype=fmt):
                with set_current_vllm_config(VllmConfig(cache_config=CacheConfig(cache_dtype=fmt))):
                    st = self.stack(md=S.metadata(get_kv_cache_torch_dtype(fmt, torch.bfloat16)))
                self.assertTrue(st.strata.descriptor().page_format.endswith(":" + want))

    def test_fp8_of_unknown_format_refuses_at_start(self):
        # uint8 KV, no vLLM config current, no kv_format: the connector
        # raises LMCache's IrrecoverableException, which RemoteBackend lets
        # through to the engine's start.
        import torch
        from lmcache.v1.exceptions import IrrecoverableException

        with self.assertRaises(IrrecoverableException) as cm:
            self.stack(md=S.metadata(torch.uint8))
        self.assertIn("kv_format", str(cm.exception))

    def test_pinned_lookup_then_non_blocking_get(self):
        st = self.stack()
        base = st.usage()
        keys = [st.key(0x2000 + i) for i in range(4)]
        objs = [st.chunk(10 + i) for i in range(4)]
        copies = [st.chunk(10 + i) for i in range(4)]
        st.put(keys[:2] + keys[3:], objs[:2] + objs[3:])
        objs[2].ref_count_down()
        self.assertEqual(self.loop.run(st.remote.batched_async_contains("req-2", keys, pin=True)), 2)
        lease = st.strata._pins["req-2"]
        self.assertEqual(lease.pages, 2)
        out = self.loop.run(st.remote.batched_get_non_blocking("req-2", keys))
        self.assertEqual(len(out), 2)  # the consecutive prefix only
        self.same(out[1], copies[1])
        self.assertNotIn("req-2", st.strata._pins)
        deadline = time.monotonic() + 5
        while not lease._released and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(lease._released)
        for o in out + copies:
            o.ref_count_down()
        self.assertEqual(st.usage(), base)

    def _partial(self, save_chunk_meta):
        st = self.stack(save_chunk_meta=save_chunk_meta)
        self.assertEqual(st.strata.save_chunk_meta, save_chunk_meta)
        base = st.usage()
        k = st.key(0x3000 + save_chunk_meta)
        st.put([k], [st.chunk(3, tokens=7)])  # a last chunk of 7 tokens
        want = st.chunk(3, tokens=7)
        got = st.remote.get_blocking(k)
        self.assertIsNotNone(got)
        self.assertEqual(got.get_shapes()[0][2], 7)
        self.assertEqual(len(got.byte_array), 7 * st.strata.single_token_size)
        self.same(got, want)
        # An object of the partial chunk's own size, not a padded full chunk.
        self.assertEqual(got.get_physical_size(), want.get_physical_size())
        got.ref_count_down()
        want.ref_count_down()
        self.assertEqual(st.usage(), base)

    def test_partial_last_chunk_with_chunk_meta(self):
        self._partial(True)

    def test_partial_last_chunk_without_chunk_meta(self):
        self._partial(False)

    def test_layerwise_pages_are_one_layer(self):
        from lmcache.v1.memory_management import MemoryFormat

        st = self.stack(layerwise=True)
        layer = st.strata.full_chunk_size_bytes // S.LAYERS
        self.assertTrue(st.strata.save_chunk_meta)  # LMCache forces it layerwise
        self.assertEqual(st.strata.page_bytes, 16 + 28 + layer)
        self.assertIn("lmcache_layerwise", st.strata.descriptor().extra)
        base = st.usage()
        keys = [st.key(0x4000, layer=i) for i in range(S.LAYERS)] + [st.key(0x4001, layer=0)]
        objs = [st.chunk(20 + i, layerwise=True) for i in range(S.LAYERS)] + [st.chunk(30, tokens=5, layerwise=True)]
        copies = [st.chunk(20 + i, layerwise=True) for i in range(S.LAYERS)] + [st.chunk(30, tokens=5, layerwise=True)]
        st.put(keys, objs)
        got = st.remote.batched_get_blocking(keys)
        for g, c in zip(got, copies):
            self.assertIsNotNone(g)
            self.assertEqual(g.get_memory_format(), MemoryFormat.KV_T2D)
            self.same(g, c)
            g.ref_count_down()
            c.ref_count_down()
        self.assertEqual(st.usage(), base)

    def test_batch_larger_than_the_cpu_pool_is_misses_not_a_stall(self):
        # LocalCPUBackend.allocate busy-waits by default for memory that
        # only other requests can free; a get batch holding its own earlier
        # objects must not wait on itself: the rest are misses.
        st = self.stack(max_local_cpu_size=24 * 1024 / 2**30, blocking_timeout_secs=5)
        keys = [st.key(0x8000 + i) for i in range(8)]
        for k in keys:  # one at a time: the pool holds only a few chunks
            st.put([k], [st.chunk(7)])
        t0 = time.monotonic()
        got = st.remote.batched_get_blocking(keys)
        self.assertLess(time.monotonic() - t0, 4)
        hits = [g for g in got if g is not None]
        self.assertGreater(len(hits), 0)
        self.assertLess(len(hits), len(keys))
        self.assertEqual(got[:len(hits)], hits)  # the leading ones
        self.assertGreater(st.strata.counters()["alloc_failures"], 0)
        for g in hits:
            g.ref_count_down()

    def test_random_hash_is_warned_once_and_counted(self):
        with mock.patch.dict(os.environ):
            os.environ.pop("PYTHONHASHSEED", None)
            with self.assertLogs("strata_client.lmcache", logging.WARNING) as logs:
                st = self.stack()
            self.assertEqual(sum("hash()" in m for m in logs.output), 1)
            self.assertEqual(st.strata.counters()["random_hash"], 1)
            os.environ["PYTHONHASHSEED"] = "random"
            self.assertEqual(self.stack().strata.counters()["random_hash"], 1)
            os.environ["PYTHONHASHSEED"] = "0"
            self.assertEqual(self.stack().strata.counters()["random_hash"], 0)
            os.environ.pop("PYTHONHASHSEED")
            self.assertEqual(self.stack(pre_caching_hash_algorithm="builtin").strata.counters()["random_hash"], 1)

    def test_unreachable_cluster_is_misses(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
        s.close()
        st = self.stack(addr=dead)  # must not raise
        base = st.usage()
        k = st.key(1)
        c = st.conn
        self.assertFalse(st.remote.contains(k))
        self.assertEqual(st.remote.batched_contains([k, k]), 0)
        self.assertIsNone(st.remote.get_blocking(k))
        self.assertEqual(st.remote.batched_get_blocking([k, k]), [None, None])
        self.assertEqual(self.loop.run(c.batched_async_contains("x", [k], True)), 0)
        self.assertEqual(self.loop.run(c.batched_get_non_blocking("x", [k])), [])
        st.put([k], [st.chunk(1)])  # dropped, not raised
        self.assertEqual(self.loop.run(c.list()), [])
        self.assertFalse(st.remote.remove(k))
        self.assertEqual(self.loop.run(c.ping()), 1)
        cnt = st.strata.counters()
        self.assertGreaterEqual(cnt["failures"], 8)
        self.assertEqual(cnt["put_failed"], 1)
        self.assertEqual(st.usage(), base)


class LMCacheNodeKilledTest(unittest.TestCase):
    """A stratad SIGKILLed while a batch is in flight: the batch's reads
    are misses (or verified hits), its writes fail, nothing raises."""

    def test_node_killed_mid_batch(self):
        S.require_lmcache()
        loop = S.Loop()
        self.addCleanup(loop.close)
        node = Node(host_bytes="256MiB")
        self.addCleanup(node.kill)
        st = S.Stack(loop, S.engine_config(node.addr), S.metadata())
        self.addCleanup(st.close)
        base = st.usage()
        n = 96
        keys = [st.key(0x5000 + i) for i in range(n)]
        st.put(keys, [st.chunk(i) for i in range(n)])
        self.assertEqual(st.remote.batched_contains(keys), n)
        c = st.conn
        got, put_err = [], []
        killed = threading.Event()

        def batches():
            # until one batch has run wholly after the kill (bounded)
            for _ in range(500):
                after = killed.is_set()
                yield
                if after:
                    return

        def reader():
            for _ in batches():
                got.append(loop.run(c.batched_get(keys)))

        def writer():
            try:
                more = [st.key(0x6000 + i) for i in range(n)]
                for r, _ in enumerate(batches()):
                    objs = [st.chunk(r * n + i) for i in range(n)]
                    loop.run(c.batched_put(more, objs))  # the wrapper drops the refs
            except Exception as e:  # pragma: no cover - the failure this test is for
                put_err.append(e)

        threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:  # mid-stream
            time.sleep(0.005)
        node.kill()
        killed.set()
        t0 = time.monotonic()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual(put_err, [])
        self.assertLess(time.monotonic() - t0, 30)
        want = [st.chunk(i) for i in range(n)]
        for batch in got:
            self.assertEqual(len(batch), n)
            for o, w in zip(batch, want):
                if o is not None:  # a hit is always the exact page
                    self.assertEqual(bytes(o.byte_array), bytes(w.byte_array))
                    o.ref_count_down()
        self.assertTrue(all(o is None for o in got[-1]), "the last batch ran after the kill")
        for w in want:
            w.ref_count_down()
        self.assertEqual(st.remote.batched_contains(keys), 0)
        self.assertIsNone(st.remote.get_blocking(keys[0]))
        cnt = st.strata.counters()
        self.assertGreater(cnt["get_misses"], 0)
        self.assertGreater(cnt["put_failed"], 0)
        self.assertEqual(st.usage(), base)


if __name__ == "__main__":
    unittest.main()
