"""The SGLang HiCache storage backend against the installed sglang (0.5.23)
and a real stratad: loaded through SGLang's own StorageBackendFactory
"dynamic" path with a real HiCacheStorageConfig, driven with the cache
controller's call sequence, on SGLang's own host pool classes built on the
CPU (MHATokenToKVPoolHost in the page_first layout, LogicalHostPool as a
hybrid model's anchor), pages in bfloat16 and float8_e4m3fn, keys from
SGLang's own hash function (get_storage_hash_str, its C++ extension).

Without SGLang installed these tests skip, saying so; with
STRATA_REQUIRE_ENGINES=1 (CI) a missing engine fails them
(_support.require_engine)."""

import os
import socket
import tempfile
import threading
import time
import tracemalloc
import unittest

from _support import Node, NodeTest, require_engine

_NAMES = {
    "STORAGE_BATCH_SIZE": ("sglang.srt.mem_cache.hicache_storage", "STORAGE_BATCH_SIZE"),
    "KVBufferLayout": ("sglang.srt.mem_cache.device_pool_info", "KVBufferLayout"),
    "KVBuffers": ("sglang.srt.mem_cache.device_pool_info", "KVBuffers"),
    "MHABufferInfo": ("sglang.srt.mem_cache.device_pool_info", "MHABufferInfo"),
    "HiCacheFile": ("sglang.srt.mem_cache.hicache_storage", "HiCacheFile"),
    "HiCacheStorage": ("sglang.srt.mem_cache.hicache_storage", "HiCacheStorage"),
    "HiCacheStorageConfig": ("sglang.srt.mem_cache.hicache_storage", "HiCacheStorageConfig"),
    "HiCacheStorageExtraInfo": ("sglang.srt.mem_cache.hicache_storage", "HiCacheStorageExtraInfo"),
    "PoolHitPolicy": ("sglang.srt.mem_cache.hicache_storage", "PoolHitPolicy"),
    "PoolTransfer": ("sglang.srt.mem_cache.hicache_storage", "PoolTransfer"),
    "LogicalHostPool": ("sglang.srt.mem_cache.memory_pool_host", "LogicalHostPool"),
    "MHATokenToKVPoolHost": ("sglang.srt.mem_cache.pool_host.mha", "MHATokenToKVPoolHost"),
    "MHATokenToKVPool": ("sglang.srt.mem_cache.memory_pool", "MHATokenToKVPool"),
    "MHATokenToKVPoolMXFP8": ("sglang.srt.mem_cache.memory_pool", "MHATokenToKVPoolMXFP8"),
    "MHATokenToKVPoolMXFP8Host": ("sglang.srt.mem_cache.pool_host.mha_mxfp8", "MHATokenToKVPoolMXFP8Host"),
    "MLATokenToKVPool": ("sglang.srt.mem_cache.memory_pool", "MLATokenToKVPool"),
    "MLATokenToKVPoolHost": ("sglang.srt.mem_cache.pool_host.mla", "MLATokenToKVPoolHost"),
    "StorageBackendFactory": ("sglang.srt.mem_cache.storage.backend_factory", "StorageBackendFactory"),
    "get_storage_hash_str": ("sglang.srt.mem_cache.utils", "get_storage_hash_str"),
    "torch": ("torch", None),
}


def load_sglang():
    """The installed SGLang's classes into this module (through
    require_engine: a missing engine skips, or fails under
    STRATA_REQUIRE_ENGINES=1), and the backend."""
    import sys

    g = globals()
    for name, (mod, attr) in _NAMES.items():
        m = require_engine(mod)
        g[name] = getattr(m, attr) if attr else m
    if "setuptools" not in sys.modules:
        # In the whole suite another test's imports leave the standard
        # library's distutils loaded, and setuptools then refuses to load
        # its own copy (_distutils_hack's assertion) when
        # torch.utils.cpp_extension imports it to load SGLang's page-hash
        # extension: let it use the standard library's.
        os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    from strata_client.sglang import StrataHiCacheStorage, UnservableConfiguration

    g["StrataHiCacheStorage"] = StrataHiCacheStorage
    g["UnservableConfiguration"] = UnservableConfiguration


SITE = os.sep + "site-packages" + os.sep


def mha_pool(dtype, pages=32, page_size=4, layers=2, heads=2, dim=8, layout="page_first"):
    """SGLang's MHA host pool on the CPU, built as the engine builds it:
    the device pool MHATokenToKVPool of the KV dtype (which stores fp8 as
    uint8), its get_device_pool_infos() buffer info, MHATokenToKVPoolHost
    over it in `layout`, sized to about `pages` pages."""
    dev = MHATokenToKVPool(size=pages * page_size, page_size=page_size, dtype=dtype, head_num=heads, head_dim=dim,
                           layer_num=layers, device="cpu", enable_memory_saver=False)
    info = dev.get_device_pool_infos()[0].buffer_info
    return MHATokenToKVPoolHost(info, host_to_device_ratio=1.0, host_size=0, page_size=page_size, layout=layout,
                                pin_memory=False, device="cpu", device_capacity_tokens=pages * page_size,
                                start_layer=0, end_layer=layers)


def mla_pool(dtype, pages=32, page_size=4, layers=2, rank=16, rope=8, layout="page_first"):
    """SGLang's MLA host pool, from MLATokenToKVPool's buffer info."""
    dev = MLATokenToKVPool(size=pages * page_size, page_size=page_size, dtype=dtype, kv_lora_rank=rank,
                           qk_rope_head_dim=rope, layer_num=layers, device="cpu", enable_memory_saver=False)
    info = dev.get_device_pool_infos()[0].buffer_info
    return MLATokenToKVPoolHost(info, host_to_device_ratio=1.0, host_size=0, page_size=page_size, layout=layout,
                                pin_memory=False, device="cpu", device_capacity_tokens=pages * page_size,
                                start_layer=0, end_layer=layers, target_layer_num=layers)


_PUBLISHED = []


def publish_kv_cache_dtype(value):
    """SGLang's runtime context as the scheduler publishes it, with
    --kv-cache-dtype `value` (a local model directory: no download)."""
    if _PUBLISHED and _PUBLISHED[-1] == value:
        return
    from sglang.srt import runtime_context
    from sglang.srt.server_args import ServerArgs

    d = tempfile.mkdtemp(prefix="strata-sglang-model-")
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,'
                '"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,'
                '"intermediate_size":128,"vocab_size":1000,"max_position_embeddings":2048,'
                '"rms_norm_eps":1e-6,"torch_dtype":"bfloat16","rope_theta":10000}')
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    runtime_context.publish(ServerArgs(model_path=d, kv_cache_dtype=value, device="cpu", skip_tokenizer_init=True),
                            role="scheduler")
    _PUBLISHED.append(value)


def fill(pool, indices, seed):
    """Random bytes into the pool's pages holding tokens `indices` (every
    layout: through the engine's set_from_flat_data_page)."""
    g = torch.Generator().manual_seed(seed)
    for i in range(0, len(indices), pool.page_size):
        page = pool.get_dummy_flat_data_page()
        raw = torch.randint(0, 256, (page.numel() * page.element_size(),), dtype=torch.uint8, generator=g)
        pool.set_from_flat_data_page(int(indices[i]), raw.view(page.dtype))


def page_bytes(pool, indices):
    """The bytes of the pool's pages holding tokens `indices`, in the
    engine's generic page order (get_data_page), whatever the layout."""
    return b"".join(pool.get_data_page(int(indices[i])).contiguous().view(torch.uint8).numpy().tobytes()
                    for i in range(0, len(indices), pool.page_size))


def config(addr, mla=False, tp_rank=0, tp_size=1, **extra):
    """The HiCacheStorageConfig the cache controller makes, with the
    extra config an operator passes (--hicache-storage-backend-extra-config
    less the keys SGLang pops for itself)."""
    ec = {"backend_name": "strata", "module_path": "strata_client.sglang", "class_name": "StrataHiCacheStorage",
          "interface_v1": 1, "strata_addr": addr, "strata_tenant": "acme", "strata_model_revision": "r1",
          "strata_node_timeout": 2.0, "strata_reconnect_interval": 0.2}
    ec.update(extra)
    return HiCacheStorageConfig(tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                is_mla_model=mla, enable_storage_metrics=True, is_page_first_layout=True,
                                model_name="Qwen/Qwen3-0.6B", extra_config=ec)


def attach(storage_config, pool, v2_pools=()):
    """HiCacheController.attach_storage_backend (and the hybrid
    controller's v2 burst) as installed: create through the factory,
    register the storage host pool, register each pool of the group, end
    the burst."""
    b = StorageBackendFactory.create_backend("dynamic", storage_config, pool)
    b.register_mem_pool_host(pool)
    for name, p in v2_pools:
        b.register_mem_host_pool_v2(p, name)
    b.on_host_pools_registered()
    return b


def hashes(base, pages, page_size=4):
    return get_storage_hash_str(list(range(base, base + pages * page_size)), None, page_size=page_size)


def dead_addr():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def batches(keys, prefix_keys):
    """The cache controller's loop: STORAGE_BATCH_SIZE pages a call, with
    HiCacheStorageExtraInfo(prefix_keys) grown by each batch."""
    for i in range(0, len(keys), STORAGE_BATCH_SIZE):
        batch = keys[i:i + STORAGE_BATCH_SIZE]
        yield i, batch, HiCacheStorageExtraInfo(prefix_keys=prefix_keys)
        if prefix_keys is not None:
            prefix_keys = prefix_keys + batch


def backup(b, pool, keys, host_indices, prefix_keys):
    """HiCacheController._page_backup with interface_v1: batch_set_v1 per batch."""
    ps = pool.page_size
    ok = []
    for i, batch, info in batches(keys, prefix_keys):
        ok += b.batch_set_v1(batch, host_indices[i * ps:(i + len(batch)) * ps], info)
    return ok


def hit_query(b, keys, prefix_keys):
    """HiCacheController._storage_hit_query: batch_exists per batch, stop at
    the first short batch."""
    hit = 0
    for _, batch, info in batches(keys, prefix_keys):
        n = b.batch_exists(batch, info)
        hit += n
        if n < len(batch):
            break
    return hit


def transfer(b, pool, keys, host_indices, prefix_keys):
    """HiCacheController._page_transfer with interface_v1: batch_get_v1 per
    batch, counting the leading successes."""
    ps = pool.page_size
    done = 0
    for i, batch, info in batches(keys, prefix_keys):
        res = b.batch_get_v1(batch, host_indices[i * ps:(i + len(batch)) * ps], info)
        n = res.index(False) if False in res else len(res)
        done += n
        if n < len(batch):
            break
    return done


def stat(node_addr, ns_id, keys):
    """The node's page metadata (parent key, depth) through Admin.StatKeys."""
    import grpc
    from strata_client._proto import strata_pb2 as pb, strata_pb2_grpc as pbg

    with grpc.insecure_channel(node_addr) as ch:
        return list(pbg.AdminStub(ch).StatKeys(pb.StatKeysRequest(namespace_id=ns_id, keys=keys), timeout=10).keys)


class SGLangBackendTest(NodeTest):
    @classmethod
    def setUpClass(cls):
        load_sglang()
        hashes(0, 1)  # SGLang's C++ page-hash extension: built and loaded now, or the class fails here
        super().setUpClass()

    def test_real_engine_classes(self):
        import sglang.srt.mem_cache.hicache_storage as hs

        b = attach(config(self.node.addr), mha_pool(torch.bfloat16))
        try:
            self.assertIsInstance(b, StrataHiCacheStorage)
            self.assertIsInstance(b, HiCacheStorage)
            self.assertIs(StrataHiCacheStorage.__mro__[2], hs.HiCacheStorage)
            for mod in (hs, MHATokenToKVPoolHost, LogicalHostPool, StorageBackendFactory):
                f = getattr(mod, "__file__", None) or __import__(mod.__module__, fromlist=["x"]).__file__
                self.assertIn(SITE + "sglang" + os.sep, f)
        finally:
            b.close()

    def test_controller_sequence_bf16_and_fp8(self):
        for dt in (torch.bfloat16, torch.float8_e4m3fn):
            with self.subTest(dtype=str(dt)):
                self.controller_sequence(dt)

    def controller_sequence(self, dt):
        publish_kv_cache_dtype("fp8_e4m3" if dt == torch.float8_e4m3fn else "auto")
        pool = mha_pool(dt, pages=2 * 300 + 8)
        b = attach(config(self.node.addr), pool)
        try:
            n = 300  # three batches of STORAGE_BATCH_SIZE (128, 128, 44)
            keys = hashes(hash(str(dt)) % 100000 * 10000, n)
            src = pool.alloc(n * pool.page_size)
            fill(pool, src, 7)
            want = [page_bytes(pool, src[i * 4:(i + 1) * 4]) for i in range(n)]
            self.assertEqual(backup(b, pool, keys, src, []), [True] * n)
            self.assertEqual(hit_query(b, keys, []), n)
            self.assertEqual(hit_query(b, keys + hashes(9_000_000, 2), []), n)
            dst = pool.alloc(n * pool.page_size)
            self.assertEqual(transfer(b, pool, keys, dst, []), n)
            for i in (0, 127, 128, 299):
                self.assertEqual(page_bytes(pool, dst[i * 4:(i + 1) * 4]), want[i])
            # Parent and depth carry on across the 128-page batches.
            ns = b._ensure()
            skeys = b._keys(ns, keys)
            info = stat(self.node.addr, ns.id, [skeys[0], skeys[128], skeys[299]])
            self.assertEqual([k.depth for k in info], [0, 128, 299])
            self.assertEqual((info[0].parent_key, info[1].parent_key, info[2].parent_key), (b"", skeys[127], skeys[298]))
            # A child radix node: prefix_keys are its parents' hashes.
            child = get_storage_hash_str(list(range(5000, 5008)), keys[-1], page_size=4)
            csrc = pool.alloc(8)
            fill(pool, csrc, 8)
            self.assertEqual(backup(b, pool, child, csrc, keys), [True, True])
            info = stat(self.node.addr, ns.id, b._keys(ns, child))
            self.assertEqual([k.depth for k in info], [300, 301])
            self.assertEqual(info[0].parent_key, skeys[299])
            self.assertEqual(b.counters()["sets_without_prefix_keys"], 0)
            stats = b.get_stats()
            self.assertTrue(stats.backup_pgs and stats.prefetch_pgs)
            self.assertEqual(b.get_stats().backup_pgs, [])  # drained per call
        finally:
            b.close()

    def test_without_prefix_keys_is_said(self):
        pool = mha_pool(torch.bfloat16)
        b = attach(config(self.node.addr), pool)
        try:
            keys = hashes(77_000, 3)
            src = pool.alloc(12)
            fill(pool, src, 3)
            with self.assertLogs("strata_client.sglang", "WARNING") as logs:
                self.assertEqual(backup(b, pool, keys, src, None), [True] * 3)
            self.assertIn("hicache_storage_pass_prefix_keys", "\n".join(logs.output))
            self.assertEqual(b.counters()["sets_without_prefix_keys"], 1)
        finally:
            b.close()

    def test_get_stats_is_sglangs_storage_metrics(self):
        # SGLang's metrics collector asserts isinstance(StorageMetrics).
        from sglang.srt.observability.metrics_collector import StorageMetrics

        b = attach(config(self.node.addr), mha_pool(torch.bfloat16))
        try:
            self.assertIsInstance(b.get_stats(), StorageMetrics)
        finally:
            b.close()

    def test_generic_path_bf16_and_fp8(self):
        # Without interface_v1 the controller moves torch tensors of the
        # pool's dtype: get_data_page -> batch_set; get_dummy_flat_data_page
        # -> batch_get -> set_from_flat_data_page.
        for dt in (torch.bfloat16, torch.float8_e4m3fn):
            with self.subTest(dtype=str(dt)):
                publish_kv_cache_dtype("fp8_e4m3" if dt == torch.float8_e4m3fn else "auto")
                pool = mha_pool(dt)
                b = attach(config(self.node.addr, interface_v1=0), pool)
                try:
                    keys = hashes(200_000 + (dt == torch.bfloat16) * 1000, 3)
                    src = pool.alloc(12)
                    fill(pool, src, 11)
                    data = [pool.get_data_page(src[i * 4]) for i in range(3)]
                    self.assertEqual(data[0].dtype, torch.uint8 if dt == torch.float8_e4m3fn else dt)
                    self.assertTrue(b.batch_set(keys, data))
                    dummies = [pool.get_dummy_flat_data_page() for _ in range(4)]
                    out = b.batch_get(keys + hashes(300_000, 1), dummies)
                    self.assertIsNone(out[3])
                    dst = pool.alloc(12)
                    for i in range(3):
                        self.assertIs(out[i], dummies[i])
                        pool.set_from_flat_data_page(dst[i * 4], out[i])
                        self.assertEqual(page_bytes(pool, dst[i * 4:(i + 1) * 4]), page_bytes(pool, src[i * 4:(i + 1) * 4]))
                    self.assertEqual(b.counters()["failures"], 0)
                finally:
                    b.close()

    def test_sglang_hash_is_strata_helper(self):
        from strata_client import sglang_page_hashes

        toks = list(range(1000, 1064))
        self.assertEqual(get_storage_hash_str(toks, None, page_size=16), sglang_page_hashes(toks, 16))

    def test_logical_anchor_side_pools(self):
        # DeepSeek V4: the anchor (and the "kv" entry) is a LogicalHostPool;
        # the side pools carry the bytes.
        anchor = LogicalHostPool(64, 4)
        swa = mha_pool(torch.bfloat16, layers=1)
        b = attach(config(self.node.addr), anchor, [("kv", anchor), ("swa", swa)])
        try:
            keys = hashes(400_000, 3)
            src = swa.alloc(12)
            fill(swa, src, 5)
            kv_idx = anchor.alloc(12)
            self.assertEqual(b.batch_set_v1(keys, kv_idx), [True] * 3)  # nothing to store
            t = PoolTransfer(name="swa", host_indices=src, keys=keys)
            self.assertEqual(b.batch_set_v2([t]), {"swa": [True] * 3})
            r = b.batch_exists_v2(keys, [PoolTransfer(name="swa", keys=keys, hit_policy=PoolHitPolicy.ALL_PAGES)])
            self.assertEqual((r.kv_hit_pages, r.restorable_prefix_pages), (3, [1, 2, 3]))
            dst = swa.alloc(12)
            self.assertEqual(b.batch_get_v2([PoolTransfer(name="swa", host_indices=dst, keys=keys)]), {"swa": [True] * 3})
            self.assertEqual(page_bytes(swa, dst), page_bytes(swa, src))
            self.assertEqual(b.batch_exists(keys), 0)
            self.assertEqual(b.counters()["failures"], 0)
        finally:
            b.close()

    def test_logical_anchor_real_kv_pool_from_v2(self):
        anchor = LogicalHostPool(64, 4)
        kv = mha_pool(torch.bfloat16)
        b = attach(config(self.node.addr), anchor, [("kv", kv)])
        try:
            self.assertEqual(b.descriptor().page_bytes, 2 * 4 * 2 * 2 * 8 * 2)
            keys = hashes(500_000, 2)
            src = kv.alloc(8)
            fill(kv, src, 6)
            self.assertEqual(b.batch_set_v1(keys, src, HiCacheStorageExtraInfo(prefix_keys=[])), [True, True])
            self.assertEqual(b.batch_exists(keys), 2)
            dst = kv.alloc(8)
            self.assertEqual(b.batch_get_v1(keys, dst), [True, True])
            self.assertEqual(page_bytes(kv, dst), page_bytes(kv, src))
        finally:
            b.close()

    def test_restorable_prefix_pages_match_sglang_file_backend(self):
        # Six KV pages; a trailing (SWA-like, window 1) pool holding pages
        # 2 and 5; an all-pages (indexer-like) pool holding pages 1-4. Only
        # a prefix of 2 pages is restorable: 4 is not (no SWA state there).
        kv = mha_pool(torch.bfloat16)
        swa = mha_pool(torch.bfloat16, layers=1)
        ix = mha_pool(torch.bfloat16, layers=1, heads=1)
        pools = [("kv", kv), ("swa", swa), ("indexer", ix)]
        keys = hashes(600_000, 6)
        d = tempfile.mkdtemp(prefix="strata-hicache-file-")
        ref = HiCacheFile(config("unused", file_storage_path=d))
        ours = attach(config(self.node.addr), kv, pools)
        try:
            for name, p in pools:
                ref.register_mem_host_pool_v2(p, name)
            src = kv.alloc(24)
            fill(kv, src, 1)
            s_idx, i_idx = swa.alloc(24), ix.alloc(24)
            fill(swa, s_idx, 2)
            fill(ix, i_idx, 3)
            sel = lambda idx, pages: torch.cat([idx[p * 4:(p + 1) * 4] for p in pages])  # noqa: E731
            writes = [PoolTransfer(name="kv", host_indices=src, keys=keys),
                      PoolTransfer(name="swa", host_indices=sel(s_idx, [1, 4]), keys=[keys[1], keys[4]]),
                      PoolTransfer(name="indexer", host_indices=sel(i_idx, [0, 1, 2, 3]), keys=keys[:4])]
            self.assertEqual(ours.batch_set_v2(writes), {"kv": [True] * 6, "swa": [True] * 2, "indexer": [True] * 4})
            ref.batch_set_v2(writes)
            query = [PoolTransfer(name="swa", keys=keys[-1:], hit_policy=PoolHitPolicy.TRAILING_PAGES),
                     PoolTransfer(name="indexer", keys=keys, hit_policy=PoolHitPolicy.ALL_PAGES)]
            want = ref.batch_exists_v2(keys, query)
            got = ours.batch_exists_v2(keys, query)
            self.assertEqual(want.restorable_prefix_pages, [2])
            self.assertEqual((got.kv_hit_pages, got.restorable_prefix_pages), (want.kv_hit_pages, want.restorable_prefix_pages))
            self.assertEqual({str(k): v for k, v in got.extra_pool_hit_pages.items()},
                             {str(k): v for k, v in want.extra_pool_hit_pages.items()})
        finally:
            ours.close()

    def test_mla_mamba_pool_keeps_tp(self):
        # is_mla_model: KV is the same on every TP rank (one namespace), but
        # the mamba state is split across ranks: rank 1 must not read rank 0's.
        ranks = []
        try:
            for r in range(2):
                kv, mamba = mha_pool(torch.bfloat16), mha_pool(torch.bfloat16, layers=1)
                ranks.append((attach(config(self.node.addr, mla=True, tp_rank=r, tp_size=2), kv, [("kv", kv), ("mamba", mamba)]), mamba))
            keys = hashes(700_000, 1)
            for r, (b, mamba) in enumerate(ranks):
                idx = mamba.alloc(4)
                fill(mamba, idx, 100 + r)
                self.assertEqual(b.batch_set_v2([PoolTransfer(name="mamba", host_indices=idx, keys=keys)],
                                                HiCacheStorageExtraInfo(prefix_keys=[])), {"mamba": [True]})
                ranks[r] = (b, mamba, page_bytes(mamba, idx))
            for b, mamba, want in ranks:
                dst = mamba.alloc(4)
                self.assertEqual(b.batch_get_v2([PoolTransfer(name="mamba", host_indices=dst, keys=keys)]), {"mamba": [True]})
                self.assertEqual(page_bytes(mamba, dst), want)
            self.assertNotEqual(ranks[0][0]._pool_ns("mamba").id, ranks[1][0]._pool_ns("mamba").id)
            self.assertEqual(ranks[0][0]._ensure().id, ranks[1][0]._ensure().id)
        finally:
            for x in ranks:
                x[0].close()

    def test_set_v1_stages_in_one_reused_buffer(self):
        # batch_set_v1 copies a page (two segments in the pool) once into a
        # staging buffer it keeps: a second batch allocates no page copies.
        pool = mha_pool(torch.bfloat16, pages=2 * 64 + 8, layers=4, heads=4, dim=64)  # 16 KiB pages
        b = attach(config(self.node.addr), pool)
        try:
            n = 64
            src = pool.alloc(2 * n * 4)
            fill(pool, src, 9)
            keys = hashes(800_000, 2 * n)
            self.assertEqual(b.batch_set_v1(keys[:n], src[:n * 4], HiCacheStorageExtraInfo(prefix_keys=[])), [True] * n)
            size = b._ensure().page_bytes
            tracemalloc.start()
            try:
                ok = b.batch_set_v1(keys[n:], src[n * 4:], HiCacheStorageExtraInfo(prefix_keys=keys[:n]))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            self.assertEqual(ok, [True] * n)
            self.assertLess(peak, n * size // 4, f"peak {peak} bytes for {n} pages of {size}")
        finally:
            b.close()

    def test_unreachable_is_misses_and_counted(self):
        pool = mha_pool(torch.bfloat16)
        t0 = time.monotonic()
        b = attach(config(dead_addr()), pool)  # must not raise
        try:
            keys = hashes(1, 3)
            idx = pool.alloc(12)
            self.assertEqual(b.batch_exists(keys), 0)
            self.assertFalse(b.exists(keys[0]))
            self.assertEqual(b.batch_get_v1(keys, idx), [False] * 3)
            self.assertEqual(b.batch_set_v1(keys, idx), [False] * 3)
            self.assertEqual(b.batch_get(keys, [pool.get_dummy_flat_data_page()] * 3), [None] * 3)
            self.assertFalse(b.batch_set(keys, [pool.get_data_page(idx[0])] * 3))
            self.assertFalse(b.clear())
            r = b.batch_exists_v2(keys, [PoolTransfer(name="kv", keys=keys)])
            self.assertEqual(r.kv_hit_pages, 0)
            c = b.counters()
            self.assertGreaterEqual(c["failures"], 6)
            self.assertEqual(c["get_misses"], 6)
            self.assertEqual(c["set_failed"], 6)
            self.assertIsNotNone(b.get_stats())
            self.assertLess(time.monotonic() - t0, 20)
        finally:
            b.close()

    def test_node_killed_mid_batch(self):
        # 128 pages of 2 MiB; the node is SIGKILLed while batch_set_v1 sends
        # them: pages after the kill are failed writes, later calls misses.
        node = Node(host_bytes="512MiB")
        pool = mha_pool(torch.bfloat16, pages=131, layers=8, heads=8, dim=128, page_size=64)
        b = attach(config(node.addr), pool)
        try:
            keys = get_storage_hash_str(list(range(130 * 64)), None, page_size=64)
            src = pool.alloc(128 * 64)
            fill(pool, src, 4)
            self.assertEqual(b.batch_set_v1(keys[128:129], pool.alloc(64), HiCacheStorageExtraInfo(prefix_keys=[])), [True])
            out, errs = [], []

            def run():
                try:
                    out.append(b.batch_set_v1(keys[:128], src, HiCacheStorageExtraInfo(prefix_keys=[])))
                except BaseException as e:  # the test fails on any exception
                    errs.append(e)

            th = threading.Thread(target=run)
            th.start()
            time.sleep(0.05)
            node.kill()
            th.join(60)
            self.assertFalse(th.is_alive())
            self.assertEqual(errs, [])
            self.assertEqual(len(out[0]), 128)
            self.assertTrue(all(isinstance(x, bool) for x in out[0]))
            self.assertFalse(all(out[0]), "the batch ended before the node was killed")
            dst = pool.alloc(2 * 64)
            self.assertEqual(b.batch_get_v1(keys[:2], dst), [False, False])
            self.assertEqual(b.batch_exists(keys[:2]), 0)
            self.assertEqual(b.batch_set_v1(keys[:2], dst), [False, False])
            self.assertIsNotNone(b.get_stats())
        finally:
            b.close()
            node.kill()

    def test_bad_config_is_loud(self):
        # A misconfigured backend fails SGLang's attach (at start-up), not later.
        with self.assertRaises(ValueError):
            StorageBackendFactory.create_backend("dynamic", config(""), None)


def write_generic(b, pool, keys, src):
    """The controller's generic page set: get_data_page -> batch_set."""
    return b.batch_set(keys, [pool.get_data_page(int(src[i * pool.page_size])) for i in range(len(keys))])


def read_generic(b, pool, keys, dst):
    """The controller's generic page get: dummy pages -> batch_get ->
    set_from_flat_data_page; the pages read, in order."""
    out = b.batch_get(keys, [pool.get_dummy_flat_data_page() for _ in keys])
    n = 0
    for i, t in enumerate(out):
        if t is None:
            break
        pool.set_from_flat_data_page(int(dst[i * pool.page_size]), t)
        n += 1
    return n


def read_v1(b, pool, keys, dst):
    ok = b.batch_get_v1(keys, dst)
    return ok.index(False) if False in ok else len(ok)


class SGLangPageFormatTest(NodeTest):
    """Identity from the bytes: every layout SGLang's MHA and MLA host
    pools take, written through one path (interface_v1 or generic) and read
    through the other, on pools built by the engine's own constructors."""

    @classmethod
    def setUpClass(cls):
        load_sglang()
        hashes(0, 1)
        super().setUpClass()

    def test_fp8_e4m3_and_e5m2_get_their_own_namespaces(self):
        # SGLang stores both as uint8 (KVCache.store_dtype): the format
        # comes from --kv-cache-dtype in the runtime context.
        got = {}
        keys = hashes(610_000, 2)
        for arg, dt in (("fp8_e4m3", torch.float8_e4m3fn), ("fp8_e5m2", torch.float8_e5m2)):
            publish_kv_cache_dtype(arg)
            pool = mha_pool(dt)
            self.assertEqual(pool.dtype, torch.uint8)
            b = attach(config(self.node.addr, strata_model_revision="fp8"), pool)
            try:
                d = b.descriptor()
                self.assertTrue(d.page_format.endswith(":" + arg), d.page_format)
                self.assertEqual(d.kv_dtype, arg)
                if got:  # e5m2 after e4m3 wrote: nothing of e4m3's is a hit
                    self.assertEqual(b.batch_exists(keys), 0)
                else:
                    src = pool.alloc(8)
                    fill(pool, src, 1)
                    self.assertEqual(backup(b, pool, keys, src, []), [True, True])
                    self.assertEqual(b.batch_exists(keys), 2)
                got[arg] = b._ensure().id
            finally:
                b.close()
        self.assertNotEqual(got["fp8_e4m3"], got["fp8_e5m2"])

    def test_uint8_pool_without_runtime_context_refuses(self):
        from sglang.srt import runtime_context

        pool = mha_pool(torch.float8_e4m3fn)
        saved = runtime_context._CONTEXT
        try:  # a process whose scheduler has not published its arguments
            runtime_context._CONTEXT = runtime_context.RuntimeContext(parallel=runtime_context._PARALLEL)
            with self.assertRaises(UnservableConfiguration) as cm:
                attach(config(self.node.addr), pool)
        finally:
            runtime_context._CONTEXT = saved
        self.assertIn("fp8_e4m3 from fp8_e5m2", str(cm.exception))

    def test_every_layout_both_paths(self):
        publish_kv_cache_dtype("auto")
        cases = [("mha", "layer_first"), ("mha", "page_first"), ("mha", "page_first_direct"), ("mha", "page_head"),
                 ("mla", "layer_first"), ("mla", "page_first"), ("mla", "page_first_direct")]
        want_shared = {("mha", "layer_first"): False}
        base = 700_000
        for kind, layout in cases:
            make = (lambda: mha_pool(torch.bfloat16, layers=3, layout=layout)) if kind == "mha" else \
                (lambda: mla_pool(torch.bfloat16, layers=3, layout=layout))
            for wv1 in (True, False):
                base += 10_000
                with self.subTest(kind=kind, layout=layout, write="v1" if wv1 else "generic"):
                    wpool, rpool = make(), make()
                    w = attach(config(self.node.addr, interface_v1=int(wv1)), wpool)
                    r = attach(config(self.node.addr, interface_v1=int(not wv1)), rpool)
                    try:
                        keys = hashes(base, 3)
                        src = wpool.alloc(12)
                        fill(wpool, src, base)
                        want = [page_bytes(wpool, src[i * 4:(i + 1) * 4]) for i in range(3)]
                        wrote = backup(w, wpool, keys, src, []) if wv1 else [write_generic(w, wpool, keys, src)] * 3
                        self.assertEqual(wrote, [True] * 3)
                        shared = w.descriptor().page_format == r.descriptor().page_format
                        self.assertEqual(shared, w._ensure().id == r._ensure().id)
                        self.assertEqual(shared, want_shared.get((kind, layout), True),
                                         (w.descriptor().page_format, r.descriptor().page_format))
                        dst = rpool.alloc(12)
                        n = read_generic(r, rpool, keys, dst) if wv1 else read_v1(r, rpool, keys, dst)
                        if not shared:
                            self.assertEqual(n, 0, "another byte order's pages were read as this one's")
                            continue
                        self.assertEqual(n, 3)
                        for i in range(3):
                            self.assertEqual(page_bytes(rpool, dst[i * 4:(i + 1) * 4]), want[i])
                    finally:
                        w.close()
                        r.close()

    def test_layer_first_formats_say_the_byte_order(self):
        publish_kv_cache_dtype("auto")
        pool = mha_pool(torch.bfloat16, layers=3, heads=2, dim=8, layout="layer_first")
        v1 = attach(config(self.node.addr, interface_v1=1), pool)
        gen = attach(config(self.node.addr, interface_v1=0), pool)
        try:
            self.assertEqual(v1.descriptor().page_format, "kv:L3.S2.T4.H2.D8:bf16")
            self.assertEqual(gen.descriptor().page_format, "kv:S2.L3.T4.H2.D8:bf16")
        finally:
            v1.close()
            gen.close()

    def test_mxfp8_pool_refuses_at_attach(self):
        # SGLang's MXFP8 host pool keeps a page's UE8M0 scales outside
        # kv_buffer and raises from get_page_buffer_meta/get_data_page. Its
        # own constructor needs CUDA's staged write-back kernel, so on the
        # CPU it is initialised through its base class's constructor over
        # the MXFP8 device pool's buffer info (the class's methods are the
        # engine's).
        # (--kv-cache-dtype mxfp8 itself needs an SM100 GPU to publish.)
        publish_kv_cache_dtype("fp8_e4m3")
        dev = MHATokenToKVPoolMXFP8(size=512, page_size=128, dtype=torch.float8_e4m3fn, head_num=2, head_dim=32,
                                    layer_num=2, device="cpu", enable_memory_saver=False)
        info = dev.get_device_pool_infos()[0].buffer_info
        pool = MHATokenToKVPoolMXFP8Host.__new__(MHATokenToKVPoolMXFP8Host)
        # What its constructor sets before calling the base's (mha_mxfp8.py).
        pool.k_sf_page_bytes = info.scales.k[0][0].numel()
        pool.v_sf_page_bytes = info.scales.v[0][0].numel()
        pool.k_scale_host = pool.v_scale_host = None
        MHATokenToKVPoolHost.__init__(pool, info, host_to_device_ratio=1.0, host_size=0, page_size=128,
                                      layout="page_first", pin_memory=False, device="cpu",
                                      device_capacity_tokens=512, start_layer=0, end_layer=2)
        for v1 in (1, 0):
            with self.subTest(interface_v1=v1):
                with self.assertRaises(UnservableConfiguration) as cm:
                    attach(config(self.node.addr, interface_v1=v1), pool)
                msg = str(cm.exception)
                self.assertIn("MHATokenToKVPoolMXFP8Host", msg)
                self.assertIn("does not expose flat storage (L3) pages", msg)  # the engine's reason

    def test_declared_page_bytes_must_be_the_pools(self):
        publish_kv_cache_dtype("auto")
        pool = mha_pool(torch.bfloat16)  # 2 x 2 layers x 4 tokens x 2 heads x 8 x 2 bytes = 512
        with self.assertRaises(UnservableConfiguration) as cm:
            attach(config(self.node.addr, strata_page_bytes=1024), pool)
        self.assertIn("is 512 bytes", str(cm.exception))
        b = attach(config(self.node.addr, strata_page_bytes=512), pool)
        b.close()

    def test_mla_dcp_ranks_do_not_share(self):
        # Decode context parallelism gives each DCP rank its own slice of an
        # MLA page's tokens: ranks 0 and 1 (TP dropped for MLA) must not
        # share a namespace; DCP rank 0 of another DCP group does.
        publish_kv_cache_dtype("auto")
        ids = {}
        for tp_rank in (0, 1, 2):
            sc = config(self.node.addr, mla=True, tp_rank=tp_rank, tp_size=4)
            sc = HiCacheStorageConfig(**dict(sc.__dict__, dcp_size=2, dcp_rank=tp_rank % 2, logical_page_size=8))
            b = attach(sc, mla_pool(torch.bfloat16))
            try:
                ids[tp_rank] = b._ensure().id
            finally:
                b.close()
        self.assertNotEqual(ids[0], ids[1])
        self.assertEqual(ids[0], ids[2])

    def test_generic_path_warning_names_interface_v1(self):
        publish_kv_cache_dtype("auto")
        pool = mha_pool(torch.bfloat16)
        b = attach(config(self.node.addr, interface_v1=0), pool)
        try:
            src = pool.alloc(8)
            fill(pool, src, 5)
            with self.assertLogs("strata_client.sglang", "WARNING") as logs:
                self.assertTrue(write_generic(b, pool, hashes(640_000, 2), src))
            out = "\n".join(logs.output)
            self.assertIn("interface_v1", out)
            self.assertNotIn("set \"hicache_storage_pass_prefix_keys\": true", out)
        finally:
            b.close()


if __name__ == "__main__":
    unittest.main()
