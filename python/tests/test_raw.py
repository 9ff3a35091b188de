"""The raw tcp data plane (strata_client.raw): Get and Put against a real
stratad over raw connections, its fallback to gRPC, leases and batch
limits over raw, Go-written pages read over raw, and the page reader and
put framing against a scripted node on a socket pair (checksum mismatch,
refusals, protocol violations, lost connections, deadlines)."""

import contextlib
import hashlib
import os
import socket
import struct
import threading
import time
import unittest

from _support import Node, OneNodeTest, go_pattern, gowriter, small_descriptor
from strata_client import Client, EventInfo, Page, ScatterBuffer
from strata_client import errors as E
from strata_client import frame as F
from strata_client import raw as R
from strata_client.buffers import dest
from strata_client.checksum import checksum


def _session(client: Client) -> R.RawSession:
    """The raw session of the client's only node."""
    (node,) = [n for n in client._nodes.values() if n.handles]
    return node.raw


@contextlib.contextmanager
def _node_client(*node_args, **client_kw):
    """A node started with node_args and a client of it (client_kw, without
    background refreshes) with a namespace of small_descriptor(); the node
    stops after."""
    node = Node(extra_args=node_args)
    try:
        with Client(node.addr, refresh_interval=0, native=False, **client_kw) as c:
            yield c, c.open(small_descriptor())
    finally:
        node.stop()


class RawNodeTest(OneNodeTest):
    native = False  # the Python raw plane
    """One node serving the raw plane (its default)."""

    def keys(self, n, base):
        return self.ns.page_keys(list(range(base, base + 16 * n)))

    def test_round_trip_over_raw(self):
        ns, c = self.ns, self.client
        self.assertTrue(c.raw_active)
        self.assertEqual(list(c.raw_status().values()), [True])
        keys = self.keys(5, 10_000)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        puts, reads = c.stats["raw_puts"], c.stats["raw_reads"]
        res = ns.put_chain(keys, data)
        self.assertEqual([r.status for r in res], ["COMMITTED"] * 5)
        self.assertEqual(c.stats["raw_puts"], puts + 1)
        self.assertEqual([r.status for r in ns.put_chain(keys[:2], data[:2])], ["EXISTS"] * 2)

        # Every kind of caller buffer, filled straight from the socket.
        half = ns.page_bytes // 3
        k_part, v_part = bytearray(half), bytearray(ns.page_bytes - half)
        bufs = [bytearray(ns.page_bytes), memoryview(bytearray(ns.page_bytes)), ScatterBuffer([k_part, v_part]),
                bytearray(ns.page_bytes + 100), bytearray(ns.page_bytes)]
        try:
            import numpy as np

            bufs[4] = np.zeros(ns.page_bytes // 4, dtype=np.float32)
        except ImportError:
            pass
        out = ns.get(keys, bufs)
        self.assertEqual(c.stats["raw_reads"], reads + 1)
        self.assertTrue(all(o is b for o, b in zip(out, bufs)))
        self.assertEqual(bytes(bufs[0]), data[0])
        self.assertEqual(bytes(bufs[1]), data[1])
        self.assertEqual(bytes(k_part) + bytes(v_part), data[2])
        self.assertEqual(bytes(bufs[3][:ns.page_bytes]), data[3])
        self.assertEqual(bytes(memoryview(bufs[4]).cast("B")), data[4])
        self.assertEqual(c.stats["checksum_failures"], 0)

        # The node stored what the raw put declared: parent links, depths.
        from strata_client._proto import strata_pb2 as pb

        node = next(iter(c._nodes.values()))
        info = node.admin.StatKeys(pb.StatKeysRequest(namespace_id=ns.id, keys=keys), timeout=5)
        self.assertEqual([k.depth for k in info.keys], [0, 1, 2, 3, 4])
        self.assertEqual([bytes(k.parent_key) for k in info.keys[1:]], keys[:4])
        self.assertEqual(bytes(info.keys[0].parent_key), b"")
        self.assertEqual([bytes(k.checksum) for k in info.keys], [checksum("crc32c", d) for d in data])

        # A gRPC-only client reads the raw-put pages; raw reads gRPC-put ones.
        with Client(self.node.addr, raw=False, refresh_interval=0, native=False) as g:
            self.assertFalse(g.raw_active)
            gns = g.open(small_descriptor())
            self.assertEqual([bytes(o) for o in gns.get(keys)], data)
            more = self.keys(2, 20_000)
            mdata = [os.urandom(ns.page_bytes) for _ in more]
            self.assertTrue(all(r.stored for r in gns.put_chain(more, mdata)))
            self.assertEqual((g.stats["raw_reads"], g.stats["raw_puts"]), (0, 0))
        self.assertEqual([bytes(o) for o in ns.get(more)], mdata)

    def test_missing_keys(self):
        ns, c = self.ns, self.client
        keys = self.keys(4, 30_000)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        ns.put([Page(keys[1], data[1]), Page(keys[3], data[3])])
        reads = c.stats["raw_reads"]
        out = ns.get(keys)
        self.assertEqual(c.stats["raw_reads"], reads + 1)
        self.assertEqual([o is not None for o in out], [False, True, False, True])
        self.assertEqual(bytes(out[1]), data[1])
        self.assertEqual(bytes(out[3]), data[3])
        self.assertEqual(ns.get([bytes(32)] * 3), [None] * 3)

    def test_page_larger_than_buffer(self):
        ns = self.ns
        keys = self.keys(2, 40_000)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        ns.put_chain(keys, data)
        with self.assertRaises(E.InvalidArgumentError) as cm:
            ns.get(keys, [bytearray(ns.page_bytes), bytearray(ns.page_bytes - 1)])
        self.assertIn("buffer 1", str(cm.exception))

        # The reader itself: the page is skipped with a clear error, the
        # other pages still land, and the connection stays in step.
        s = _session(self.client)
        conn = s.acquire()
        try:
            conn.deadline(time.monotonic() + 5)
            small, whole = bytearray(100), bytearray(ns.page_bytes)
            found = [False, False]
            bad, err = conn.read(ns.id, 0, keys, [dest(small), dest(whole)], "crc32c", ns.page_bytes, found)
            self.assertIsInstance(err, E.InvalidArgumentError)
            self.assertIn(f"page 0 is {ns.page_bytes} bytes, its buffer has 100", str(err))
            self.assertEqual((found, bad), ([False, True], 0))
            self.assertEqual(bytes(whole), data[1])
            self.assertEqual(bytes(small), bytes(100))
            found = [False]
            conn.read(ns.id, 0, keys[:1], [dest(whole)], "crc32c", ns.page_bytes, found)
            self.assertEqual((found, bytes(whole)), ([True], data[0]))
            self.assertFalse(conn.broken)
        finally:
            s.release(conn)

    def test_wrong_size_put(self):
        ns, c = self.ns, self.client
        keys = self.keys(2, 50_000)
        puts = c.stats["raw_puts"]
        with self.assertRaises(E.InvalidArgumentError) as cm:
            ns.put_chain(keys, [bytes(ns.page_bytes), bytes(ns.page_bytes - 1)])
        self.assertIn(f"put page 1: {ns.page_bytes - 1} bytes, namespace pages are {ns.page_bytes}", str(cm.exception))
        self.assertEqual(c.stats["raw_puts"], puts)
        self.assertEqual(ns.lookup(keys).present, [False, False])

        # Past the client's check, the node refuses it too: REJECTED, nothing stored.
        s = _session(c)
        conn = s.acquire()
        try:
            conn.deadline(time.monotonic() + 5)
            short = memoryview(bytes(ns.page_bytes - 8))
            got = conn.put(ns.id, [R.PutSpec(keys[0], None, 0, len(short), 0)], [short], [checksum("crc32c", short)])
            self.assertEqual(got[0][0], 9)  # REJECTED
            self.assertIn("size", got[0][1])
            self.assertFalse(conn.broken)
        finally:
            s.release(conn)
        self.assertEqual(ns.lookup(keys).present, [False, False])

    def test_leases_over_raw(self):
        ns, c = self.ns, self.client
        keys = self.keys(3, 60_000)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        ns.put_chain(keys, data)
        r = ns.lookup(keys, lease=True, ttl_ms=5000)
        self.assertEqual(r.hit_prefix, 3)
        reads = c.stats["raw_reads"]
        out = ns.get(keys, lease=r.lease)
        self.assertEqual([bytes(o) for o in out], data)
        self.assertEqual(c.stats["raw_reads"], reads + 1)

        r.lease.release()
        fallbacks = c.stats["raw_fallbacks"]
        with self.assertRaises((E.LeaseNotFoundError, E.LeaseExpiredError)) as cm:
            ns.get(keys, lease=r.lease)
        self.assertIn("raw data plane", str(cm.exception))
        self.assertEqual(c.stats["raw_fallbacks"], fallbacks)

        short = ns.lookup(keys, lease=True, ttl_ms=1)
        time.sleep(0.05)
        with self.assertRaises(E.LeaseExpiredError) as cm:
            ns.get(keys, lease=short.lease)
        self.assertIn("raw data plane: LEASE_EXPIRED", str(cm.exception))
        # A refusal leaves the connection pooled and usable.
        self.assertEqual([bytes(o) for o in ns.get(keys)], data)

    def test_one_call_put(self):
        ns, c = self.ns, self.client
        s = _session(c)
        conn = s.acquire()
        self.assertEqual((s.version, conn.version), (F.PROTOCOL_VERSION, F.PROTOCOL_VERSION))
        s.release(conn)
        keys = self.keys(16, 80_000)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        one, puts, fb = c.stats["raw_put_one_calls"], c.stats["raw_puts"], c.stats["raw_fallbacks"]
        res = ns.put_chain(keys[:15], data[:15])
        self.assertEqual([r.status for r in res], ["COMMITTED"] * 15)
        self.assertEqual((c.stats["raw_put_one_calls"], c.stats["raw_puts"]), (one + 1, puts + 1))
        # Present pages answer EXISTS over Put frames too, new ones commit.
        res = ns.put_chain(keys, data)
        self.assertEqual([r.status for r in res], ["EXISTS"] * 15 + ["COMMITTED"])
        self.assertEqual(c.stats["raw_put_one_calls"], one + 2)
        self.assertEqual(c.stats["raw_fallbacks"], fb)
        self.assertEqual([bytes(o) for o in ns.get(keys)], data)
        # The node stored the links the Put frames declared.
        from strata_client._proto import strata_pb2 as pb

        node = next(iter(c._nodes.values()))
        info = node.admin.StatKeys(pb.StatKeysRequest(namespace_id=ns.id, keys=keys[:3]), timeout=5)
        self.assertEqual([k.depth for k in info.keys], [0, 1, 2])
        self.assertEqual([bytes(k.parent_key) for k in info.keys], [b"", keys[0], keys[1]])

        # A page the node rejects (wrong size) answers REJECTED with the
        # reason, the others commit, and the connection stays in step.
        conn = s.acquire()
        try:
            conn.deadline(time.monotonic() + 5)
            more = self.keys(2, 81_000)
            short, good = memoryview(bytes(ns.page_bytes - 8)), memoryview(os.urandom(ns.page_bytes))
            got = conn.put_one_call(ns.id, [R.PutSpec(more[0], None, 0, len(short), 0), R.PutSpec(more[1], None, 0, len(good), 0)],
                                    [short, good], [checksum("crc32c", short), checksum("crc32c", good)])
            self.assertEqual(got[0][0], 9)
            self.assertIn("size", got[0][1])
            self.assertEqual(got[1], (1, ""))
            # A refusal as a page's answer (unknown namespace): raised once
            # every answer is read; the connection stays usable.
            with self.assertRaises(E.NamespaceNotFoundError):
                conn.put_one_call(b"\x07" * 32, [R.PutSpec(more[0], None, 0, len(good), 0)], [good], [checksum("crc32c", good)])
            self.assertFalse(conn.broken)
            self.assertEqual(conn.lookup(ns.id, more, False)[4], [False, True])
        finally:
            s.release(conn)

    def test_cost_hint_over_raw(self):
        """A page's cost hint travels in its frame, the Put frames' and the
        Reserve's, not over gRPC: the node keeps it (its key's stat says
        so). One that is negative, NaN or infinite is refused as invalid,
        over raw and over gRPC alike, and nothing is stored."""
        from strata_client._proto import strata_pb2 as pb

        ns, c = self.ns, self.client
        node = next(iter(c._nodes.values()))

        def stat(keys):
            return node.admin.StatKeys(pb.StatKeysRequest(namespace_id=ns.id, keys=keys), timeout=5).keys

        most = R.ONE_CALL_MAX_PAGES  # a larger batch reserves its pages
        for n, base in ((3, 110_000), (most + 1, 111_000)):
            keys = self.keys(n, base)
            # float32-exact (1.5e9 times a power of 2): the node keeps a float32
            hints = [0.0 if i % 3 == 2 else 1.5e9 * 2 ** (i % 4) for i in range(n)]
            pages = [Page(k, os.urandom(ns.page_bytes), parent=keys[i - 1] if i else None, depth=i, cost_hint=h)
                     for i, (k, h) in enumerate(zip(keys, hints))]
            one, puts, fb = c.stats["raw_put_one_calls"], c.stats["raw_puts"], c.stats["raw_fallbacks"]
            self.assertEqual([r.status for r in ns.put(pages)], ["COMMITTED"] * n)
            self.assertEqual((c.stats["raw_puts"], c.stats["raw_fallbacks"]), (puts + 1, fb))
            self.assertEqual(c.stats["raw_put_one_calls"], one + (n <= most))
            self.assertEqual([k.cost_hint for k in stat(keys)], hints)

        with Client(self.node.addr, raw=False, refresh_interval=0, native=False) as g:
            gns = g.open(small_descriptor())
            for i, bad in enumerate((-1.0, float("nan"), float("inf"))):
                for via, space in (("raw data plane", ns), ("gRPC", gns)):
                    with self.subTest(bad=bad, via=via):
                        (k,) = self.keys(1, 112_000 + 100 * i + (via == "gRPC"))
                        with self.assertRaises(E.InvalidArgumentError) as cm:
                            space.put([Page(k, os.urandom(ns.page_bytes), cost_hint=bad)])
                        self.assertIn("cost hint", str(cm.exception))
                        self.assertEqual("raw data plane" in str(cm.exception), space is ns)
                        self.assertEqual(stat([k])[0].key, b"")

    def test_large_batch_is_two_phase(self):
        ns, c = self.ns, self.client
        keys = self.keys(17, 90_000)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        one, puts = c.stats["raw_put_one_calls"], c.stats["raw_puts"]
        res = ns.put_chain(keys, data)
        self.assertEqual([r.status for r in res], ["COMMITTED"] * 17)
        self.assertEqual((c.stats["raw_put_one_calls"], c.stats["raw_puts"]), (one, puts + 1))
        self.assertEqual([bytes(o) for o in ns.get(keys)], data)

    def test_lookup_over_raw_matches_grpc(self):
        ns, c = self.ns, self.client
        keys = self.keys(6, 100_000)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        ns.put([Page(keys[i], data[i]) for i in (0, 1, 3, 4)])  # a miss at 2, the end missing
        with Client(self.node.addr, raw=False, refresh_interval=0, native=False) as g:
            gns = g.open(small_descriptor())
            n = c.stats["raw_lookups"]
            got = ns.lookup(keys)
            self.assertEqual(c.stats["raw_lookups"], n + 1)
            want = gns.lookup(keys)
            self.assertEqual((got.hit_prefix, got.present, got.lease), (want.hit_prefix, want.present, None))
            self.assertEqual((got.hit_prefix, got.present), (2, [True, True, False, True, True, False]))
            self.assertEqual(ns.exists(keys[3:5]), gns.exists(keys[3:5]))
            self.assertEqual(ns.lookup([keys[2]], lease=True).lease, gns.lookup([keys[2]], lease=True).lease)  # no hit, no lease
            self.assertEqual(g.stats["raw_lookups"], 0)

            r = ns.lookup(keys, lease=True, ttl_ms=5000)
            w = gns.lookup(keys, lease=True, ttl_ms=5000)
            self.assertEqual(c.stats["raw_lookups"], n + 4)
            self.assertEqual((r.hit_prefix, r.present), (w.hit_prefix, w.present))
            self.assertEqual(r.lease.pages, w.lease.pages)
            self.assertEqual(list(r.lease.node_leases), list(w.lease.node_leases))
            (lid,) = next(iter(r.lease.node_leases.values()))
            self.assertNotEqual(lid, 0)
            self.assertLess(abs(r.lease.expires_unix_ms - w.lease.expires_unix_ms), 3000)
            self.assertGreater(r.lease.expires_unix_ms, time.time() * 1000 + 2000)
            w.lease.release()
        # The raw lease is the node's: a get names it, and once released
        # the node refuses it.
        reads = c.stats["raw_reads"]
        self.assertEqual([bytes(o) for o in ns.get(keys[:2], lease=r.lease)], data[:2])
        self.assertEqual(c.stats["raw_reads"], reads + 1)
        r.lease.release()
        with self.assertRaises(E.LeaseNotFoundError):
            ns.get(keys[:2], lease=r.lease)

    def test_lookup_falls_back_when_connection_breaks(self):
        ns, c = self.ns, self.client
        keys = self.keys(2, 110_000)
        ns.put_chain(keys, [os.urandom(ns.page_bytes) for _ in keys])
        s = _session(c)
        conn = s.acquire()
        real = conn.send

        def broken(bufs):  # the node hangs up as the request goes out
            conn.sock.shutdown(socket.SHUT_RDWR)
            real(bufs)

        conn.send = broken
        s.release(conn)
        with s._lock:
            s._idle[:] = [conn]
        n = c.stats["raw_lookups"]
        r = ns.lookup(keys)
        self.assertEqual((r.hit_prefix, r.present), (2, [True, True]))
        self.assertEqual(c.stats["raw_lookups"], n)  # answered over gRPC
        self.assertTrue(conn.broken)

    def test_stale_connection_is_dropped(self):
        ns = self.ns
        keys = self.keys(1, 70_000)
        data = os.urandom(ns.page_bytes)
        ns.put_chain(keys, [data])
        s = _session(self.client)
        self.assertTrue(ns.get(keys)[0] is not None)
        with s._lock:
            idle = list(s._idle)
        self.assertTrue(idle)
        for conn in idle:  # as if the node had hung up on the idle connections
            conn.sock.shutdown(socket.SHUT_RDWR)
        out = ns.get(keys)
        self.assertEqual(bytes(out[0]), data)
        with s._lock:
            self.assertFalse(any(conn in s._idle for conn in idle))


class RawBatchLimitTest(unittest.TestCase):
    def test_batches_split_by_welcome_limit(self):
        with _node_client("--max-batch", "4", node_timeout=5.0) as (c, ns):
            keys = ns.page_keys(list(range(16 * 10)))
            data = [os.urandom(ns.page_bytes) for _ in keys]
            res = ns.put_chain(keys, data)
            self.assertEqual([r.status for r in res], ["COMMITTED"] * 10)
            self.assertEqual(c.stats["raw_puts"], 3)
            out = ns.get(keys)
            self.assertEqual([bytes(o) for o in out], data)
            self.assertEqual(c.stats["raw_reads"], 3)
            self.assertEqual(c.stats["raw_put_one_calls"], 3)  # 4 + 4 + 2 pages
            r = ns.lookup(keys, lease=True)
            self.assertEqual((r.hit_prefix, c.stats["raw_lookups"]), (10, 3))
            self.assertEqual(len(r.lease.node_leases[_session(c).node_id]), 3)  # one node lease per batch
            self.assertEqual([bytes(o) for o in ns.get(keys[:4], lease=r.lease)], data[:4])
            r.lease.release()
            self.assertEqual(_session(c).max_batch, 4)
            self.assertEqual(c.stats["raw_fallbacks"], 0)


class RawFallbackTest(unittest.TestCase):
    def test_node_without_raw_plane(self):
        with _node_client("--raw-listen", "off", node_timeout=5.0) as (c, ns):
            self.assertFalse(c.raw_active)
            self.assertEqual(list(c.raw_status().values()), [False])
            self.assertIsNone(_session(c))
            keys = ns.page_keys(list(range(16 * 3)))
            data = [os.urandom(ns.page_bytes) for _ in keys]
            self.assertTrue(all(r.stored for r in ns.put_chain(keys, data)))
            self.assertEqual([bytes(o) for o in ns.get(keys)], data)
            self.assertEqual((c.stats["raw_reads"], c.stats["raw_puts"]), (0, 0))

    def test_unreachable_raw_address(self):
        with _node_client(node_timeout=5.0) as (c, ns):
            self.assertTrue(c.raw_active)
            # The node advertises an address no one listens on (as after a
            # firewall or a restart on another port): calls go over gRPC.
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            (n,) = [x for x in c._nodes.values() if x.handles]
            n.set_raw(f"0.0.0.0:{port}", "")
            self.assertEqual(n.raw.addr, ("127.0.0.1", port))
            keys = ns.page_keys(list(range(16 * 2)))
            data = [os.urandom(ns.page_bytes) for _ in keys]
            self.assertTrue(all(r.stored for r in ns.put_chain(keys, data)))
            self.assertEqual([bytes(o) for o in ns.get(keys)], data)
            self.assertEqual((c.stats["raw_reads"], c.stats["raw_puts"]), (0, 0))
            self.assertEqual(c.stats["raw_fallbacks"], 2)  # the put and the get
            self.assertFalse(c.raw_active)
            self.assertIsInstance(n.raw.last_error, OSError)

    def test_raw_off_option(self):
        with _node_client(raw=False) as (c, ns):
            self.assertFalse(c.raw_active)
            keys = ns.page_keys(list(range(16)))
            ns.put_chain(keys, [bytes(ns.page_bytes)])
            self.assertEqual(bytes(ns.get(keys)[0]), bytes(ns.page_bytes))
            self.assertEqual((c.stats["raw_reads"], c.stats["raw_puts"], c.stats["raw_fallbacks"]), (0, 0, 0))

    def test_tenant_token_over_raw(self):
        with _node_client("--tenant-token", "acme=s3cret", token="s3cret") as (c, ns):
            self.assertTrue(c.raw_active)
            keys = ns.page_keys(list(range(16)))
            data = os.urandom(ns.page_bytes)
            self.assertTrue(ns.put_chain(keys, [data])[0].stored)
            self.assertEqual(bytes(ns.get(keys)[0]), data)
            self.assertEqual((c.stats["raw_reads"], c.stats["raw_puts"]), (1, 1))
            # A wrong token is refused at the handshake.
            s = _session(c)
            with self.assertRaises(E.UnauthenticatedError):
                R.RawConn.dial(s.addr, "wrong", s.node_id)


class RawCrossLanguageTest(unittest.TestCase):
    def test_go_written_pages_over_raw(self):
        node = Node()
        try:
            toks = list(range(7_000, 7_000 + 16 * 4))
            out = gowriter("-addr", node.addr, "-mode", "put", "-seed", "5", "-tokens", ",".join(map(str, toks)))
            self.assertEqual(out["results"], ["COMMIT_STATUS_COMMITTED"] * 4)
            with Client(node.addr, node_timeout=5.0, refresh_interval=0, native=False) as c:
                ns = c.open(small_descriptor())
                keys = ns.page_keys(toks)
                got = ns.get(keys)
                self.assertEqual(c.stats["raw_reads"], 1)
                for i, g in enumerate(got):
                    self.assertEqual(bytes(g), go_pattern(5, i, ns.page_bytes))
                # Python writes over raw, Go reads.
                toks2 = list(range(8_000, 8_000 + 16 * 3))
                keys2 = ns.page_keys(toks2)
                data2 = [os.urandom(ns.page_bytes) for _ in keys2]
                self.assertTrue(all(r.stored for r in ns.put_chain(keys2, data2)))
                self.assertEqual(c.stats["raw_puts"], 1)
            back = gowriter("-addr", node.addr, "-mode", "get", "-tokens", ",".join(map(str, toks2)))
            self.assertEqual(back["found"], [True] * 3)
            self.assertEqual(back["sha256"], [hashlib.sha256(d).hexdigest() for d in data2])
        finally:
            node.stop()


# ---- the reader and the put framing against a scripted node -----------------------


def _page_frame(rid, index, data=None, cs=None):
    """A Page frame: found with data (and its CRC-32C unless cs), or missing."""
    if data is None:
        return R.frame(R.OP_PAGE, rid, struct.pack("<IBB", index, 0, 0))
    cs = checksum("crc32c", data) if cs is None else cs
    return R.frame(R.OP_PAGE, rid, struct.pack("<IBB", index, 1, len(cs)) + cs + data)


def _error_frame(rid, code, msg):
    return R.frame(R.OP_ERROR, rid, struct.pack("<H", code) + struct.pack("<H", len(msg)) + msg.encode())


class _Peer:
    """The node's end of a socket pair: reads whole frames, writes bytes."""

    def __init__(self, sock):
        self.sock = sock

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            b = self.sock.recv(n - len(buf))
            if not b:
                raise EOFError
            buf += b
        return bytes(buf)

    def recv_frame(self):
        length, op, _, _, rid = struct.unpack("<IBBHQ", self.recv_exact(16))
        return op, rid, self.recv_exact(length - 12)


class ScriptedNodeTest(unittest.TestCase):
    PAGE = 4096

    def setUp(self):
        a, b = socket.socketpair()
        self.conn = R.RawConn(a, node="scripted", max_batch=16)
        self.conn.deadline(time.monotonic() + 5)
        self.peer = _Peer(b)
        self.thread = None

    def tearDown(self):
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.conn.close()
        self.peer.sock.close()

    def serve(self, answer):
        """Answer the next request with answer(op, rid, body) -> bytes."""
        def run():
            try:
                op, rid, body = self.peer.recv_frame()
                out = answer(op, rid, body)
                if out:
                    self.peer.sock.sendall(out)
            except (EOFError, OSError):
                pass

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def read(self, n, algorithm="crc32c"):
        bufs = [bytearray(self.PAGE) for _ in range(n)]
        found = [False] * n
        bad, err = self.conn.read(b"\x01" * 32, 7, [bytes([i]) * 32 for i in range(n)], [dest(b) for b in bufs],
                                  algorithm, self.PAGE, found)
        return bufs, found, bad, err

    def test_checksum_mismatch_is_a_miss(self):
        good, corrupt = os.urandom(self.PAGE), os.urandom(self.PAGE)
        wrong = struct.pack(">I", (int.from_bytes(checksum("crc32c", corrupt), "big") ^ 1))
        self.serve(lambda op, rid, body: _page_frame(rid, 0, corrupt, wrong) + _page_frame(rid, 1, good))
        bufs, found, bad, err = self.read(2)
        self.assertEqual((found, bad, err), ([False, True], 1, None))
        self.assertEqual(bytes(bufs[1]), good)
        self.assertFalse(self.conn.broken)

    def test_request_fields_and_sha256(self):
        data = os.urandom(self.PAGE)
        seen = {}

        def answer(op, rid, body):
            seen["op"], seen["body"] = op, body
            return _page_frame(rid, 0, None) + _page_frame(rid, 1, data, hashlib.sha256(data).digest())

        self.serve(answer)
        bufs, found, bad, err = self.read(2, "sha256")
        self.assertEqual((found, bad), ([False, True], 0))
        self.assertEqual(bytes(bufs[1]), data)
        self.assertEqual(seen["op"], R.OP_READ)
        self.assertEqual(seen["body"], b"\x01" * 32 + struct.pack("<QI", 7, 2) + b"\x00" * 32 + b"\x01" * 32)
        # The same page against a CRC-32C namespace: its checksum does not match.
        self.thread.join()
        self.serve(lambda op, rid, body: _page_frame(rid, 0, data, hashlib.sha256(data).digest()))
        _, found, bad, _ = self.read(1, "crc32c")
        self.assertEqual((found, bad), ([False], 1))

    def test_error_frame_is_the_nodes_refusal(self):
        self.serve(lambda op, rid, body: _error_frame(rid, 6, "lease 7 expired"))
        with self.assertRaises(E.LeaseExpiredError) as cm:
            self.read(2)
        self.assertIn("LEASE_EXPIRED: lease 7 expired", str(cm.exception))
        self.assertFalse(self.conn.broken)
        self.thread.join()
        self.serve(lambda op, rid, body: _error_frame(rid, 9, "17 items, the limit is 16"))
        with self.assertRaises(E.BatchTooLargeError):
            self.read(1)

    def test_protocol_violations_break_the_connection(self):
        data = os.urandom(self.PAGE)
        self.serve(lambda op, rid, body: _page_frame(rid, 1, data))  # page 1 where 0 was due
        with self.assertRaises(E.ProtocolError):
            self.read(2)
        self.assertTrue(self.conn.broken)

    def test_wrong_request_id(self):
        self.serve(lambda op, rid, body: _page_frame(rid + 1, 0, None))
        with self.assertRaises(E.ProtocolError):
            self.read(1)
        self.assertTrue(self.conn.broken)

    def test_connection_lost_mid_page(self):
        data = os.urandom(self.PAGE)

        def answer(op, rid, body):
            second = _page_frame(rid, 1, data)
            self.peer.sock.sendall(_page_frame(rid, 0, data) + second[: len(second) // 2])
            self.peer.sock.shutdown(socket.SHUT_RDWR)

        self.serve(answer)
        bufs = [bytearray(self.PAGE) for _ in range(2)]
        found = [False, False]
        with self.assertRaises(R.ConnectionLost) as cm:
            self.conn.read(b"\x01" * 32, 0, [b"\x00" * 32, b"\x01" * 32], [dest(b) for b in bufs], "crc32c", self.PAGE, found)
        self.assertFalse(cm.exception.timed_out)
        self.assertIsInstance(cm.exception, E.UnavailableError)
        self.assertEqual(found, [True, False])  # the whole, verified page only
        self.assertTrue(self.conn.broken)

    def test_deadline(self):
        self.serve(lambda op, rid, body: None)  # never answers
        self.conn.deadline(time.monotonic() + 0.3)
        t0 = time.monotonic()
        with self.assertRaises(R.ConnectionLost) as cm:
            self.read(1)
        self.assertTrue(cm.exception.timed_out)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertTrue(self.conn.broken)

    def test_put_frames(self):
        ns = b"\x02" * 32
        k0, k1, k2 = b"\x10" * 32, b"\x11" * 32, b"\x12" * 32
        pages = [os.urandom(self.PAGE) for _ in range(3)]
        specs = [R.PutSpec(k0, None, 0, self.PAGE, 2, 2.5e9), R.PutSpec(k1, k0, 1, self.PAGE, 2), R.PutSpec(k2, k1, 2, self.PAGE, 0)]
        seen = {}

        def node():
            op, rid, body = self.peer.recv_frame()
            seen["reserve"] = (op, body)
            slot = struct.Struct("<BQqB4Q")
            reason = b"no room"
            ok = struct.pack("<I", 3) + slot.pack(1, 100, 0, 0, 0, 0, 0, 0) + b"\x00\x00" + \
                slot.pack(2, 0, 0, 0, 0, 0, 0, 0) + b"\x00\x00" + slot.pack(3, 0, 0, 0, 0, 0, 0, 0) + struct.pack("<H", len(reason)) + reason
            self.peer.sock.sendall(R.frame(R.OP_RESERVE_OK, rid, ok))
            op, _, body = self.peer.recv_frame()
            seen["write"] = (op, body)
            op, rid, body = self.peer.recv_frame()
            seen["commit"] = (op, body)
            self.peer.sock.sendall(R.frame(R.OP_COMMIT_OK, rid, struct.pack("<I", 1) + bytes([1])))

        self.thread = threading.Thread(target=node, daemon=True)
        self.thread.start()
        views = [memoryview(p) for p in pages]
        got = self.conn.put(ns, specs, views, [checksum("crc32c", p) for p in pages])
        self.thread.join(timeout=5)
        self.assertEqual(got, [(1, ""), (2, ""), (9, "no room")])
        op, body = seen["reserve"]
        self.assertEqual(op, R.OP_RESERVE)
        # The connection's version (the newest) carries the cost hint, and
        # event info, none here: no tokens, no LoRA name, no extra keys.
        page = struct.Struct("<32s32sBIQId" + "IHI")
        self.assertEqual(body[:40], ns + struct.pack("<II", 0, 3))
        self.assertEqual([page.unpack_from(body, 40 + i * page.size) for i in range(3)], [
            (k0, bytes(32), 0, 0, self.PAGE, 2, 2.5e9, 0, 0, 0), (k1, k0, 1, 1, self.PAGE, 2, 0.0, 0, 0, 0),
            (k2, k1, 1, 2, self.PAGE, 0, 0.0, 0, 0, 0)])
        self.assertEqual(len(body), 40 + 3 * page.size)
        op, body = seen["write"]  # only the reserved page's bytes travel
        self.assertEqual((op, body[:48], body[48:]), (R.OP_WRITE, ns + struct.pack("<QQ", 100, 0), pages[0]))
        op, body = seen["commit"]
        self.assertEqual((op, body), (R.OP_COMMIT, ns + struct.pack("<IQQB", 1, 100, self.PAGE, 4) + checksum("crc32c", pages[0])))


class _ScriptedOldNode:
    """A scripted node of protocol NEWEST, older than the client's: it
    refuses a hello of a newer version (Error, VERSION, then hangs up) and
    welcomes one up to NEWEST."""

    NEWEST = 2

    def setUp(self):
        self.lis = socket.create_server(("127.0.0.1", 0))
        self.hellos = []
        self.ops = []
        self.bodies = []  # of the Put frames
        self.session = None
        self.thread = threading.Thread(target=self.accept_loop, daemon=True)
        self.thread.start()

    def tearDown(self):
        if self.session is not None:
            self.session.close()  # ends the scripted node's serving of its connection
        try:
            self.lis.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self.lis.close()
        self.thread.join(timeout=5)
        self.assertFalse(self.thread.is_alive())

    def accept_loop(self):
        try:
            while True:
                sock, _ = self.lis.accept()
                peer = _Peer(sock)
                op, rid, body = peer.recv_frame()
                (version,) = struct.unpack_from("<H", body)
                self.hellos.append(version)
                if version > self.NEWEST:
                    sock.sendall(_error_frame(rid, E.FRAME_CODE_OF["VERSION"], f"protocol {version}: this node speaks 2 to {self.NEWEST}"))
                    sock.close()
                    continue
                node = b"old"
                sock.sendall(R.frame(R.OP_WELCOME, rid, struct.pack("<H", version) + struct.pack("<H", len(node)) + node
                                     + struct.pack("<QQQI", 0, 0, 0, 16)))
                try:
                    self.serve(peer)
                except (OSError, EOFError):
                    sock.close()
        except (OSError, EOFError):
            pass

    def serve(self, peer):
        slot = struct.Struct("<BQqB4Q")
        while True:
            op, rid, body = peer.recv_frame()
            self.ops.append(op)
            if op == R.OP_RESERVE:
                (n,) = struct.unpack_from("<I", body, 36)
                ok = struct.pack("<I", n) + b"".join(slot.pack(1, 100 + i, 0, 0, 0, 0, 0, 0) + b"\x00\x00" for i in range(n))
                peer.sock.sendall(R.frame(R.OP_RESERVE_OK, rid, ok))
            elif op == R.OP_COMMIT:
                (n,) = struct.unpack_from("<I", body, 32)
                peer.sock.sendall(R.frame(R.OP_COMMIT_OK, rid, struct.pack("<I", n) + bytes([1]) * n))
            elif op == R.OP_PUT and self.NEWEST >= F.SINCE[R.OP_PUT]:
                self.bodies.append(body)
                peer.sock.sendall(R.frame(R.OP_PUT_OK, rid, struct.pack("<BBH", 1, 1, 0)))
            elif op != R.OP_WRITE:
                peer.sock.sendall(_error_frame(rid, 2, f"op {op} needs protocol 3"))

    def namespace(self):
        """A Namespace on a stub client, and a node whose raw session is the
        scripted node's."""
        from strata_client.namespace import Namespace

        class Stub:  # the parts of a Client the raw paths use
            raw_enabled = True

            def __init__(self):
                self.stats = {}

            def _count(self, k, n=1):
                self.stats[k] = self.stats.get(k, 0) + n

        class FakeNode:
            pass

        node = FakeNode()
        node.raw = self.session = R.RawSession(self.lis.getsockname(), "", "old")
        return Namespace(Stub(), small_descriptor()), node

    def put(self, ns, node, pages):
        views = [memoryview(p.data) for p in pages]
        return ns._put_raw(node, pages, views, [checksum("crc32c", v) for v in views], 5.0)

class OlderNodeTest(_ScriptedOldNode, unittest.TestCase):
    """A node of protocol 2: the session says hello with each older version
    in turn, then with 2 only, and uses only the v2 ops."""

    def test_falls_back_to_v2(self):
        ns, node = self.namespace()
        s, client = node.raw, ns.client
        pages = [Page(bytes([i]) * 32, os.urandom(ns.page_bytes)) for i in range(3)]
        res = self.put(ns, node, pages)
        self.assertEqual([r.status for r in res], ["COMMITTED"] * 3)
        self.assertEqual(self.hellos, list(range(F.PROTOCOL_VERSION, 1, -1)))
        self.assertEqual(s.version, 2)
        self.assertEqual(client.stats, {"raw_puts": 1})
        self.assertEqual(self.ops, [R.OP_RESERVE, R.OP_WRITE, R.OP_WRITE, R.OP_WRITE, R.OP_COMMIT])
        # A page with a cost hint is not put on the plane (a version-2
        # frame cannot carry the hint): the caller puts it over gRPC.
        hinted = [Page(b"\x09" * 32, os.urandom(ns.page_bytes), cost_hint=1e9)]
        self.assertEqual(self.put(ns, node, hinted), [])
        self.assertEqual(len(self.ops), 5)
        # A lookup is not tried on the plane: the caller asks gRPC.
        self.assertFalse(ns._lookup_raw(node, [p.key for p in pages], [False] * 3, [], [0, 1, 2], False, 0, 5.0))
        conn = s.acquire()
        self.assertEqual(conn.version, 2)
        with self.assertRaises(E.InvalidArgumentError):
            conn.lookup(ns.id, [pages[0].key], False)
        s.release(conn)
        self.assertEqual(self.hellos, list(range(F.PROTOCOL_VERSION, 1, -1)))  # the pooled connection, no new dial
        self.assertEqual(len(self.ops), 5)


class NodeBeforeCostHintsTest(_ScriptedOldNode, unittest.TestCase):
    """A scripted node of the version before cost hints: the session says
    hello with it after one refusal, puts pages without a hint as Put
    frames laid out for that version, and leaves a batch with a hint to
    gRPC."""

    NEWEST = F.COST_HINT_VERSION - 1

    def test_put_frames_of_the_older_layout(self):
        ns, node = self.namespace()
        pages = [Page(bytes([i + 1]) * 32, os.urandom(ns.page_bytes)) for i in range(2)]
        self.assertEqual([r.status for r in self.put(ns, node, pages)], ["COMMITTED"] * 2)
        self.assertEqual(self.hellos, list(range(F.PROTOCOL_VERSION, self.NEWEST - 1, -1)))
        self.assertEqual(node.raw.version, self.NEWEST)
        self.assertEqual(self.ops, [R.OP_PUT, R.OP_PUT])
        for p, body in zip(pages, self.bodies):
            f = F.decode_body(R.OP_PUT, body, self.NEWEST)
            self.assertEqual((f["page"]["key"], f["data"]), (p.key, p.data))
            self.assertNotIn("cost_hint", f["page"])
        self.assertEqual(self.put(ns, node, [Page(b"\x09" * 32, os.urandom(ns.page_bytes), cost_hint=1e9)]), [])
        self.assertEqual(len(self.ops), 2)


class NodeBeforeEventsTest(_ScriptedOldNode, unittest.TestCase):
    """A scripted node of the version before event info: pages without
    any go as Put frames of its layout, and a batch with a page's event
    info is left to gRPC, which carries it, never sent without it."""

    NEWEST = F.EVENT_VERSION - 1

    def test_event_info_waits_for_its_version(self):
        ns, node = self.namespace()
        pages = [Page(bytes([i + 1]) * 32, os.urandom(ns.page_bytes), cost_hint=2e9) for i in range(2)]
        self.assertEqual([r.status for r in self.put(ns, node, pages)], ["COMMITTED"] * 2)
        self.assertEqual(node.raw.version, self.NEWEST)
        for p, body in zip(pages, self.bodies):
            f = F.decode_body(R.OP_PUT, body, self.NEWEST)
            self.assertEqual((f["page"]["key"], f["page"]["cost_hint"], f["data"]), (p.key, 2e9, p.data))
            self.assertNotIn("tokens", f["page"])
        with_tokens = [Page(b"\x09" * 32, os.urandom(ns.page_bytes))]
        got = ns._put_raw(node, with_tokens, [memoryview(p.data) for p in with_tokens],
                          [checksum("crc32c", p.data) for p in with_tokens], 5.0, [EventInfo(tokens=[1, 2, 3])])
        self.assertEqual(got, [])
        self.assertEqual(len(self.ops), 2)


class AddressTest(unittest.TestCase):
    def test_resolve(self):
        self.assertEqual(R.resolve_addr("0.0.0.0:7071", "10.1.2.3:7070"), ("10.1.2.3", 7071))
        self.assertEqual(R.resolve_addr("[::]:7071", "[fe80::1]:7070"), ("fe80::1", 7071))
        self.assertEqual(R.resolve_addr(":7071", "node-a:7070"), ("node-a", 7071))
        self.assertEqual(R.resolve_addr("10.9.9.9:7071", "10.1.2.3:7070"), ("10.9.9.9", 7071))
        self.assertEqual(R.resolve_addr("[fe80::2]:7", "x:1"), ("fe80::2", 7))
        for bad in ("", "nohost", "1.2.3.4:0", "1.2.3.4:x", "1.2.3.4:70000", "::1:5"):
            self.assertIsNone(R.resolve_addr(bad, "10.1.2.3:7070"), bad)


if __name__ == "__main__":
    unittest.main()
