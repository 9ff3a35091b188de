"""strata's vLLM connector against the installed vLLM wheel and real nodes.

The connector is built by vLLM's own ``KVConnectorFactory`` from a real
``VllmConfig`` / ``KVTransferConfig`` (``kv_connector_module_path``), both
roles, with a real ``KVCacheConfig`` (``FullAttentionSpec``), KV caches made
by vLLM's ``create_kv_cache_views`` for a resolved ``KVCacheLayout``, real
``Request`` objects hashed by vLLM's block hasher (``sha256``, NONE_HASH
from vLLM's ``init_none_hash``), real ``KVCacheBlock``/``KVCacheBlocks`` and
``SchedulerOutput``/``NewRequestData``. What vLLM's own engine loop would do
between those calls (schedule, run the model) is done by the test: no model
runs on a CPU-only machine.

A second process (this file run as a script, ``peer``) builds its own
connectors through the factory, looks the prompt up and loads it into its
own caches laid out differently (block-outermost), and prints the bytes'
digests.

Skipped, saying why, when vLLM or torch is not installed, unless
STRATA_REQUIRE_ENGINES=1 (CI), where that is a failure
(``_support.require_engine``, which also fails on a stand-in).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The tests' caches are CPU tensors: vLLM's CPU platform (its documented
# switch; without it a machine with no GPU has no device type to infer).
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import _support  # noqa: E402

BLOCK = 16
LAYERS = 2
HEADS = 2
HEAD = 32
NUM_BLOCKS = 24


def _require_vllm():
    _support.require_engine("torch")
    _support.require_engine("vllm.distributed.kv_transfer.kv_connector.factory")


# ---- vLLM objects ------------------------------------------------------------


def vllm_config(addr, cache_dtype="auto", role="kv_both", **extra):
    from vllm.config import CacheConfig, KVTransferConfig, ParallelConfig, SchedulerConfig, VllmConfig

    ex = {"strata_addr": addr, "strata_tenant": "acme", "strata_model": "xlang/vllm-test", "strata_model_revision": "r1",
          "strata_node_timeout": 2.0, "strata_lookup_timeout": 3.0, "strata_connect_retry": 0.2}
    ex.update(extra)
    ktc = KVTransferConfig(kv_connector="StrataConnector", kv_connector_module_path="strata_client.vllm",
                           kv_role=role, kv_load_failure_policy="recompute", kv_connector_extra_config=ex)
    return VllmConfig(cache_config=CacheConfig(block_size=BLOCK, cache_dtype=cache_dtype), parallel_config=ParallelConfig(),
                      scheduler_config=SchedulerConfig(disable_hybrid_kv_cache_manager=True, max_model_len=4096,
                                                       is_encoder_decoder=False),
                      kv_transfer_config=ktc)


def kv_cache_config(cache_dtype="auto", mla=False):
    """The KVCacheConfig vLLM gives the connector; the spec's dtype is what
    vLLM's get_kv_cache_torch_dtype makes of cache_dtype (uint8 for every
    fp8 format)."""
    import torch
    from vllm.utils.torch_utils import get_kv_cache_torch_dtype
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor,
                                            MLAAttentionSpec)

    dtype = get_kv_cache_torch_dtype(cache_dtype, torch.bfloat16)
    if mla:
        spec = MLAAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=HEAD * 2, dtype=dtype,
                                cache_dtype_str=cache_dtype)
    else:
        spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD, dtype=dtype)
    names = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]
    page = spec.page_size_bytes
    t = KVCacheTensor(size=page * NUM_BLOCKS * LAYERS, layers=names, layer_stride=page * NUM_BLOCKS, block_stride=page)
    return KVCacheConfig(num_blocks=NUM_BLOCKS, kv_cache_tensors=[t], kv_cache_groups=[KVCacheGroupSpec(names, spec)])


def kv_caches(kvc, layout_name="LBHNC", fill=None, kernel_block_size=None):
    """vLLM's own per-layer [B, H, N, C] views over one int8 buffer (with
    a kernel block size: [B*r, H, N/r, C], as prepare_kernel_block_sizes
    makes them for a backend that needs smaller blocks)."""
    import torch
    from vllm.v1.kv_cache_interface import KVCacheTensor, create_kv_cache_views
    from vllm.v1.kv_cache_layout import KVCacheLayout

    layout = KVCacheLayout[layout_name]
    g = kvc.kv_cache_groups[0]
    spec = g.kv_cache_spec
    page = spec.page_size_bytes
    if layout.is_block_outermost:
        t = KVCacheTensor(size=page * NUM_BLOCKS * LAYERS, layers=list(g.layer_names), layer_stride=page,
                          block_stride=page * LAYERS)
    else:
        t = kvc.kv_cache_tensors[0]
    raw = torch.zeros(t.size, dtype=torch.int8)
    if fill is not None:
        gen = torch.Generator().manual_seed(fill)
        raw.copy_(torch.randint(-128, 128, (t.size,), dtype=torch.int8, generator=gen))
    views = create_kv_cache_views(raw, spec, NUM_BLOCKS, layout, t, kernel_block_size=kernel_block_size)
    return dict(zip(g.layer_names, views)), raw


def block_digest(caches, names, b):
    """SHA-256 of block b of every layer in logical [H, N, C] order (its
    kernel blocks joined along N when the views are split)."""
    h = hashlib.sha256()
    for n in names:
        v = caches[n]
        r = v.shape[0] // NUM_BLOCKS
        blk = v[b] if r == 1 else v[b * r:(b + 1) * r].permute(1, 0, 2, 3).reshape(v.shape[1], -1, v.shape[3])
        h.update(blk.contiguous().view(-1).view(__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()


def make_request(rid, tokens):
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    fn = get_hash_fn_by_name("sha256")
    init_none_hash(fn)
    return Request(rid, list(tokens), SamplingParams(max_tokens=4), None,
                   block_hasher=get_request_block_hasher(BLOCK, fn))


def blocks_of(ids):
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.kv_cache_utils import KVCacheBlock

    return KVCacheBlocks((([KVCacheBlock(i) for i in ids]),))


def sched_output(new=(), num_scheduled=None, finished=()):
    from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput

    so = SchedulerOutput.make_empty()
    so.scheduled_new_reqs = [NewRequestData.from_request(r, (list(ids),)) for r, ids in new]
    so.scheduled_cached_reqs = CachedRequestData.make_empty()
    so.num_scheduled_tokens = dict(num_scheduled or {})
    so.total_num_scheduled_tokens = sum(so.num_scheduled_tokens.values())
    so.finished_req_ids = set(finished)
    return so


def connectors(cfg, kvc):
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole

    s = KVConnectorFactory.create_connector(cfg, KVConnectorRole.SCHEDULER, kvc)
    w = KVConnectorFactory.create_connector(cfg, KVConnectorRole.WORKER, kvc)
    return s, w


def wait_for(fn, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def ask(s, req, computed=0, timeout=20.0):
    """get_num_new_matched_tokens until it stops answering None (vLLM asks
    again every step); each call must return at once."""
    out = {}

    def once():
        t0 = time.monotonic()
        n, async_load = s.get_num_new_matched_tokens(req, computed)
        assert time.monotonic() - t0 < 0.25, "get_num_new_matched_tokens blocked"
        if n is None:
            return False
        out["v"] = (n, async_load)
        return True

    wait_for(once, timeout, "a lookup answer")
    return out["v"]


def step(w, meta, finished=()):
    """What vLLM's model runner does with the connector in one step."""
    w.bind_connector_metadata(meta)
    w.handle_preemptions(meta)
    w.start_load_kv(None)
    w.wait_for_save()
    res = w.get_finished(set(finished))
    w.clear_connector_metadata()
    return res


def load_until_reported(w, meta, rid, timeout=20.0):
    """Steps until the worker reports rid's load ended (finished_recving)."""
    got = set()

    def reported():
        _, rcv = step(w, meta)
        meta.loads = []  # a load is in one step's metadata only
        got.update(rcv or ())
        return rid in got

    wait_for(reported, timeout, f"finished_recving of {rid}")


def save_prompt(s, w, rid, tokens, block_ids):
    """A request computed locally (no hit) and its saves, through to
    finished_sending."""
    req = make_request(rid, tokens)
    n, _ = ask(s, req)
    s.update_state_after_alloc(req, blocks_of(block_ids), 0)
    step(w, s.build_connector_meta(sched_output([(req, block_ids)], {rid: len(tokens)})))
    req.num_computed_tokens = len(tokens)
    held, _ = s.request_finished(req, list(block_ids))
    sent = set()
    meta = s.build_connector_meta(sched_output(finished=[rid]))

    def done():
        snd, _ = step(w, meta, finished=[rid] if not sent else [])
        sent.update(snd or ())
        return rid in sent

    if held:
        wait_for(done, 20.0, "finished_sending")
    return n, held


# ---- the peer process ------------------------------------------------------------


def peer_main(addr, tokens_json, layout):
    """Look the prompt up and load it with fresh connectors; print JSON."""
    print(json.dumps(peer_run(addr, tokens_json, layout)))


def _peer_worker(addr, tokens_json, layout, q):
    """peer_run in a worker process vLLM's way started; its answer on q."""
    try:
        q.put(peer_run(addr, tokens_json, layout))
    except BaseException as e:  # the parent fails with it rather than wait
        q.put({"error": f"{type(e).__name__}: {e}"})
        raise


def peer_mp_main(method, addr, tokens_json, layout):
    """A process standing for vLLM's executor: with
    VLLM_WORKER_MULTIPROC_METHOD=method it starts a worker through vLLM's
    own get_mp_context (fork or spawn), as MultiprocExecutor does before
    any connector exists, and the worker builds its connectors and loads
    the prompt. Prints the worker's answer and exit code as JSON."""
    os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = method
    from vllm.utils.system_utils import get_mp_context

    ctx = get_mp_context()
    q = ctx.Queue()
    p = ctx.Process(target=_peer_worker, args=(addr, tokens_json, layout, q))
    p.start()
    out = q.get(timeout=200)
    p.join(30)
    out["exitcode"] = p.exitcode
    out["method"] = ctx.get_start_method()
    print(json.dumps(out))


def peer_run(addr, tokens_json, layout):
    """Look the prompt up and load it with fresh connectors."""
    from strata_client import native

    tokens = json.loads(tokens_json)
    cfg, kvc = vllm_config(addr), kv_cache_config()
    s, w = connectors(cfg, kvc)
    caches, _ = kv_caches(kvc, layout)
    w.register_kv_caches(caches)
    wait_for(lambda: s._sched.link.ready() and w._worker.link.ready(), 20, "the peer to connect")
    req = make_request("peer-1", tokens)
    n, async_load = ask(s, req)
    ids = list(range(NUM_BLOCKS - 1, NUM_BLOCKS - 1 - (len(tokens) + BLOCK - 1) // BLOCK, -1))
    s.update_state_after_alloc(req, blocks_of(ids), n)
    meta = s.build_connector_meta(sched_output([(req, ids)], {req.request_id: 0}))
    load_until_reported(w, meta, "peer-1")
    errors = sorted(w.get_block_ids_with_load_errors())
    names = kvc.kv_cache_groups[0].layer_names
    out = {"n": n, "async": async_load, "errors": errors, "ids": ids,
           "digests": [block_digest(caches, names, b) for b in ids[: n // BLOCK]],
           "module": type(s).__module__, "vllm": __import__("vllm").__file__,
           "worker": w.counters(), "scheduler": s.counters(), "native": native.native_status()}
    s.shutdown()
    w.shutdown()
    return out


# ---- tests -------------------------------------------------------------------------


class VLLMConnectorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        _require_vllm()
        cls.node = _support.Node()

    @classmethod
    def tearDownClass(cls):
        cls.node.stop()

    def setUp(self):
        import torch

        torch.manual_seed(0)
        self.kvc = kv_cache_config()
        self.names = self.kvc.kv_cache_groups[0].layer_names

    def _writer(self, addr=None, **extra):
        s, w = connectors(vllm_config(addr or self.node.addr, **extra), self.kvc)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        caches, _ = kv_caches(self.kvc, "LBHNC", fill=7)
        w.register_kv_caches(caches)
        wait_for(lambda: s._sched.link.ready() and w._worker.link is not None and w._worker.link.ready(), 20,
                 "the connector to connect")
        return s, w, caches

    def test_real_classes_from_the_wheel(self):
        import vllm
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

        s, w, _ = self._writer()
        self.assertIn("site-packages", vllm.__file__, "vLLM must be the installed wheel, not a stand-in")
        self.assertIsInstance(s, KVConnectorBase_V1)
        self.assertEqual(type(s).__module__, "strata_client.vllm")
        self.assertEqual(vllm.__version__.split("+")[0], "0.33.0")

    def test_save_then_lookup_and_load_in_another_process(self):
        s, w, caches = self._writer()
        tokens = list(range(1000, 1000 + 4 * BLOCK + 5))  # 4 full blocks and a partial one
        n, held = save_prompt(s, w, "w-1", tokens, [3, 4, 5, 6, 7])
        self.assertEqual(n, 0)
        self.assertTrue(held, "a request with saves in flight is held until finished_sending")
        self.assertEqual(w.counters()["saved_pages"], 4)
        want = [block_digest(caches, self.names, b) for b in (3, 4, 5, 6)]
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "peer", self.node.addr, json.dumps(tokens),
                            "BLHNC"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240,
                           env=dict(os.environ, PYTHONPATH=_support.PYROOT))
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace")[-3000:])
        out = json.loads(p.stdout.decode().strip().splitlines()[-1])
        self.assertEqual(out["module"], "strata_client.vllm")
        self.assertIn("site-packages", out["vllm"])
        self.assertEqual(out["n"], 4 * BLOCK, out)
        self.assertTrue(out["async"])
        self.assertEqual(out["errors"], [])
        self.assertEqual(out["digests"], want, "loaded bytes differ from the saved blocks")

    def test_worker_started_by_fork_and_by_spawn(self):
        # vLLM's MultiprocExecutor starts its workers with get_mp_context():
        # fork (its default) or spawn. Either way the worker's connector
        # loads the saved prompt byte-exact, on the native plane.
        s, w, caches = self._writer()
        tokens = list(range(3000, 3000 + 3 * BLOCK + 5))  # 3 full blocks and a partial one
        save_prompt(s, w, "w-mp", tokens, [9, 10, 11, 12])
        want = [block_digest(caches, self.names, b) for b in (9, 10, 11)]
        for method in ("fork", "spawn"):
            with self.subTest(method):
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "peer-mp", method, self.node.addr,
                                    json.dumps(tokens), "LBHNC"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=300, env=dict(os.environ, PYTHONPATH=_support.PYROOT))
                self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace")[-3000:])
                out = json.loads(p.stdout.decode().strip().splitlines()[-1])
                self.assertEqual(out.get("method"), method, out)
                self.assertEqual(out.get("exitcode"), 0, out)
                self.assertEqual(out["n"], 3 * BLOCK, out)
                self.assertEqual(out["digests"], want, "loaded bytes differ from the saved blocks")
                self.assertTrue(out["native"].startswith("loaded"), out["native"])
                self.assertGreater(out["worker"]["loaded_pages"], 0, out["worker"])

    def test_kernel_block_split_hits_its_own_saves(self):
        # An attention backend with smaller kernel blocks (16-token blocks
        # as two 8-token kernel blocks): the scheduler and the worker must
        # name the same namespace, and the bytes must not depend on the
        # split, so a split writer and an unsplit reader share pages.
        cfg = vllm_config(self.node.addr, strata_model_revision="kernel-split")
        s, w = connectors(cfg, self.kvc)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        caches, _ = kv_caches(self.kvc, "LBHNC", fill=11, kernel_block_size=BLOCK // 2)
        self.assertEqual(caches[self.names[0]].shape[0], 2 * NUM_BLOCKS)
        w.register_kv_caches(caches)
        wait_for(lambda: s._sched.link.ready() and w._worker.link is not None and w._worker.link.ready(), 20,
                 "the connector to connect")
        self.assertEqual(w._worker.disabled, "")
        self.assertEqual(w._worker._ratio, 2)
        sched = s._sched._descriptors()
        self.assertEqual(list(sched.values())[0].id, w._worker.link._descriptors()[w._worker.shard].id)
        tokens = list(range(9000, 9000 + 3 * BLOCK))
        save_prompt(s, w, "k-1", tokens, [8, 9, 10])
        self.assertEqual(w.counters()["saved_pages"], 3)
        want = [block_digest(caches, self.names, b) for b in (8, 9, 10)]
        req = make_request("k-2", tokens + [1])
        self.assertEqual(ask(s, req), (3 * BLOCK, True))
        self.assertEqual(s.counters()["lookup_errors"], 0)
        # Loaded into unsplit caches by fresh connectors: the same bytes.
        for split in (None, BLOCK // 2):
            with self.subTest(reader_kernel_block=split):
                s2, w2 = connectors(cfg, self.kvc)
                self.addCleanup(s2.shutdown)
                self.addCleanup(w2.shutdown)
                dst, _ = kv_caches(self.kvc, "LBHNC", kernel_block_size=split)
                w2.register_kv_caches(dst)
                wait_for(lambda: s2._sched.link.ready() and w2._worker.link.ready(), 20, "the reader to connect")
                r = make_request(f"k-read-{split}", tokens + [1])
                n, _ = ask(s2, r)
                self.assertEqual(n, 3 * BLOCK)
                ids = [1, 2, 3]
                s2.update_state_after_alloc(r, blocks_of(ids), n)
                meta = s2.build_connector_meta(sched_output([(r, ids)], {r.request_id: 0}))
                load_until_reported(w2, meta, r.request_id)
                self.assertEqual(sorted(w2.get_block_ids_with_load_errors()), [])
                self.assertEqual([block_digest(dst, self.names, b) for b in ids], want)

    def test_scheduler_and_worker_name_one_namespace(self):
        # For every configuration the worker accepts (KV dtypes, MLA,
        # kernel-block splits, physical layouts) the scheduler's namespace
        # is the worker's, and the page format says the numeric format.
        import torch

        ids = {}
        for cache_dtype in ("auto", "fp8", "fp8_e5m2"):
            for mla in (False, True):
                kvc = kv_cache_config(cache_dtype, mla)
                for layout in ("LBHNC", "LBNHC", "BLHNC"):
                    for kb in (None, BLOCK // 2, BLOCK // 4):
                        if kb and layout == "BLHNC":
                            continue  # vLLM never splits block-outermost layouts (create_kv_cache_views refuses)
                        with self.subTest(cache_dtype=cache_dtype, mla=mla, layout=layout, kernel_block=kb):
                            cfg = vllm_config(self.node.addr, cache_dtype=cache_dtype,
                                              strata_model_revision="one-namespace")
                            s, w = connectors(cfg, kvc)
                            try:
                                caches, _ = kv_caches(kvc, layout, kernel_block_size=kb)
                                w.register_kv_caches(caches)
                                self.assertEqual(w._worker.disabled, "")
                                wd = w._worker.link._descriptors()[w._worker.shard]
                                sd = s._sched._descriptors()[w._worker.shard]
                                self.assertEqual(sd.canonical(), wd.canonical())
                                self.assertEqual(w._worker._page_bytes, wd.page_bytes)
                                want = {"auto": "bf16", "fp8": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}[cache_dtype]
                                self.assertTrue(wd.page_format.endswith(":" + want), wd.page_format)
                                ids.setdefault((cache_dtype, mla), set()).add(wd.id)
                            finally:
                                s.shutdown()
                                w.shutdown()
        # one namespace per format, whatever the split or physical layout
        self.assertEqual({k: len(v) for k, v in ids.items()}, {k: 1 for k in ids})
        self.assertEqual(len({next(iter(v)) for v in ids.values()}), len(ids))
        self.assertEqual(torch.uint8, kv_cache_config("fp8").kv_cache_groups[0].kv_cache_spec.dtype)

    def test_repeated_asks_same_answer_and_renewal(self):
        s, w, _ = self._writer(strata_lease_ttl_ms=2000, strata_renew_margin_ms=1900)
        tokens = list(range(5000, 5000 + 3 * BLOCK))
        save_prompt(s, w, "w-2", tokens, [8, 9, 10])
        req = make_request("r-2", tokens + [1])
        first = ask(s, req)
        self.assertEqual(first, (3 * BLOCK, True))
        for _ in range(5):
            self.assertEqual(ask(s, req), first)
        wait_for(lambda: ask(s, req) == first and s.counters()["renewals"] >= 1, 10, "a renewal on a repeated ask")
        self.assertEqual(ask(s, req), first)
        self.assertEqual(s.counters()["renew_failures"], 0)
        self.assertEqual(s.request_finished(req, []), (False, None))

    def test_node_killed_between_lookup_and_load(self):
        node = _support.Node()
        try:
            s, w, caches = self._writer(addr=node.addr)
            tokens = list(range(7000, 7000 + 3 * BLOCK + 1))
            save_prompt(s, w, "w-3", tokens, [0, 1, 2, 11])
            req = make_request("r-3", tokens)
            n, _ = ask(s, req)
            self.assertEqual(n, 3 * BLOCK)
            ids = [12, 13, 14, 15]
            s.update_state_after_alloc(req, blocks_of(ids), n)
            meta = s.build_connector_meta(sched_output([(req, ids)], {"r-3": 0}))
            before = [block_digest(caches, self.names, b) for b in ids[:3]]
            node.kill()
            load_until_reported(w, meta, "r-3", 30)
            self.assertEqual(w.get_block_ids_with_load_errors(), {12, 13, 14})
            self.assertEqual([block_digest(caches, self.names, b) for b in ids[:3]], before)
            # Asking again with the node gone: a miss, at once, no exception.
            t0 = time.monotonic()
            self.assertEqual(ask(s, make_request("r-3b", tokens + [2])), (0, False))
            self.assertLess(time.monotonic() - t0, 15)
        finally:
            node.kill()

    def test_lease_expired_between_lookup_and_load(self):
        s, w, caches = self._writer(strata_lease_ttl_ms=300)
        tokens = list(range(9000, 9000 + 2 * BLOCK + 3))
        save_prompt(s, w, "w-4", tokens, [16, 17, 18])
        req = make_request("r-4", tokens)
        n, _ = ask(s, req)
        self.assertEqual(n, 2 * BLOCK)
        ids = [19, 20, 21]
        s.update_state_after_alloc(req, blocks_of(ids), n)
        meta = s.build_connector_meta(sched_output([(req, ids)], {"r-4": 0}))
        exp = max(e for _, nl in [ld.leases[k] for ld in meta.loads for k in ld.leases] for ls in nl.values()
                  for _, e in ls)
        time.sleep(max(0.0, exp / 1000.0 - time.time()) + 0.3)  # the lease's own expiry, then a margin
        before = [block_digest(caches, self.names, b) for b in ids[:2]]
        load_until_reported(w, meta, "r-4")
        self.assertEqual(w.get_block_ids_with_load_errors(), {19, 20})
        self.assertEqual([block_digest(caches, self.names, b) for b in ids[:2]], before, "no bytes under an expired lease")
        self.assertGreaterEqual(w.counters()["load_failures"], 1)

    def test_unreachable_strata_is_a_miss(self):
        cfg = vllm_config("127.0.0.1:1")
        s, w = connectors(cfg, self.kvc)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        caches, _ = kv_caches(self.kvc)
        w.register_kv_caches(caches)
        req = make_request("r-5", list(range(3 * BLOCK)))
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))
        s.update_state_after_alloc(req, blocks_of([1, 2, 3]), 0)
        meta = s.build_connector_meta(sched_output([(req, [1, 2, 3])], {"r-5": 3 * BLOCK}))
        self.assertEqual(meta.saves, [])
        self.assertEqual(step(w, meta), (None, None))

    def test_bad_config_is_a_clear_error(self):
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
        from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole

        cfg = vllm_config("")
        cfg.kv_transfer_config.kv_connector_extra_config.pop("strata_addr")
        env = os.environ.pop("STRATA_ADDR", None)
        try:
            with self.assertRaisesRegex(ValueError, "strata_addr"):
                KVConnectorFactory.create_connector(cfg, KVConnectorRole.SCHEDULER, self.kvc)
        finally:
            if env is not None:
                os.environ["STRATA_ADDR"] = env


class VLLMHashTest(unittest.TestCase):
    """strata_client's vLLM hash helpers against the installed vLLM."""

    @classmethod
    def setUpClass(cls):
        _require_vllm()

    def test_block_hashes_match_vllm(self):
        from strata_client import descriptor as D

        for algo in ("sha256", "sha256_cbor"):
            req = make_request("h-" + algo, list(range(40, 40 + 3 * BLOCK + 2)))
            if algo != "sha256":
                from vllm.utils.hashing import get_hash_fn_by_name
                from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
                from vllm.v1.request import Request
                from vllm.sampling_params import SamplingParams

                fn = get_hash_fn_by_name(algo)
                init_none_hash(fn)
                req = Request("h", list(range(40, 40 + 3 * BLOCK + 2)), SamplingParams(max_tokens=1), None,
                              block_hasher=get_request_block_hasher(BLOCK, fn))
            seed = os.environ.get("PYTHONHASHSEED", D.VLLM_DEFAULT_NONE_HASH_SEED)
            mine = D.vllm_block_hashes(D.vllm_none_hash(seed, algo), req.all_token_ids, BLOCK, algo)
            self.assertEqual([bytes(h) for h in req.block_hashes], mine, algo)

    def test_none_hash_seed(self):
        from vllm.utils.hashing import sha256_cbor
        from vllm.v1.core import kv_cache_utils as K

        from strata_client import descriptor as D

        self.assertEqual(K.DEFAULT_NONE_HASH_SEED, D.VLLM_DEFAULT_NONE_HASH_SEED)
        env = os.environ.pop("PYTHONHASHSEED", None)
        try:
            K.init_none_hash(sha256_cbor)
            self.assertEqual(bytes(K.NONE_HASH), D.vllm_none_hash(None, "sha256_cbor"))
        finally:
            if env is not None:
                os.environ["PYTHONHASHSEED"] = env


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "peer":
        peer_main(*sys.argv[2:5])
    elif len(sys.argv) > 1 and sys.argv[1] == "peer-mp":
        peer_mp_main(*sys.argv[2:6])
    else:
        unittest.main()
