"""A real stratad's KV event stream, read by vLLM's own consumer code: a
pyzmq SUB socket (PLAIN, the tenant's name and token) and the replay
socket, each batch decoded with the installed wheel's msgspec classes
(vllm.distributed.kv_events.KVEventBatch). The index the events build
matches the node's keys after puts, evictions, deletes and a namespace
drop; another tenant's credentials are refused and its stream carries
none of the first tenant's events (issue 43)."""

import os
import re
import time
import unittest

import grpc

from _support import Node, small_descriptor
from strata_client import Client, EventInfo, chain_pages
from strata_client._proto import strata_pb2 as pb
from strata_client._proto.strata_pb2_grpc import AdminStub

# Importing vLLM settles its platform once per process: CPU here, as
# test_vllm and test_lmcache ask (this machine has no GPU), which the
# suite's later tests in this process then get.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

try:
    import msgspec
    import zmq
    from vllm.distributed.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
except ImportError as e:  # pragma: no cover - the test venv has them
    if os.environ.get("STRATA_REQUIRE_ENGINES"):
        raise
    raise unittest.SkipTest(f"vLLM or pyzmq not installed: {e}")

END_SEQ = (-1).to_bytes(8, "big", signed=True)
_STREAM = re.compile(r'msg="KV event stream" tenant=(\w+) pub=(\S+) replay=(\S+)')


def stream_addrs(node, tenant, within=10.0):
    """The PUB and replay addresses the node logged for tenant's stream."""
    deadline = time.time() + within
    while time.time() < deadline:
        for m in _STREAM.finditer(node.log()):
            if m.group(1) == tenant:
                return m.group(2), m.group(3)
        time.sleep(0.01)
    raise AssertionError(f"no event stream logged for {tenant}:\n{node.log()}")


class Consumer:
    """A router's index of one tenant's stream, as vLLM's subscriber
    example builds one: SUB for the live batches, the replay socket (REQ)
    for what came before the subscription or was missed, every payload
    decoded with msgspec into vLLM's KVEventBatch."""

    def __init__(self, ctx, pub, replay, user, password):
        self.ctx, self.replay_addr, self.creds = ctx, replay, (user, password)
        self.decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
        self.sub = self._socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.sub.connect("tcp://" + pub)
        self.next = 0
        self.held = set()
        self.topics = {}
        self.kinds = []
        self.stored = {}  # block hash -> its last BlockStored

    def _socket(self, kind):
        s = self.ctx.socket(kind)
        s.plain_username, s.plain_password = (c.encode() for c in self.creds)
        s.linger = 0
        return s

    def close(self):
        self.sub.close()

    def replay(self, start, timeout_ms=5000):
        """The replay socket's batches from start on (REQ, as vLLM's example)."""
        req = self._socket(zmq.REQ)
        req.rcvtimeo = timeout_ms
        req.connect("tcp://" + self.replay_addr)
        try:
            req.send(start.to_bytes(8, "big"))
            got = []
            while True:
                topic, seq, payload = req.recv_multipart()
                if seq == END_SEQ:
                    return got
                got.append((topic, int.from_bytes(seq, "big"), payload))
                # A REQ socket takes one reply per request: ask for the rest.
                req.close()
                req = self._socket(zmq.REQ)
                req.rcvtimeo = timeout_ms
                req.connect("tcp://" + self.replay_addr)
                req.send((got[-1][1] + 1).to_bytes(8, "big"))
        finally:
            req.close()

    def apply(self, topic, seq, payload):
        if seq < self.next:
            return
        self.next = seq + 1
        batch = self.decoder.decode(payload)
        for ev in batch.events:
            self.topics[topic] = self.topics.get(topic, 0) + 1
            self.kinds.append(type(ev).__name__)
            if isinstance(ev, BlockStored):
                self.held.update(ev.block_hashes)
                for h in ev.block_hashes:
                    self.stored[h] = ev
            elif isinstance(ev, BlockRemoved):
                self.held.difference_update(ev.block_hashes)
            elif isinstance(ev, AllBlocksCleared):
                self.held.clear()

    def poll(self, timeout_ms=50):
        """Applies what arrives within timeout_ms, filling gaps by replay."""
        if self.next == 0:
            for b in self.replay(0):
                self.apply(*b)
        while self.sub.poll(timeout_ms):
            topic, seq_b, payload = self.sub.recv_multipart()
            seq = int.from_bytes(seq_b, "big")
            if seq > self.next:
                for b in self.replay(self.next):
                    self.apply(*b)
            self.apply(topic, seq, payload)
            timeout_ms = 0


class _StreamNode(unittest.TestCase):
    """A test class's node (HOST_BYTES of host tier, NODE_ARGS) and zmq
    context."""

    HOST_BYTES = "1MiB"
    NODE_ARGS = ["--tenant-token", "acme=acme-token", "--events", "acme=127.0.0.1:0,127.0.0.1:0"]

    @classmethod
    def setUpClass(cls):
        cls.node = Node(host_bytes=cls.HOST_BYTES, extra_args=cls.NODE_ARGS)
        cls.ctx = zmq.Context()

    @classmethod
    def tearDownClass(cls):
        cls.ctx.term()
        cls.node.stop()


class EventStreamTest(_StreamNode):
    # 40 pages of 8 KiB in the host tier: the puts below evict.
    HOST_BYTES = "320KiB"
    NODE_ARGS = ["--tenant-token", "acme=acme-token", "--tenant-token", "globex=globex-token",
                 "--events", "acme=127.0.0.1:0,127.0.0.1:0", "--events", "globex=127.0.0.1:0,127.0.0.1:0"]

    def wait_match(self, consumer, ns, what, within=10.0):
        deadline = time.time() + within
        want = None
        while time.time() < deadline:
            consumer.poll()
            want = set(ns.list_keys())
            if consumer.held == want:
                return
        self.fail(f"{what}: the consumer holds {len(consumer.held)} blocks, the node lists {len(want)}")

    def test_stream_matches_node(self):
        pub, replay = stream_addrs(self.node, "acme")
        gpub, greplay = stream_addrs(self.node, "globex")
        acme = Consumer(self.ctx, pub, replay, "acme", "acme-token")
        self.addCleanup(acme.close)
        globex = Consumer(self.ctx, gpub, greplay, "globex", "globex-token")
        self.addCleanup(globex.close)

        client = Client(self.node.addr, token="acme-token", node_timeout=5.0, refresh_interval=0)
        self.addCleanup(client.close)
        ns = client.open(small_descriptor(tenant="acme"))
        for i in range(6):  # 6 chains of 16 pages: 96 pages into 40 pages of room
            toks = [100_000 * (i + 1) + j for j in range(16 * 16)]
            keys = ns.page_keys(toks)
            res = ns.put_chain(keys, [os.urandom(ns.page_bytes) for _ in keys])
            self.assertTrue(all(r.status in ("COMMITTED", "REJECTED") for r in res), res)
        self.wait_match(acme, ns, "after the puts and evictions")
        self.assertIn("BlockRemoved", acme.kinds)  # evictions were announced
        self.assertLess(len(acme.held), 96)

        held = sorted(acme.held)
        self.assertEqual(ns.delete(held[:3]), 3)
        self.wait_match(acme, ns, "after a delete")

        # The topic names the node's incarnation and the namespace.
        (topic,) = set(acme.topics)
        self.assertRegex(topic.decode(), r"^kv@[\w-]+\.1@" + ns.id.hex() + "$")

        # Another tenant's credentials are refused on acme's sockets: no
        # handshake, nothing received, no replay answer.
        intruder = Consumer(self.ctx, pub, replay, "globex", "globex-token")
        self.addCleanup(intruder.close)
        with self.assertRaises(zmq.Again):
            intruder.replay(0, timeout_ms=500)
        self.assertFalse(intruder.sub.poll(200))
        # globex's own stream carries none of acme's events: its replay
        # ring is empty.
        self.assertEqual(globex.replay(0), [])

        # A drop clears the namespace on the stream.
        with grpc.insecure_channel(self.node.addr) as ch:
            AdminStub(ch).DropNamespace(pb.DropNamespaceRequest(namespace_id=ns.id),
                                        metadata=[("authorization", "Bearer acme-token")], timeout=10)
        deadline = time.time() + 10
        while acme.held and time.time() < deadline:
            acme.poll()
        self.assertEqual(acme.held, set())
        self.assertEqual(acme.kinds[-1], "AllBlocksCleared")

    def test_tokens_reach_block_stored(self):
        """A put's tokens, LoRA name and extra keys (events=) reach the
        BlockStored that announces each page, as vLLM's class decodes it,
        whichever plane carried the put: the native library's or this
        client's own raw tcp plane (frame protocol 6), not gRPC."""
        for native in (True, False):
            with self.subTest(native=native):
                self._tokens_reach_block_stored(native)

    def _tokens_reach_block_stored(self, native):
        pub, replay = stream_addrs(self.node, "acme")
        acme = Consumer(self.ctx, pub, replay, "acme", "acme-token")
        self.addCleanup(acme.close)
        client = Client(self.node.addr, token="acme-token", node_timeout=5.0, refresh_interval=0, native=native)
        self.addCleanup(client.close)
        ns = client.open(small_descriptor(tenant="acme", model=f"tokens-{native}"))
        toks = [7_000_000 + j for j in range(4 * 16)]
        keys = ns.page_keys(toks)
        evs = [EventInfo(tokens=toks[16 * i:16 * (i + 1)], lora_name="sql-lora" if i == 1 else "",
                         extra_keys=msgspec.msgpack.encode(["mm-hash", i]) if i == 2 else None) for i in range(4)]
        res = ns.put(chain_pages(keys, [os.urandom(ns.page_bytes) for _ in keys]), events=evs)
        self.assertTrue(all(r.status == "COMMITTED" for r in res), res)
        self.assertEqual(client.stats.get("native_puts" if native else "raw_puts"), 1, client.stats)
        deadline = time.time() + 10
        while not all(k in acme.stored for k in keys) and time.time() < deadline:
            acme.poll()
        for i, k in enumerate(keys):
            ev = acme.stored.get(k)
            self.assertIsNotNone(ev, f"page {i} never announced")
            self.assertEqual(list(ev.token_ids), toks[16 * i:16 * (i + 1)])
            self.assertEqual(ev.block_size, 16)
            self.assertEqual(ev.parent_block_hash, keys[i - 1] if i else None)
            self.assertEqual(ev.lora_name, "sql-lora" if i == 1 else None)
            self.assertEqual(ev.extra_keys, [("mm-hash", 2)] if i == 2 else None)


class VLLMConnectorEventsTest(_StreamNode):
    """The vLLM connector's saves, made through vLLM's own classes (the
    scheduler's Request and block hasher, the worker's KV cache views),
    announce each block as vLLM's own BlockStored would: its token ids,
    block size, LoRA name and extra keys."""

    HOST_BYTES = "64MiB"

    def test_saved_blocks_carry_their_tokens(self):
        import test_vllm as V

        kvc = V.kv_cache_config()
        s, w = V.connectors(V.vllm_config(self.node.addr, strata_token="acme-token"), kvc)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        caches, _ = V.kv_caches(kvc, "LBHNC", fill=7)
        w.register_kv_caches(caches)
        V.wait_for(lambda: s._sched.link.ready() and w._worker.link is not None and w._worker.link.ready(), 20,
                   "the connector to connect")
        pub, replay = stream_addrs(self.node, "acme")
        acme = Consumer(self.ctx, pub, replay, "acme", "acme-token")
        self.addCleanup(acme.close)
        tokens = list(range(5000, 5000 + 3 * V.BLOCK + 2))  # 3 full blocks
        real = V.make_request
        # A cache salt: vLLM hashes it into the first block and names it in
        # that block's BlockStored.extra_keys.
        V.make_request = lambda rid, toks: _salted(real(rid, toks))
        try:
            V.save_prompt(s, w, "ev-1", tokens, [3, 4, 5, 6])
        finally:
            V.make_request = real
        self.assertEqual(w.counters()["saved_pages"], 3)
        self.assertEqual(s.counters().get("event_info_errors", 0), 0, s.counters())
        deadline = time.time() + 10
        while len(acme.stored) < 3 and time.time() < deadline:
            acme.poll()
        got = sorted(acme.stored.values(), key=lambda ev: ev.token_ids[0])
        self.assertEqual([list(ev.token_ids) for ev in got],
                         [tokens[i * V.BLOCK:(i + 1) * V.BLOCK] for i in range(3)])
        self.assertTrue(all(ev.block_size == V.BLOCK and ev.lora_name is None for ev in got), got)
        self.assertEqual([ev.extra_keys for ev in got], [[("salt-7",)], None, None])  # as vLLM publishes it


def _salted(req):
    """req with a cache salt, as vLLM's Request takes one (the salt set
    before the block hashes are made)."""
    from vllm.v1.request import Request

    return Request(req.request_id, list(req.prompt_token_ids), req.sampling_params, None,
                   block_hasher=req._block_hasher, cache_salt="salt-7")


class RouterQueryTest(_StreamNode):
    """What a router asks besides the stream, on a node of its own (the
    stream tests above count every batch of acme's stream)."""

    def test_query_prefix_and_snapshot(self):
        """The client's prefix query (by keys and by tokens) and snapshot:
        a router that joins late takes the dump, then the stream from its
        next_seq, and holds what the node lists."""
        client = Client(self.node.addr, token="acme-token", node_timeout=5.0, refresh_interval=0)
        self.addCleanup(client.close)
        ns = client.open(small_descriptor(tenant="acme", model="query"))
        toks = [8_000_000 + j for j in range(10 * 16)]
        keys = ns.page_keys(toks)
        res = ns.put_chain(keys[:6], [os.urandom(ns.page_bytes) for _ in keys[:6]])
        self.assertTrue(all(r.status == "COMMITTED" for r in res), res)
        for q in (ns.query_prefix(keys=keys, per_key=True), ns.query_prefix(tokens=toks + [1, 2, 3], per_key=True)):
            self.assertEqual((q.longest, q.pages, q.page_tokens, q.longest_tokens), (6, 10, 16, 96))
            self.assertEqual(q.tiers, {"gpu": 0, "host": 6, "ssd": 0})
            self.assertEqual(q.key_tiers, ["host"] * 6 + [None] * 4)
            self.assertEqual([(n.held, n.error) for n in q.nodes], [(6, "")])
        self.assertEqual(ns.lookup(keys).hit_prefix, 6)

        snap = ns.snapshot(page_size=4)
        self.assertEqual({k for k, _, _ in snap.pages}, set(ns.list_keys()))
        self.assertEqual(snap.topic, f"kv@{snap.node_id}.1@{ns.id.hex()}")
        pages = {k: (p, t) for k, p, t in snap.pages}
        self.assertEqual(pages[keys[1]], (keys[0], "host"))
        self.assertEqual(pages[keys[0]], (None, "host"))
        # The dump, then the stream from next_seq (the replay socket), is
        # the node's contents after more puts.
        pub, replay = stream_addrs(self.node, "acme")
        acme = Consumer(self.ctx, pub, replay, "acme", "acme-token")
        self.addCleanup(acme.close)
        res = ns.put_chain(keys[6:], [os.urandom(ns.page_bytes) for _ in keys[6:]])
        self.assertTrue(all(r.status == "COMMITTED" for r in res), res)
        held = set(pages)
        deadline = time.time() + 10
        while time.time() < deadline:
            for topic, _, payload in acme.replay(snap.next_seq):
                if topic.decode() == snap.topic:
                    for ev in acme.decoder.decode(payload).events:
                        if isinstance(ev, BlockStored):
                            self.assertNotIn(bytes(ev.block_hashes[0]), held, "a block counted twice")
                            held.add(bytes(ev.block_hashes[0]))
                        elif isinstance(ev, BlockRemoved):
                            held.discard(bytes(ev.block_hashes[0]))
            if held == set(ns.list_keys()):
                break
            held = set(pages)
        self.assertEqual(held, set(ns.list_keys()))


if __name__ == "__main__":
    unittest.main()
