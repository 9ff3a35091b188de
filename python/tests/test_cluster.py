"""Two real nodes: routing by weighted rendezvous, fan-out, and a node
killed mid-batch turning into misses (never exceptions) within the
per-node timeout."""

import os
import threading
import time
import unittest

from _support import Node, small_descriptor
from strata_client import Client
from strata_client.placement import View


class TwoNodeTest(unittest.TestCase):
    def setUp(self):
        self.a = Node()
        self.b = Node(etcd=self.a.etcd)
        self.nodes = [self.a, self.b]
        self.client = None
        self.new_client()

    def new_client(self):
        """A client (replacing any earlier one) whose view has both nodes
        alive and which has quarantined nothing yet."""
        if self.client is not None:
            self.client.close()
        self.client = Client(self.a.addr, node_timeout=1.5, quarantine=30.0, refresh_interval=0.5, native=False)
        deadline = time.time() + 20
        while time.time() < deadline:
            self.client.refresh()
            if sum(m.state == "ALIVE" for m in self.client.members()) == 2:
                break
            time.sleep(0.2)
        self.assertEqual(sum(m.state == "ALIVE" for m in self.client.members()), 2, self.client.members())

    def placed(self, ns, keys):
        """on_b (which keys node B owns in the two-node view) when each node
        holds exactly the keys it owns and the client quarantined no node
        while putting them; None otherwise. Under load a put to a node can
        time out after the node stored the page: the client then
        quarantines the node and puts the page on A as well, and every later
        call routes B's keys to A while the quarantine lasts, which is not
        what these tests are about."""
        members = self.client.members()
        if len(members) != 2 or self.client.stats["node_failures"]:
            return None
        view = View([(m.node_id, m.weight) for m in members])
        b_id = next(m.node_id for m in members if m.address == self.b.addr)
        on_b = [view.ids[view.owner(k)] == b_id for k in keys]
        if self.held_by(self.b, ns, keys) != on_b or self.held_by(self.a, ns, keys) != [not b for b in on_b]:
            return None
        return on_b

    def put_placed(self, pages):
        """Puts pages(attempt)'s (ns, keys, data) until they lie where the
        view says (see placed): up to three attempts, each into the fresh
        namespace pages opens, with a fresh client after a miss. Returns
        (ns, keys, data, on_b)."""
        for attempt in range(3):
            ns, keys, data = pages(attempt)
            res = ns.put_chain(keys, data)
            self.assertTrue(all(r.stored for r in res), res)
            on_b = self.placed(ns, keys)
            if on_b is not None:
                return ns, keys, data, on_b
            self.new_client()
        self.fail("three puts in a row did not follow the two-node view")

    def tearDown(self):
        self.client.close()
        for n in reversed(self.nodes):  # a's etcd last
            n.stop()

    def test_routing_and_node_killed_mid_batch(self):
        # Pages of 256 KiB so that a 48-page get takes a little while.
        # As in the hung-node test: put again, into a fresh namespace with a
        # fresh client, until the pages lie as placed.
        def pages(attempt):
            ns = self.client.open(small_descriptor(model=f"cluster/test/{attempt}", num_layers=8, num_kv_heads=4,
                                                   head_dim=128, page_tokens=16))
            self.assertEqual(ns.page_bytes, 2 * 8 * 4 * 128 * 2 * 16)
            keys = ns.page_keys(list(range(16 * 48)))
            return ns, keys, [os.urandom(ns.page_bytes) for _ in keys]

        ns, keys, data, on_b = self.put_placed(pages)
        self.assertTrue(any(on_b) and not all(on_b), "both nodes should own some of 48 keys")

        # Each node holds exactly the keys it owns (placement agrees with the nodes' routing).
        hit, present, _ = ns.lookup(keys)
        self.assertEqual((hit, present), (48, [True] * 48))

        # Kill B while a get of all pages is in flight.
        result, errors = {}, []

        def reader():
            try:
                t0 = time.monotonic()
                result["out"] = ns.get(keys)
                result["elapsed"] = time.monotonic() - t0
            except Exception as e:  # the test fails on any exception
                errors.append(e)

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.005)
        self.b.kill()
        t.join(timeout=30)
        self.assertFalse(t.is_alive())
        self.assertEqual(errors, [])
        self.assertLess(result["elapsed"], 1.5 + 2.0)
        out = result["out"]
        for i, o in enumerate(out):
            if not on_b[i]:
                self.assertIsNotNone(o, f"page {i} on the live node")
                self.assertEqual(bytes(o), data[i])
            elif o is not None:  # streamed before the kill: must be exact
                self.assertEqual(bytes(o), data[i])

        # After the kill: B's keys are misses, never exceptions, and calls
        # are bounded by the node timeout (then B is quarantined).
        t0 = time.monotonic()
        r = ns.lookup(keys)
        self.assertLess(time.monotonic() - t0, 1.5 + 1.0)
        self.assertEqual(r.present, [not b for b in on_b])
        self.assertEqual(r.hit_prefix, on_b.index(True))
        got = ns.get(keys)
        self.assertEqual([g is not None for g in got], [not b for b in on_b])
        self.assertGreaterEqual(self.client.stats["node_failures"], 1)

        # Writes of B's keys spill to their next candidate (A) meanwhile.
        res = ns.put_chain(keys, data)
        self.assertTrue(all(x.stored for x in res), res)
        self.assertEqual(ns.exists(keys), 48)

    def held_by(self, node, ns, keys):
        """Which of keys node's store holds (its admin StatKeys)."""
        import grpc
        from strata_client._proto import strata_pb2 as pb
        from strata_client._proto import strata_pb2_grpc as pbg

        with grpc.insecure_channel(node.addr) as ch:
            info = pbg.AdminStub(ch).StatKeys(pb.StatKeysRequest(namespace_id=ns.id, keys=keys), timeout=5)
        return [bool(k.key) for k in info.keys]

    def test_hung_node_costs_one_node_timeout(self):
        # The pages must lie where the view says (see placed); if they do
        # not, put again, into a fresh namespace, with a fresh client.
        def pages(attempt):
            ns = self.client.open(small_descriptor(model=f"cluster/hung/{attempt}"))
            keys = ns.page_keys(list(range(16 * 32)))
            return ns, keys, [bytes(ns.page_bytes)] * len(keys)

        ns, keys, _, on_b = self.put_placed(pages)
        self.b.pause()  # alive but silent
        try:
            t0 = time.monotonic()
            r = ns.lookup(keys)
            elapsed = time.monotonic() - t0
            self.assertLess(elapsed, 1.5 + 1.0)
            self.assertEqual(r.present, [not b for b in on_b])
            # Quarantined now: the next call does not wait for it again.
            t0 = time.monotonic()
            self.assertEqual([g is not None for g in ns.get(keys)], [not b for b in on_b])
            self.assertLess(time.monotonic() - t0, 0.5)
        finally:
            self.b.resume()

    def test_lookup_marks_orphans(self):
        import grpc
        from strata_client._proto import strata_pb2 as pb
        from strata_client._proto import strata_pb2_grpc as pbg

        ns = self.client.open(small_descriptor(model="cluster/orphans"))
        keys = ns.page_keys(list(range(16 * 12)))
        self.assertTrue(all(r.stored for r in ns.put_chain(keys, [bytes(ns.page_bytes)] * len(keys))))
        gap = 4
        self.assertEqual(ns.delete(keys[gap:gap + 1]), 1)
        self.assertEqual(ns.lookup(keys).hit_prefix, gap)
        members = self.client.members()
        view = View([(m.node_id, m.weight) for m in members])
        by_id = {m.node_id: m.address for m in members}
        chans = {a: grpc.insecure_channel(a) for a in by_id.values()}
        try:
            def orphans():
                out = []
                for k in keys:
                    admin = pbg.AdminStub(chans[by_id[view.ids[view.owner(k)]]])
                    out.append(admin.StatKeys(pb.StatKeysRequest(namespace_id=ns.id, keys=[k]), timeout=5).keys[0].orphan)
                return out

            want = [i > gap for i in range(len(keys))]
            deadline = time.time() + 10
            got = orphans()
            while got != want and time.time() < deadline:
                time.sleep(0.05)
                got = orphans()
            self.assertEqual(got, want)
        finally:
            for ch in chans.values():
                ch.close()


if __name__ == "__main__":
    unittest.main()
