"""strata as the L2 adapter of LMCache's multi-process daemon, against a
real stratad and the installed lmcache (0.5.6): the daemon's own
StorageManager (L1, StoreController, PrefetchController) built from the
``lmcache server`` storage flags, with strata loaded through the ``plugin``
L2 adapter type. Two StorageManagers stand for two daemons sharing the
cluster: what one stores, the other prefetches."""

import json
import os
import time
import unittest

from _support import Node, NodeTest
import _lmcache_support as S


def setUpModule():
    S.require_lmcache()


def manager(addr, **params):
    """A StorageManager configured as `lmcache server` parses its flags."""
    import uuid

    from lmcache.v1.distributed.config import get_arg_parser, parse_args_to_config
    from lmcache.v1.distributed.storage_manager import StorageManager

    spec = {"type": "plugin", "module_path": "strata_client.lmcache_mp", "class_name": "StrataL2Adapter",
            "adapter_params": dict({"addr": addr, "tenant": "acme", "node_timeout": 1.0, "reconnect_interval": 0.2},
                                   **params)}
    args = get_arg_parser().parse_args(["--l1-size-gb", "0.05", "--eviction-policy", "LRU", "--l2-adapter", json.dumps(spec)])
    args.shm_name = f"strata_test_{uuid.uuid4().hex[:12]}"  # the server's --shm-name: two managers in one process
    return StorageManager(parse_args_to_config(args))


def adapter(sm):
    (_, a), = sm.l2_adapters()
    return a


def wait(cond, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


class _Helpers:
    def setUp(self):
        import torch
        from lmcache.v1.distributed.api import MemoryLayoutDesc

        self.torch = torch
        self.layout = MemoryLayoutDesc([torch.Size([2, S.LAYERS, S.CHUNK, S.HEADS * S.HEAD_DIM])], [torch.bfloat16])

    def mgr(self, addr=None, **params):
        sm = manager(addr or self.node.addr, **params)
        self.addCleanup(sm.close)
        return sm

    def keys(self, base, n, salt="", rank=0):
        from lmcache.v1.distributed.api import ObjectKey

        return [ObjectKey(chunk_hash=(base + i).to_bytes(32, "big"), model_name=S.MODEL, kv_rank=rank, cache_salt=salt)
                for i in range(n)]

    def store(self, sm, keys, seed=0, layout=None):
        """What the daemon does with a store request: reserve L1 objects,
        write them, finish; the StoreController then writes them to L2."""
        objs = sm.reserve_write(keys, layout or self.layout)
        self.assertEqual(len(objs), len(keys))
        want = {}
        for i, k in enumerate(keys):
            g = self.torch.Generator().manual_seed(seed + i)
            t = self.torch.randint(0, 256, objs[k].tensor.shape, generator=g, dtype=self.torch.uint8) \
                if objs[k].tensor.dtype == self.torch.uint8 else \
                self.torch.randn(objs[k].tensor.shape, generator=g).to(objs[k].tensor.dtype)
            objs[k].tensor.copy_(t)
            want[k] = bytes(objs[k].byte_array)
        sm.finish_write(keys)
        return want

    def prefetch(self, sm, keys):
        from lmcache.v1.distributed.api import GroupedObjectKeys, PrefetchTaskSpec

        h = sm.submit_prefetch_task(PrefetchTaskSpec([GroupedObjectKeys(keys, 0, self.layout)]))
        self.assertTrue(sm.wait_prefetch_status(h, 20))
        r = sm.query_prefetch_status(h)
        return r.hit_cells[0].popcount(), r.l2_hit_count


class LMCacheMPTest(_Helpers, NodeTest):
    def test_real_classes(self):
        from lmcache.v1.distributed.storage_manager import StorageManager
        from lmcache.v1.distributed.l2_adapters.base import L2AdapterInterface
        from strata_client import lmcache_mp

        sm = self.mgr()
        a = adapter(sm)
        S.assert_real(self, sm)
        self.assertIsInstance(sm, StorageManager)
        self.assertIsInstance(a, L2AdapterInterface)
        self.assertIs(type(a), lmcache_mp.StrataL2Adapter)
        self.assertIs(type(a.cfg), lmcache_mp.StrataL2AdapterConfig)  # found by LMCache's Config-suffix rule

    def test_bad_params_are_clear_errors(self):
        from strata_client.lmcache_mp import StrataL2AdapterConfig

        for bad, what in (({}, "addr"), ({"addr": "x:1", "workers": 0}, "workers"),
                          ({"addr": "x:1", "nodes": "y"}, "unknown"), ({"addr": "x:1", "node_timeout": -1}, "node_timeout")):
            with self.assertRaisesRegex(ValueError, what):
                StrataL2AdapterConfig.from_dict(bad)

    def test_store_in_one_daemon_prefetch_in_another(self):
        writer, reader = self.mgr(), self.mgr()
        keys = self.keys(0x7000, 6)
        want = self.store(writer, keys[:3] + keys[4:])
        wa = adapter(writer)
        self.assertTrue(wait(lambda: wa.counters()["stored_pages"] == 5), wa.counters())
        hits, l2 = self.prefetch(reader, keys)
        self.assertEqual((hits, l2), (3, 3))  # the prefix before the missing chunk
        with reader.read_prefetched_results(keys[:3]) as objs:
            self.assertIsNotNone(objs)
            self.assertEqual([bytes(o.byte_array) for o in objs], [want[k] for k in keys[:3]])
        reader.finish_read_prefetched(keys[:3])
        ra = adapter(reader)
        c = ra.counters()
        # lookup-and-lock took one lease; the load read under it; the
        # unlock of every locked key released it.
        self.assertEqual((c["leases"], c["locked_keys"], c["loaded_keys"]), (1, 3, 3))
        self.assertTrue(wait(lambda: ra.counters()["leases_released"] == 1), ra.counters())
        self.assertEqual(ra.report_status()["held_leases"], 0)
        self.assertEqual(c["failures"], 0)

    def test_fp8_objects_need_their_format(self):
        # SGLang and vLLM hand the daemon fp8 KV as uint8 objects: without
        # kv_format they are refused (counted, logged), with it e4m3 and
        # e5m2 objects get namespaces of their own.
        from lmcache.v1.distributed.api import MemoryLayoutDesc

        u8 = MemoryLayoutDesc([self.torch.Size([2, S.LAYERS, S.CHUNK, S.HEADS * S.HEAD_DIM])], [self.torch.uint8])
        plain = self.mgr()
        with self.assertLogs("strata_client.lmcache_mp", "ERROR") as logs:
            self.store(plain, self.keys(0x7300, 2), layout=u8)
            pa = adapter(plain)
            self.assertTrue(wait(lambda: pa.counters()["unservable"] >= 1), pa.counters())
        self.assertIn("kv_format", "\n".join(logs.output))
        self.assertEqual(pa.counters()["stored_pages"], 0)
        ids = {}
        for fmt in ("fp8_e4m3", "fp8_e5m2"):
            sm = self.mgr(kv_format=fmt)
            self.store(sm, self.keys(0x7400, 2), layout=u8)
            a = adapter(sm)
            self.assertTrue(wait(lambda: a.counters()["stored_pages"] == 2), a.counters())
            (ns,) = a._ns.values()
            ids[fmt] = ns.id
            self.assertTrue(ns.descriptor.page_format.endswith(":" + fmt), ns.descriptor.page_format)
        self.assertNotEqual(ids["fp8_e4m3"], ids["fp8_e5m2"])

    def test_salted_keys_do_not_alias(self):
        writer, reader = self.mgr(), self.mgr()
        self.store(writer, self.keys(0x7100, 2, salt="alice"))
        wa = adapter(writer)
        self.assertTrue(wait(lambda: wa.counters()["stored_pages"] == 2), wa.counters())
        self.assertEqual(self.prefetch(reader, self.keys(0x7100, 2, salt="bob"))[0], 0)
        self.assertEqual(self.prefetch(reader, self.keys(0x7100, 2, salt="alice"))[0], 2)

    def test_lease_renewed_while_held_and_released_on_unlock(self):
        from lmcache.v1.distributed.api import MemoryLayoutDesc  # noqa: F401

        sm = self.mgr(lease_ttl_ms=1500)
        a = adapter(sm)
        keys = self.keys(0x7200, 2)
        self.store(sm, keys)
        self.assertTrue(wait(lambda: a.counters()["stored_pages"] == 2), a.counters())
        # The prefetch controller's calls, directly: lookup-and-lock ...
        tid = a.submit_lookup_and_lock_task(keys, {0: self.layout})
        self.assertTrue(wait(lambda: a._lookups.get(tid) is not None))
        bm = a.query_lookup_and_lock_result(tid)
        self.assertEqual(bm.popcount(), 2)
        # ... held past its TTL: the renewer keeps it ...
        time.sleep(2.5)
        self.assertGreater(a.counters()["lease_renewals"], 0)
        objs = sm.reserve_write(self.keys(0x7300, 2), self.layout)  # two load buffers
        bufs = [objs[k] for k in self.keys(0x7300, 2)]
        tid = a.submit_load_task(keys, bufs)
        self.assertTrue(wait(lambda: a._loads.get(tid) is not None))
        self.assertEqual(a.query_load_result(tid).popcount(), 2)
        self.assertEqual(a.counters()["lease_expired"], 0)
        # ... and unlocking both keys releases it.
        a.submit_unlock(keys[:1])
        self.assertEqual(a.report_status()["held_leases"], 1)
        a.submit_unlock(keys[1:])
        self.assertTrue(wait(lambda: a.counters()["leases_released"] == 1), a.counters())
        sm.finish_write(self.keys(0x7300, 2))


class LMCacheMPNodeKilledTest(_Helpers, unittest.TestCase):
    """A stratad SIGKILLed while the daemons' prefetches and stores are in
    flight: prefetches finish with misses, stores fail, nothing raises
    into the daemon's controllers."""

    def test_node_killed_mid_batch(self):
        from lmcache.v1.distributed.api import GroupedObjectKeys, PrefetchTaskSpec

        node = Node(host_bytes="256MiB")
        self.addCleanup(node.kill)
        writer, reader = self.mgr(node.addr), self.mgr(node.addr)
        wa, ra = adapter(writer), adapter(reader)
        keys = self.keys(0x9000, 64)
        self.store(writer, keys)
        self.assertTrue(wait(lambda: wa.counters()["stored_pages"] == 64), wa.counters())
        handles = [reader.submit_prefetch_task(PrefetchTaskSpec([GroupedObjectKeys(keys, 0, self.layout)]))
                   for _ in range(4)]
        self.store(writer, self.keys(0xa000, 64), seed=1)
        node.kill()
        self.store(writer, self.keys(0xb000, 64), seed=2)
        for h in handles:  # each finishes, with hits or misses
            self.assertTrue(reader.wait_prefetch_status(h, 30))
            r = reader.query_prefetch_status(h)
            n = r.hit_cells[0].popcount()
            if n:
                with reader.read_prefetched_results(keys[:n]) as objs:
                    self.assertIsNotNone(objs)
                reader.finish_read_prefetched(keys[:n])
        after = self.prefetch(reader, self.keys(0x9000, 64))
        self.assertEqual(after, (0, 0))  # misses
        self.assertTrue(wait(lambda: wa.counters()["store_failed"] > 0, timeout=30), wa.counters())
        self.assertGreater(ra.counters()["load_misses"] + ra.counters()["lookup_keys"] - ra.counters()["locked_keys"], 0)


class LMCacheServerProcessTest(NodeTest):
    """The real daemon: `lmcache server` started as a process (on a CPU
    machine) with strata as its --l2-adapter, as an operator runs it."""

    def test_daemon_loads_strata_and_reports_it(self):
        import signal
        import socket
        import subprocess
        import sys
        import urllib.request

        S.require_lmcache()

        def free_port():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]

        exe = os.path.join(os.path.dirname(sys.executable), "lmcache")
        if not os.access(exe, os.X_OK):
            self.skipTest(f"no lmcache command beside {sys.executable}")
        zmq_port, http_port = free_port(), free_port()
        spec = {"type": "plugin", "module_path": "strata_client.lmcache_mp", "class_name": "StrataL2Adapter",
                "adapter_params": {"addr": self.node.addr, "tenant": "acme"}}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([S._support.PYROOT, os.environ.get("PYTHONPATH", "")]))
        log = open(os.path.join(self.node.dir, "lmcache-server.log"), "wb")
        self.addCleanup(log.close)
        p = subprocess.Popen([exe, "server", "--host", "127.0.0.1", "--port", str(zmq_port), "--http-host", "127.0.0.1",
                              "--http-port", str(http_port), "--l1-size-gb", "0.05", "--eviction-policy", "LRU",
                              "--l2-adapter", json.dumps(spec)], stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)

        def stop():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)

        self.addCleanup(stop)
        status, deadline = None, time.monotonic() + 90
        while status is None and time.monotonic() < deadline and p.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/status", timeout=2) as r:
                    status = json.loads(r.read())
            except OSError:
                time.sleep(0.25)
        if status is None:
            log.flush()
            with open(log.name, "rb") as f:
                tail = f.read()[-3000:].decode(errors="replace")
            self.fail(f"lmcache server gave no /status (exit {p.poll()}):\n{tail}")
        (ad,) = status["storage_manager"]["l2_adapters"]
        self.assertEqual(ad["type"], "StrataL2Adapter")
        self.assertEqual(ad["addr"], self.node.addr)
        self.assertTrue(ad["connected"], ad)
        self.assertTrue(ad["is_healthy"], ad)


if __name__ == "__main__":
    unittest.main()
