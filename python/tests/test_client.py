"""The client against a real stratad: round trip, hit prefix, leases,
caller buffers, errors mapped from ErrorInfo, and Go/Python key agreement."""

import hashlib
import os
import socket
import threading
import unittest

from _support import Node, OneNodeTest, go_pattern, gowriter, small_descriptor
from strata_client import Client, Descriptor, Page, ScatterBuffer
from strata_client import errors as E


class ChainDepthTest(unittest.TestCase):
    def test_chain_depths(self):
        from strata_client.client import chain_pages, with_chain_depths
        keys = [bytes([i + 1]) * 32 for i in range(7)]
        pages = chain_pages(keys[:5], [b""] * 5) + [
            Page(key=keys[5], data=b"", parent=keys[1], depth=2),
            Page(key=keys[6], data=b"", parent=keys[5], depth=3),
        ]
        got = with_chain_depths(pages)
        self.assertEqual([p.chain_depth for p in got], [4, 4, 4, 4, 0, 3, 0])
        self.assertEqual([p.chain_depth for p in pages], [0] * 7)  # the caller's pages are unchanged


class SingleNodeTest(OneNodeTest):
    """One node, one client, one namespace."""

    def tokens(self, n, base):
        return [base + i for i in range(n)]

    def test_put_drops_pages_past_one_stored_nowhere(self):
        # A page of the sequence is stored nowhere (here: its checksum is
        # wrong, so the node refuses it): the pages the put committed past
        # it are orphans from birth, and the put deletes them again and
        # answers them REJECTED; a page before it stays.
        import strata_client.namespace as nsmod

        # The Python planes, whose checksum this test replaces.
        c = Client(self.node.addr, node_timeout=5.0, refresh_interval=0, native=False)
        self.addCleanup(c.close)
        ns = c.open(small_descriptor())
        keys = ns.page_keys(self.tokens(16 * 4, 7000))
        data = [os.urandom(ns.page_bytes) for _ in keys]
        real = nsmod.checksum

        def wrong_for_page_1(algo, view):
            s = real(algo, view)
            return bytes(b ^ 0xFF for b in s) if bytes(view) == data[1] else s

        nsmod.checksum = wrong_for_page_1
        try:
            res = ns.put_chain(keys, data)
        finally:
            nsmod.checksum = real
        self.assertEqual([r.status for r in res], ["COMMITTED", "CHECKSUM_MISMATCH", "REJECTED", "REJECTED"], res)
        self.assertEqual(ns.lookup(keys).present, [True, False, False, False])
        # Put whole, the sequence is stored.
        self.assertEqual([r.status for r in ns.put_chain(keys, data)], ["EXISTS", "COMMITTED", "COMMITTED", "COMMITTED"])

    def test_round_trip_and_hit_prefix(self):
        ns = self.ns
        self.assertEqual(ns.page_bytes, 2 * 2 * 2 * 32 * 2 * 16)
        toks = self.tokens(16 * 5 + 3, 1000)  # 5 full pages and a partial one
        keys = ns.page_keys(toks)
        self.assertEqual(len(keys), 5)
        data = [os.urandom(ns.page_bytes) for _ in keys]
        res = ns.put_chain(keys[:3], data[:3])
        self.assertTrue(all(r.stored and r.status == "COMMITTED" for r in res), res)
        self.assertEqual([r.status for r in ns.put_chain(keys[:1], data[:1])], ["EXISTS"])

        hit, present, lease = ns.lookup(keys)
        self.assertEqual((hit, present, lease), (3, [True, True, True, False, False], None))
        out = ns.get(keys)
        self.assertEqual([o is not None for o in out], [True, True, True, False, False])
        for o, d in zip(out[:3], data):
            self.assertEqual(bytes(o), d)

        # A prompt that shares two pages, then diverges.
        other = toks[:32] + self.tokens(48, 5)
        okeys = ns.page_keys(other)
        self.assertEqual(okeys[:2], keys[:2])
        self.assertEqual(ns.exists(okeys), 2)

        # A gap: page 4 present but page 3 absent still ends the prefix at 3.
        ns.put([Page(keys[4], data[4], parent=keys[3], depth=4)])
        r = ns.lookup(keys)
        self.assertEqual(r.hit_prefix, 3)
        self.assertEqual(r.present, [True, True, True, False, True])

        self.assertEqual(ns.delete(keys[1:2]), 1)
        self.assertEqual(ns.exists(keys), 1)

    def test_lease_and_caller_buffers(self):
        ns = self.ns
        keys = ns.page_keys(self.tokens(64, 77_000))
        data = [os.urandom(ns.page_bytes) for _ in keys]
        ns.put_chain(keys, data)
        r = ns.lookup(keys, lease=True, ttl_ms=5000)
        self.assertEqual(r.hit_prefix, 4)
        self.assertIsNotNone(r.lease)
        self.assertEqual(r.lease.pages, 4)
        self.assertGreater(r.lease.expires_unix_ms, 0)
        r.lease.renew(ttl_ms=5000)
        bufs = [bytearray(ns.page_bytes), memoryview(bytearray(ns.page_bytes))]
        try:
            import numpy as np

            bufs.append(np.zeros(ns.page_bytes // 2, dtype=np.uint16))
        except ImportError:
            bufs.append(bytearray(ns.page_bytes))
        half = ns.page_bytes // 2
        k_part, v_part = bytearray(half), bytearray(ns.page_bytes - half)
        bufs.append(ScatterBuffer([k_part, v_part]))
        out = ns.get(keys, bufs, lease=r.lease)
        self.assertTrue(all(o is b for o, b in zip(out, bufs)))
        self.assertEqual(bytes(bufs[0]), data[0])
        self.assertEqual(bytes(bufs[1]), data[1])
        self.assertEqual(bytes(memoryview(bufs[2]).cast("B")), data[2])
        self.assertEqual(bytes(k_part) + bytes(v_part), data[3])
        r.lease.release()
        with self.assertRaises(E.InvalidArgumentError):
            ns.get(keys[:1], [bytearray(10)])

    def test_empty_calls(self):
        self.assertEqual(self.ns.lookup([]).hit_prefix, 0)
        self.assertEqual(self.ns.get([]), [])
        self.assertEqual(self.ns.put([]), [])
        self.assertEqual(self.ns.delete([]), 0)

    def test_errors(self):
        ns = self.ns
        with self.assertRaises(E.InvalidArgumentError):
            ns.put([Page(ns.page_keys(self.tokens(16, 9))[0], b"short")])
        with self.assertRaises(E.InvalidArgumentError):
            ns.lookup([b"not 32 bytes"])
        with self.assertRaises(E.InvalidArgumentError):
            self.client.open(Descriptor(tenant="acme", model="m"))  # no page_tokens / geometry
        # An expired (here: released) lease named by a Get is an error the
        # caller must see, mapped from the node's ErrorInfo reason.
        keys = ns.page_keys(self.tokens(16, 123_456))
        ns.put_chain(keys, [os.urandom(ns.page_bytes)])
        r = ns.lookup(keys, lease=True)
        r.lease.release()
        with self.assertRaises((E.LeaseExpiredError, E.LeaseNotFoundError)) as cm:
            ns.get(keys, lease=r.lease)
        self.assertIn(cm.exception.reason, ("LEASE_EXPIRED", "LEASE_NOT_FOUND"))

    def test_version_mismatch_from_node(self):
        # The node recomputes the ID from the descriptor; a client that sends
        # a different expected ID gets VERSION_MISMATCH, never a silent fork.
        from strata_client._proto import strata_pb2 as pb
        import grpc

        d = small_descriptor(model="version/check")
        ch = grpc.insecure_channel(self.node.addr)
        try:
            stub = _support_stub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.OpenNamespace(pb.OpenNamespaceRequest(protocol=pb.PROTOCOL_VERSION_1, descriptor=d.to_proto(),
                                                           expected_id=hashlib.sha256(b"other").digest()), timeout=5)
            err = E.from_rpc("open", cm.exception)
            self.assertIsInstance(err, E.VersionMismatchError)
            self.assertEqual(err.reason, "VERSION_MISMATCH")
        finally:
            ch.close()

    def test_page_format(self):
        # The node computes the ID from the wire descriptor, page_format
        # included (open sends expected_id, so a node that left it out would
        # answer VERSION_MISMATCH): two formats are two namespaces, each
        # readable, and the node refuses a format of the wrong size.
        from strata_client._proto import strata_pb2 as pb
        import grpc

        formats = ("kv:L2.S2.T16.H2.D32:bf16", "kv:S2.L2.T16.H2.D32:bf16")
        nss = [self.client.open(small_descriptor(page_format=f)) for f in formats]
        self.assertEqual(len({self.ns.id, nss[0].id, nss[1].id}), 3)
        for ns, f in zip(nss, formats):
            self.assertEqual(ns.page_format, f)
            keys = ns.page_keys(self.tokens(16 * 2, 31_000))
            data = [os.urandom(ns.page_bytes) for _ in keys]
            self.assertTrue(all(r.stored for r in ns.put_chain(keys, data)))
            self.assertEqual([bytes(g) for g in ns.get(keys)], data)
        bad = small_descriptor(page_format="kv:L2.S2.T16.H2.D32:fp32")
        why = "page_format: describes 16384 bytes, the page is 8192 bytes"
        with self.assertRaisesRegex(E.InvalidArgumentError, why):
            self.client.open(bad)
        ch = grpc.insecure_channel(self.node.addr)
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                _support_stub(ch).OpenNamespace(pb.OpenNamespaceRequest(protocol=pb.PROTOCOL_VERSION_1,
                                                                        descriptor=bad.to_proto()), timeout=5)
            err = E.from_rpc("open", cm.exception)
            self.assertIsInstance(err, E.InvalidArgumentError)
            self.assertIn(why, str(err))
        finally:
            ch.close()

    def test_cross_language_keys(self):
        self.cross_language_keys("sha256-chain")

    def test_cross_language_keys_sha256_blocks(self):
        # The sha256-blocks key format: a namespace of its own, whose keys
        # Go (SHA extensions or crypto/sha256) and Python (OpenSSL through
        # ctypes) compute alike.
        ns = self.cross_language_keys("sha256-blocks")
        self.assertNotEqual(ns.id, self.ns.id)

    def cross_language_keys(self, key_format):
        # Go writes pages through the Go cluster client; Python computes the
        # same keys itself and reads the bytes back.
        fmt = ("-key-format", key_format)
        toks = self.tokens(16 * 4, 424_242)
        out = gowriter("-addr", self.node.addr, "-mode", "put", "-seed", "11", "-tokens", ",".join(map(str, toks)), *fmt)
        ns = self.client.open(small_descriptor(key_format=key_format))
        self.assertEqual(out["namespace_id"], ns.id.hex())
        self.assertEqual(out["page_bytes"], ns.page_bytes)
        keys = ns.page_keys(toks)
        self.assertEqual([k.hex() for k in keys], out["keys"])
        self.assertEqual(out["results"], ["COMMIT_STATUS_COMMITTED"] * 4)
        self.assertEqual(ns.exists(keys), 4)
        got = ns.get(keys)
        for i, g in enumerate(got):
            self.assertEqual(bytes(g), go_pattern(11, i, ns.page_bytes))

        # The reverse: Python writes, Go computes the keys and reads.
        toks2 = self.tokens(16 * 3, 515_151)
        keys2 = ns.page_keys(toks2)
        data2 = [os.urandom(ns.page_bytes) for _ in keys2]
        self.assertTrue(all(r.stored for r in ns.put_chain(keys2, data2)))
        back = gowriter("-addr", self.node.addr, "-mode", "get", "-tokens", ",".join(map(str, toks2)), *fmt)
        self.assertEqual(back["keys"], [k.hex() for k in keys2])
        self.assertEqual(back["hit_prefix"], 3)
        self.assertEqual(back["found"], [True] * 3)
        self.assertEqual(back["sha256"], [hashlib.sha256(d).hexdigest() for d in data2])
        return ns


def _support_stub(ch):
    from strata_client._proto import strata_pb2_grpc as pbg

    return pbg.StrataStub(ch)


class AuthTest(unittest.TestCase):
    def test_tenant_tokens(self):
        node = Node(extra_args=["--tenant-token", "acme=s3cret", "--tenant-token", "other=t0ken"])
        try:
            with self.assertRaises(E.UnauthenticatedError):
                Client(node.addr, token="wrong", refresh_interval=0)
            with Client(node.addr, token="t0ken", refresh_interval=0) as c:
                with self.assertRaises(E.TenantDeniedError):
                    c.open(small_descriptor())  # tenant acme, token of "other"
            with Client(node.addr, token="s3cret", refresh_interval=0) as c:
                ns = c.open(small_descriptor())
                keys = ns.page_keys(list(range(16)))
                self.assertTrue(ns.put_chain(keys, [bytes(ns.page_bytes)])[0].stored)
                self.assertEqual(ns.exists(keys), 1)
        finally:
            node.stop()


class _FlipProxy:
    """A TCP proxy on 127.0.0.1 in front of one node. While armed, it
    flips the last byte of the first occurrence of ``marker`` in the bytes
    the node sends back (the marker found whole across reads), once; the
    client's bytes pass untouched."""

    def __init__(self, marker: bytes):
        self.marker = marker
        self.target = None
        self.armed = False
        self.flips = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ls = socket.socket()
        self._ls.bind(("127.0.0.1", 0))
        self._ls.listen(16)
        self.addr = "127.0.0.1:%d" % self._ls.getsockname()[1]
        self._socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            if self.target is None:
                c.close()
                continue
            try:
                u = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            for s_ in (c, u):
                s_.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socks += [c, u]
            threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True), daemon=True).start()

    def _pump(self, src, dst, downstream):
        tail = b""
        n = len(self.marker)
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if downstream:
                    window = tail + data
                    with self._lock:
                        i = window.find(self.marker) if self.armed else -1
                        if i >= 0:
                            # The marker's last byte is in this read (else it
                            # was found whole before).
                            j = i + n - 1 - len(tail)
                            data = data[:j] + bytes([data[j] ^ 0xFF]) + data[j + 1:]
                            self.armed = False
                            self.flips += 1
                    tail = window[-(n - 1):]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s_ in (src, dst):
                try:
                    s_.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self._ls.close()
        for s_ in self._socks:
            try:
                s_.close()
            except OSError:
                pass


class GrpcChecksumTest(unittest.TestCase):
    def test_grpc_checksum_mismatch_is_a_miss(self):
        # The gRPC counterpart of test_raw's test_checksum_mismatch_is_a_miss:
        # the client on gRPC only (raw=False, and the node serves no raw
        # plane), its gRPC connection through a proxy that flips one byte of
        # one page's data in the HTTP/2 stream. The page's digest no longer
        # matches the checksum in its header: that page is a miss, counted
        # in checksum_failures; the other page of the same get is a hit.
        marker = hashlib.sha256(b"strata grpc checksum marker").digest()[:16]
        proxy = _FlipProxy(marker)
        # The node advertises the proxy: the client dials the view's address.
        node = Node(extra_args=["--advertise", proxy.addr, "--raw-listen", "off"])
        try:
            host, port = node.addr.rsplit(":", 1)
            proxy.target = (host, int(port))
            with Client(proxy.addr, raw=False, refresh_interval=0, node_timeout=5.0, native=False) as c:
                ns = c.open(small_descriptor())
                self.assertEqual([n.address for n in c._nodes.values()], [proxy.addr])
                keys = ns.page_keys(list(range(3000, 3000 + 16 * 2)))
                pb = ns.page_bytes
                bad = bytearray(os.urandom(pb))
                # The marker at several places, so that one lies whole inside
                # a DATA frame's payload wherever the frame headers fall.
                for off in range(256, pb - 256, pb // 4):
                    bad[off:off + 16] = marker
                bad = bytes(bad)
                good = os.urandom(pb)
                self.assertNotIn(marker, good)
                self.assertTrue(all(r.stored for r in ns.put_chain(keys, [bad, good])))

                before = dict(c.stats)
                with proxy._lock:
                    proxy.armed = True
                out = ns.get(keys)
                self.assertEqual(proxy.flips, 1)
                self.assertEqual([o is not None for o in out], [False, True], "found per page: the page with a flipped byte must be a miss")
                self.assertEqual(bytes(out[1]), good)
                self.assertEqual(c.stats["checksum_failures"], before["checksum_failures"] + 1)
                self.assertEqual(c.stats["raw_reads"], 0)

                # Nothing flipped: the node's copy is whole, the page a hit.
                out = ns.get(keys)
                self.assertEqual([bytes(o) for o in out], [bad, good])
                self.assertEqual(c.stats["checksum_failures"], before["checksum_failures"] + 1)
        finally:
            node.stop()
            proxy.close()


if __name__ == "__main__":
    unittest.main()
