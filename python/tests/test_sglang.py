"""The SGLang HiCache storage backend against a real stratad, loaded the way
SGLang's dynamic backend factory loads it, with a host KV pool stand-in
(numpy buffers laid out like SGLang's page_first MHA host pool)."""

import importlib
import socket
import time
import unittest

from _support import Node, NodeTest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

from strata_client import key_from_engine_hash, sglang_page_hashes
from strata_client.sglang import HiCacheStorageConfig, HiCacheStorageExtraInfo, StrataHiCacheStorage


class FakeHostPool:
    """page_first MHA host pool: kv_buffer (2, tokens, layers*heads*dim*2 bytes);
    get_page_buffer_meta gives [k_ptr, v_ptr] per page."""

    layout = "page_first"
    dtype = "torch.bfloat16"

    def __init__(self, pages=16, page_size=4, layer_num=2, head_num=2, head_dim=8):
        self.page_size, self.layer_num, self.head_num, self.head_dim = page_size, layer_num, head_num, head_dim
        self.size = pages * page_size
        self.tok = layer_num * head_num * head_dim * 2  # bytes of K (or V) per token
        self.kv_buffer = np.zeros((2, self.size, self.tok), dtype=np.uint8)

    @property
    def page_bytes(self):
        return 2 * self.page_size * self.tok

    def get_page_buffer_meta(self, indices):
        idx = indices.tolist()
        assert len(idx) % self.page_size == 0
        base = self.kv_buffer.ctypes.data
        v_off = self.size * self.tok
        ptrs = []
        for i in range(0, len(idx), self.page_size):
            k = base + idx[i] * self.tok
            ptrs += [k, k + v_off]
        return ptrs, [self.page_size * self.tok] * len(ptrs)

    def get_dummy_flat_data_page(self):
        return np.zeros(self.page_bytes, dtype=np.uint8)

    def get_data_page(self, index, flat=True):
        return self.kv_buffer[:, index:index + self.page_size].reshape(-1).copy()

    def set_from_flat_data_page(self, index, data_page):
        self.kv_buffer[:, index:index + self.page_size] = np.asarray(data_page).reshape(2, self.page_size, self.tok)

    def fill(self, slot, seed):
        rng = np.random.default_rng(seed)
        self.kv_buffer[:, slot * self.page_size:(slot + 1) * self.page_size] = rng.integers(0, 256, (2, self.page_size, self.tok), dtype=np.uint8)

    def page(self, slot):
        return self.kv_buffer[:, slot * self.page_size:(slot + 1) * self.page_size].tobytes()


class Indices(list):
    def tolist(self):
        return list(self)


def host_indices(pool, slots):
    return Indices(s * pool.page_size + j for s in slots for j in range(pool.page_size))


def config(addr, **extra):
    ec = {"backend_name": "strata", "module_path": "strata_client.sglang", "class_name": "StrataHiCacheStorage",
          "interface_v1": 1, "strata_addr": addr, "strata_tenant": "acme", "strata_model_revision": "r1",
          "strata_node_timeout": 1.0, "strata_reconnect_interval": 0.2}
    ec.update(extra)
    return HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                is_mla_model=False, enable_storage_metrics=True, is_page_first_layout=True,
                                model_name="Qwen/Qwen3-0.6B", extra_config=ec)


def dynamic_backend(storage_config, pool):
    """What sglang's StorageBackendFactory._create_dynamic_backend and the
    cache controller do: import module_path, take class_name, construct
    with (storage_config, kwargs), then register the host pool."""
    ec = storage_config.extra_config
    cls = getattr(importlib.import_module(ec["module_path"]), ec["class_name"])
    backend = cls(storage_config, {})
    backend.register_mem_pool_host(pool)
    return backend


def dead_addr():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


@unittest.skipIf(np is None, "numpy (python3-numpy) is needed for the host pool stand-in")
class SGLangBackendTest(NodeTest):
    def setUp(self):
        self.pool = FakeHostPool()
        self.backend = dynamic_backend(config(self.node.addr), self.pool)

    def tearDown(self):
        self.backend.close()

    def hashes(self, base, pages):
        toks = list(range(base, base + pages * self.pool.page_size))
        return sglang_page_hashes(toks, self.pool.page_size)

    def test_zero_copy_round_trip_and_prefix(self):
        b, pool = self.backend, self.pool
        keys = self.hashes(1000, 6)
        for s in range(6):
            pool.fill(s, s + 1)
        want = [pool.page(s) for s in range(6)]
        self.assertEqual(b.batch_set_v1(keys[:3], host_indices(pool, [0, 1, 2]), HiCacheStorageExtraInfo()), [True] * 3)
        self.assertEqual(b.batch_set_v1(keys[4:6], host_indices(pool, [4, 5])), [True, True])
        # batch_exists counts consecutive hits from the start: page 3 is missing.
        self.assertEqual(b.batch_exists(keys), 3)
        self.assertEqual(b.batch_exists(keys[4:]), 2)
        self.assertEqual(b.batch_exists([]), 0)
        self.assertTrue(b.exists(keys[0]))
        self.assertFalse(b.exists(keys[3]))
        # Read into other pool slots (zero-copy into the pool's K/V buffers).
        got = b.batch_get_v1(keys, host_indices(pool, [8, 9, 10, 11, 12, 13]))
        self.assertEqual(got, [True, True, True, False, True, True])
        for i, s in enumerate([8, 9, 10]):
            self.assertEqual(pool.page(s), want[i])
        # Writing again is a no-op success (content addressed).
        self.assertEqual(b.batch_set_v1(keys[:3], host_indices(pool, [0, 1, 2])), [True] * 3)
        c = b.counters()
        self.assertEqual(c["set_skipped_existing"], 3)
        self.assertEqual(c["exists_hits"], 3 + 2 + 1)
        stats = b.get_stats()
        self.assertTrue(stats.prefetch_pgs and stats.backup_pgs)
        self.assertEqual(b.get_stats().prefetch_pgs, [])  # drained per call

    def test_generic_path(self):
        b, pool = self.backend, self.pool
        keys = self.hashes(5000, 3)
        pages = []
        for s in range(3):
            pool.fill(s, 100 + s)
            pages.append(pool.get_data_page(s * pool.page_size))
        self.assertTrue(b.batch_set(keys[:2], pages[:2]))
        self.assertTrue(b.set(keys[2], pages[2]))
        targets = [pool.get_dummy_flat_data_page() for _ in range(4)]
        out = b.batch_get(keys + ["ff" * 32], targets)
        self.assertIs(out[0], targets[0])
        self.assertIsNone(out[3])
        for i in range(3):
            self.assertEqual(out[i].tobytes(), pages[i].tobytes())
        self.assertIsNotNone(b.get(keys[1], pool.get_dummy_flat_data_page()))
        # A target of the wrong size is a miss, not an exception.
        self.assertEqual(b.batch_get(keys[:1], [np.zeros(3, dtype=np.uint8)]), [None])
        self.assertTrue(b.clear())
        self.assertEqual(b.batch_exists(keys), 0)

    def test_keys_match_the_python_client(self):
        # The backend's keys are key_from_engine_hash(namespace, raw hash):
        # any client that opens the same descriptor finds the same pages.
        from strata_client import Client

        keys = self.hashes(9000, 2)
        self.pool.fill(0, 9)
        self.pool.fill(1, 10)
        self.assertEqual(self.backend.batch_set_v1(keys, host_indices(self.pool, [0, 1])), [True, True])
        d = self.backend.descriptor()
        self.assertEqual(d.page_bytes, self.pool.page_bytes)
        self.assertEqual((d.engine, d.layout, d.kv_dtype, d.page_tokens), ("sglang", "page_first", "bf16", 4))
        with Client(self.node.addr) as c:
            ns = c.open(d)
            skeys = [key_from_engine_hash(ns.id, bytes.fromhex(k)) for k in keys]
            out = ns.get(skeys)
            self.assertEqual(bytes(out[1]), self.pool.page(1))

    def test_failures_are_misses_and_counted(self):
        pool = FakeHostPool()
        t0 = time.monotonic()
        b = dynamic_backend(config(dead_addr()), pool)  # must not raise
        try:
            keys = self.hashes(1, 3)
            self.assertEqual(b.batch_exists(keys), 0)
            self.assertFalse(b.exists(keys[0]))
            self.assertEqual(b.batch_get_v1(keys, host_indices(pool, [0, 1, 2])), [False] * 3)
            self.assertEqual(b.batch_set_v1(keys, host_indices(pool, [0, 1, 2])), [False] * 3)
            self.assertEqual(b.batch_get(keys, [pool.get_dummy_flat_data_page()] * 3), [None] * 3)
            self.assertFalse(b.batch_set(keys, [pool.get_dummy_flat_data_page()] * 3))
            self.assertFalse(b.clear())
            c = b.counters()
            self.assertGreaterEqual(c["failures"], 6)
            self.assertEqual(c["get_misses"], 6)
            self.assertEqual(c["set_failed"], 6)
            self.assertIsNotNone(b.get_stats())
            self.assertLess(time.monotonic() - t0, 15)
        finally:
            b.close()

    def test_node_killed_means_misses(self):
        node = Node()
        pool = FakeHostPool()
        b = dynamic_backend(config(node.addr), pool)
        try:
            keys = self.hashes(777, 2)
            pool.fill(0, 1)
            pool.fill(1, 2)
            self.assertEqual(b.batch_set_v1(keys, host_indices(pool, [0, 1])), [True, True])
            node.kill()
            t0 = time.monotonic()
            self.assertEqual(b.batch_exists(keys), 0)
            self.assertEqual(b.batch_get_v1(keys, host_indices(pool, [2, 3])), [False, False])
            self.assertEqual(b.batch_set_v1(keys, host_indices(pool, [0, 1])), [False, False])
            self.assertLess(time.monotonic() - t0, 5)
            self.assertGreater(b.counters()["get_misses"], 0)
        finally:
            b.close()
            node.kill()

    def test_v2_auxiliary_pool(self):
        from types import SimpleNamespace as T

        b, pool = self.backend, self.pool
        aux = FakeHostPool(layer_num=1, head_num=1, head_dim=4)  # an indexer-like side pool
        b.register_mem_host_pool_v2(pool, "kv")
        b.register_mem_host_pool_v2(aux, "indexer")
        keys = self.hashes(31_000, 3)
        for s in range(3):
            pool.fill(s, 50 + s)
            aux.fill(s, 60 + s)
        kv_t = T(name="kv", keys=keys, host_indices=host_indices(pool, [0, 1, 2]), hit_policy="all_pages")
        ix_t = T(name="indexer", keys=keys[:2], host_indices=host_indices(aux, [0, 1]), hit_policy="all_pages")
        self.assertEqual(b.batch_set_v2([kv_t, ix_t]), {"kv": [True] * 3, "indexer": [True] * 2})
        r = b.batch_exists_v2(keys, [T(name="indexer", keys=None, hit_policy="all_pages")])
        self.assertEqual((r.kv_hit_pages, r.extra_pool_hit_pages), (2, {"kv": 3, "indexer": 2}))
        r = b.batch_exists_v2(keys, [T(name="indexer", keys=keys[:1], hit_policy="trailing_pages")])
        self.assertEqual(r.kv_hit_pages, 2)
        got = b.batch_get_v2([T(name="indexer", keys=keys[:2], host_indices=host_indices(aux, [5, 6]), hit_policy="all_pages")])
        self.assertEqual(got, {"indexer": [True, True]})
        self.assertEqual(aux.page(6), FakeHostPool.page(aux, 1))
        # An unknown pool is a miss, not an exception.
        self.assertEqual(b.batch_get_v2([T(name="swa", keys=keys[:1], host_indices=host_indices(aux, [0]), hit_policy="all_pages")]),
                         {"swa": [False]})

    def test_bad_config_is_loud(self):
        with self.assertRaises(ValueError):
            StrataHiCacheStorage(HiCacheStorageConfig(extra_config={}), {})


if __name__ == "__main__":
    unittest.main()
