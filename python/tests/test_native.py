"""The native plane (strata_client.native: the Go client as a shared
library, one call per batch) against a real node: gets and puts straight
into and out of caller buffers (numpy arrays, bytearrays, CPU torch tensors,
pages in pieces), leases (taken here, and exported to another client),
bad input refused before anything is sent, and a client that crossed a
fork (it fails clearly; a client made in the child works on the Python
planes) or a spawn (the child has the native plane)."""

import multiprocessing as mp
import os
import unittest

from _support import Node, OneNodeTest, small_descriptor
from strata_client import Client, Page, ScatterBuffer
from strata_client import errors as E
from strata_client import native


def _pages(ns, n, seed):
    keys = ns.page_keys(list(range(seed, seed + 16 * n)))
    return keys, [os.urandom(ns.page_bytes) for _ in keys]


class NativeNodeTest(OneNodeTest):
    def test_native_plane_serves_batches(self):
        import numpy as np

        c, ns = self.client, self.ns
        self.assertTrue(c.native_active, native.native_status())
        keys, data = _pages(ns, 6, 100)
        before = dict(c.stats)
        res = ns.put([Page(key=k, data=np.frombuffer(d, dtype=np.uint8)) for k, d in zip(keys, data)])
        self.assertEqual([r.status for r in res], ["COMMITTED"] * 6)
        self.assertEqual([r.status for r in ns.put([(keys[0], data[0])])], ["EXISTS"])
        bufs = [np.zeros(ns.page_bytes, dtype=np.uint8), bytearray(ns.page_bytes), memoryview(bytearray(ns.page_bytes)),
                np.zeros(ns.page_bytes // 2, dtype=np.uint16), bytearray(ns.page_bytes + 7), bytearray(ns.page_bytes)]
        missing = ns.page_keys(list(range(900, 916)))[0]
        out = ns.get(keys + [missing], bufs + [bytearray(ns.page_bytes)])
        self.assertIsNone(out[-1])
        for i, (b, d) in enumerate(zip(bufs, data)):
            self.assertIs(out[i], b)
            self.assertEqual(bytes(memoryview(b).cast("B"))[:ns.page_bytes], d, f"page {i}")
        self.assertEqual(c.stats["native_gets"] - before["native_gets"], 1)
        self.assertEqual(c.stats["native_puts"] - before["native_puts"], 2)
        self.assertEqual(c.stats["raw_reads"], before["raw_reads"], "a native get went through the Python planes")
        st = c.native_stats()
        self.assertTrue(st["shm_active"], st)  # the node is on this host: shared memory

    def test_lookups_without_a_lease(self):
        ns, c = self.ns, self.client
        keys, data = _pages(ns, 5, 1700)
        ns.put_chain(keys[:3], data[:3])
        ns.put([(keys[4], data[4])])
        before = dict(c.stats)
        hit, present, lease = ns.lookup(keys)
        self.assertEqual((hit, present, lease), (3, [True, True, True, False, True], None))
        self.assertEqual(c.stats["native_lookups"] - before["native_lookups"], 1)
        with Client(self.node.addr, refresh_interval=0, native=False) as py:
            self.assertEqual(tuple(py.open(small_descriptor()).lookup(keys)), (hit, present, None))
        # A lease is the Python client's (other processes adopt it).
        hit, _, lease = ns.lookup(keys, lease=True)
        self.assertEqual(hit, 3)
        self.assertIsNotNone(lease)
        lease.release()
        self.assertEqual(c.stats["native_lookups"] - before["native_lookups"], 1)

    def test_put_skipping_present_pages(self):
        """skip_present: the present pages come back EXISTS and only the
        missing ones are published, in one native call (no lookup call of
        its own); the Python planes do the same with a lookup first."""
        ns, c = self.ns, self.client
        keys, data = _pages(ns, 4, 2300)
        ns.put([(keys[1], data[1]), (keys[3], data[3])])
        before = dict(c.stats)
        res = ns.put(list(zip(keys, data)), skip_present=True)
        self.assertEqual([r.status for r in res], ["COMMITTED", "EXISTS", "COMMITTED", "EXISTS"])
        self.assertEqual(c.stats["native_puts"] - before["native_puts"], 1)
        self.assertEqual(c.stats["native_lookups"] - before["native_lookups"], 0)
        self.assertEqual(ns.lookup(keys).present, [True] * 4)
        with Client(self.node.addr, refresh_interval=0, native=False) as py:
            pns = py.open(small_descriptor())
            more, more_data = _pages(ns, 2, 2400)
            res = pns.put([(keys[0], data[0]), (more[0], more_data[0]), (more[1], more_data[1])], skip_present=True)
            self.assertEqual([r.status for r in res], ["EXISTS", "COMMITTED", "COMMITTED"])
            out = ns.get(more, [bytearray(ns.page_bytes) for _ in more])
            self.assertEqual([bytes(b) for b in out], more_data)

    def test_torch_tensors_of_the_engines_dtypes(self):
        try:
            import torch
        except ImportError as e:  # pragma: no cover - the test venv has torch
            self.skipTest(f"torch: {e}")
        ns = self.ns
        keys, _ = _pages(ns, 2, 300)
        src = [torch.randn(ns.page_bytes // 2).to(torch.bfloat16), torch.randn(ns.page_bytes).to(torch.float8_e4m3fn)]
        self.assertEqual([r.status for r in ns.put([Page(key=k, data=t) for k, t in zip(keys, src)])], ["COMMITTED"] * 2)
        dst = [torch.zeros_like(t) for t in src]
        self.assertEqual([o is not None for o in ns.get(keys, dst)], [True, True])
        for a, b in zip(src, dst):
            self.assertTrue(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))

    def test_pages_in_pieces(self):
        # A page made of a K and a V segment (an engine's page_first host
        # pool): put gathers them, get scatters into them.
        import numpy as np

        ns = self.ns
        keys, data = _pages(ns, 5, 500)
        half = ns.page_bytes // 2
        src = [ScatterBuffer([np.frombuffer(d[:half], dtype=np.uint8).copy(), bytearray(d[half:])]) for d in data]
        self.assertEqual([r.status for r in ns.put([Page(key=k, data=s) for k, s in zip(keys, src)])],
                         ["COMMITTED"] * 5)
        dst = [ScatterBuffer([bytearray(100), bytearray(half - 100), bytearray(half)]) for _ in keys]
        out = ns.get(keys, dst)
        for i, (o, d) in enumerate(zip(out, data)):
            self.assertIs(o, dst[i])
            self.assertEqual(b"".join(bytes(s) for s in dst[i].segments), d, f"page {i}")
        # The same pages read whole by the Python planes.
        with Client(self.node.addr, refresh_interval=0, native=False) as py:
            pns = py.open(small_descriptor())
            self.assertEqual([bytes(b) for b in pns.get(keys)], data)

    def test_leases_taken_and_adopted(self):
        ns = self.ns
        keys, data = _pages(ns, 4, 700)
        ns.put_chain(keys, data)
        hit, present, lease = ns.lookup(keys, lease=True)
        self.assertEqual(hit, 4)
        with lease:
            self.assertEqual([bytes(b) for b in ns.get(keys, lease=lease)], data)
            # Another process's client reads under the exported lease.
            with Client(self.node.addr, refresh_interval=0) as other:
                self.assertTrue(other.native_active)
                ons = other.open(small_descriptor())
                got = ons.get(keys, lease=ons.adopt_lease(lease.export()))
                self.assertEqual([bytes(b) for b in got], data)

    def test_bad_input_is_refused_before_anything_is_sent(self):
        ns = self.ns
        keys, data = _pages(ns, 2, 1100)
        with self.assertRaises(E.InvalidArgumentError):
            ns.put([(keys[0], data[0][:-1])])  # a byte short
        with self.assertRaises(E.InvalidArgumentError):
            ns.put([(keys[0], data[0]), (keys[1], data[1] + b"x")])
        self.assertEqual(ns.lookup(keys).present, [False, False], "a refused batch stored nothing")
        ns.put_chain(keys, data)
        with self.assertRaises(E.InvalidArgumentError):
            ns.get(keys, [bytearray(ns.page_bytes), bytearray(ns.page_bytes - 1)])
        with self.assertRaises(E.InvalidArgumentError):
            ns.get(keys, [bytearray(ns.page_bytes), bytes(ns.page_bytes)])  # read-only
        with self.assertRaises(E.InvalidArgumentError):
            ns.get(keys, [bytearray(ns.page_bytes)])  # one buffer for two keys
        import numpy as np

        strided = np.zeros(2 * ns.page_bytes, dtype=np.uint8)[::2]  # a view that is not contiguous
        with self.assertRaises(E.InvalidArgumentError):
            ns.get(keys, [bytearray(ns.page_bytes), strided])
        self.assertFalse(strided.any(), "a refused destination was written")
        try:
            import torch
        except ImportError:  # pragma: no cover - the test venv has torch
            return
        t = torch.zeros(ns.page_bytes, 2, dtype=torch.uint8)[:, 0]  # not contiguous
        with self.assertRaises(E.InvalidArgumentError):
            ns.get(keys, [bytearray(ns.page_bytes), t])
        # As page data a strided tensor is fine: copied to put.
        src = torch.from_numpy(np.frombuffer(data[0], dtype=np.uint8).copy())
        wide = torch.zeros(ns.page_bytes, 2, dtype=torch.uint8)
        wide[:, 0] = src
        k2 = ns.page_keys(list(range(1190, 1206)))
        self.assertEqual([r.status for r in ns.put([(k2[0], wide[:, 0])])], ["COMMITTED"])
        self.assertEqual(bytes(ns.get(k2)[0]), data[0])

    def test_closed_client(self):
        c = Client(self.node.addr, refresh_interval=0)
        ns = c.open(small_descriptor())
        keys, data = _pages(ns, 1, 1300)
        ns.put_chain(keys, data)
        c.close()
        with self.assertRaises(E.StrataError):
            ns.get(keys)


def _child_forked(addr, key, want, inherited, q):
    """In a child forked after its parent made a client: the parent's
    client must fail clearly, and so must a new one (gRPC does not survive
    fork): ForkedClientError, at once, never a hang."""
    out = {}
    for what, call in (("inherited", lambda: inherited.get([key])), ("new", lambda: Client(addr, refresh_interval=0))):
        try:
            call()
            out[what] = "no error"
        except E.ForkedClientError as e:
            out[what] = "ForkedClientError: " + str(e)[:80]
        except Exception as e:  # pragma: no cover - the failure this test is for
            out[what] = f"{type(e).__name__}: {e}"
    q.put(out)


def _fork_fresh(addr, key_hex, want_hex):
    """Run as a script (a process with no client yet), as vLLM's executor
    is when it forks its workers: a child forked now makes its client and
    has the native plane of its own. Prints the child's answer as JSON."""
    import json

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_spawned, args=(addr, bytes.fromhex(key_hex), bytes.fromhex(want_hex), q))
    p.start()
    out = q.get(timeout=120)
    p.join(30)
    out["exitcode"] = p.exitcode
    print(json.dumps(out))


def _child_spawned(addr, key, want, q):
    with Client(addr, refresh_interval=0) as c:
        got = c.open(small_descriptor()).get([key])[0]
        q.put({"native_active": c.native_active, "status": native.native_status(),
               "equal": got is not None and bytes(got) == want, "shm": c.native_stats().get("shm_active")})


class ForkSpawnTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.node = Node()
        cls.client = Client(cls.node.addr, refresh_interval=0)
        cls.ns = cls.client.open(small_descriptor())
        cls.keys, cls.data = _pages(cls.ns, 1, 1500)
        cls.ns.put_chain(cls.keys, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.node.stop()

    def _run(self, method, target, *args):
        ctx = mp.get_context(method)
        q = ctx.Queue()
        p = ctx.Process(target=target, args=args + (q,))
        p.start()
        try:
            out = q.get(timeout=120)
        finally:
            p.join(30)
            if p.is_alive():  # pragma: no cover - the hang this test is for
                p.kill()
                p.join()
                self.fail(f"the {method} child hung")
        self.assertEqual(p.exitcode, 0)
        return out

    def test_child_forked_after_a_client_fails_clearly(self):
        self.assertTrue(self.client.native_active)
        out = self._run("fork", _child_forked, self.node.addr, self.keys[0], self.data[0], self.ns)
        self.assertTrue(out["inherited"].startswith("ForkedClientError"), out)
        self.assertTrue(out["new"].startswith("ForkedClientError"), out)
        # The parent's client is untouched by the child.
        self.assertEqual(bytes(self.ns.get(self.keys)[0]), self.data[0])

    def test_child_forked_before_any_client_works(self):
        import json
        import subprocess
        import sys

        p = subprocess.run([sys.executable, os.path.abspath(__file__), "fork-fresh", self.node.addr, self.keys[0].hex(),
                            self.data[0].hex()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace")[-3000:])
        out = json.loads(p.stdout.decode().strip().splitlines()[-1])
        self.assertEqual(out["exitcode"], 0, out)
        self.assertTrue(out["native_active"], out)
        self.assertTrue(out["equal"], out)

    def test_spawned_child_has_the_native_plane(self):
        out = self._run("spawn", _child_spawned, self.node.addr, self.keys[0], self.data[0])
        self.assertTrue(out["native_active"], out)
        self.assertTrue(out["equal"], out)
        self.assertTrue(out["shm"], out)


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "fork-fresh":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        _fork_fresh(*sys.argv[2:5])
    else:
        unittest.main()
