"""The Python client's transfer rooms (strata_client.transfer) against real
nodes: a producer and a consumer with clients of their own, the fencing
rules as the client sees them (a busy room, stale attempts, an abort before
publication, a namespace mismatch named and shown to the producer, a page
not committed), each refusal raised as the exception of its reason; and,
on three nodes, that the Python client places a room where the Go client
does (a room the Go client published is found by the Python one) and that
a consumer waiting on a killed owner hears it at once."""

from __future__ import annotations

import threading
import time
import unittest

from _support import Node, gowriter, go_pattern, small_descriptor
from strata_client import Client
from strata_client import errors as E
from strata_client.transfer import room_key


def _tokens(n, seed):
    return [seed * 1000 + i for i in range(n)]


def _pages(ns, n, seed):
    keys = ns.page_keys(_tokens(n * ns.page_tokens, seed))
    data = [bytes((seed + 7 * i + j) % 256 for j in range(ns.page_bytes)) for i in range(len(keys))]
    res = ns.put_chain(keys, data)
    assert all(r.stored for r in res), res
    return keys, data


class _Awaiter(threading.Thread):
    """await_room on a thread: .grant or .error once joined."""

    def __init__(self, client, room, ns, attempt=0, timeout=20.0):
        super().__init__(daemon=True)
        self.args = (client, room, ns, attempt, timeout)
        self.grant = self.error = None
        self.took = None
        self.start()

    def run(self):
        c, room, ns, attempt, timeout = self.args
        t0 = time.monotonic()
        try:
            self.grant = c.await_room(room, ns, attempt=attempt, timeout=timeout)
        except Exception as e:  # the test looks at it
            self.error = e
        self.took = time.monotonic() - t0


def _wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class RoomsTest(unittest.TestCase):
    """One node; a producer client and a consumer client."""

    @classmethod
    def setUpClass(cls):
        cls.node = Node()
        cls.prod = Client(cls.node.addr, node_timeout=5.0)
        cls.cons = Client(cls.node.addr, node_timeout=5.0)
        cls.pns = cls.prod.open(small_descriptor())
        cls.cns = cls.cons.open(small_descriptor())

    @classmethod
    def tearDownClass(cls):
        cls.prod.close()
        cls.cons.close()
        cls.node.stop()

    def test_producer_to_consumer(self):
        room = self.prod.open_room("req-1")
        self.assertGreater(room.attempt, 0)
        with self.assertRaises(E.RoomBusyError):
            self.prod.open_room("req-1")
        waiter = _Awaiter(self.cons, "req-1", self.cns)  # the consumer comes first and waits
        keys, data = _pages(self.pns, 5, 1)
        exp = self.prod.publish_room(room, self.pns, keys, 5 * 16)
        self.assertGreater(exp, time.time() * 1000)
        waiter.join(30)
        self.assertIsNone(waiter.error)
        g = waiter.grant
        self.assertEqual((g.room, g.keys, g.tokens, g.bytes), (room, keys, 80, 5 * self.cns.page_bytes))
        self.assertEqual(g.pin_expires_unix_ms, exp)
        got = self.cns.get(g.keys)
        self.assertEqual([bytes(b) for b in got], data)
        info = self.prod.room_status("req-1")
        self.assertEqual((info.state, info.attempt, info.pages, info.tokens), ("loading", room.attempt, 5, 80))
        self.cons.ack_room(g.room)
        info = self.prod.room_status("req-1")
        self.assertEqual((info.state, info.reason), ("acked", ""))
        self.assertTrue(info.terminal)
        # Late calls of the ended attempt change nothing; the room is reusable.
        nxt = self.prod.open_room("req-1")
        self.assertGreater(nxt.attempt, room.attempt)
        with self.assertRaises(E.StaleAttemptError):
            self.cons.ack_room(g.room)
        with self.assertRaises(E.StaleAttemptError):
            self.prod.publish_room(room, self.pns, keys, 80)
        with self.assertRaises(E.StaleAttemptError):
            self.prod.abort_room(room, "user_cancel", "late")
        info = self.prod.room_status("req-1")
        self.assertEqual((info.attempt, info.state), (nxt.attempt, "open"))
        self.assertEqual(self.prod.abort_room(nxt, "producer_failure", "test ends"), "aborted")

    def test_namespace_mismatch_is_named_and_shown_to_the_producer(self):
        room = self.prod.open_room("mismatch")
        keys, _ = _pages(self.pns, 3, 2)
        self.prod.publish_room(room, self.pns, keys, 48)
        other = self.cons.open(small_descriptor(dtype="fp16", model_revision="r2"))
        with self.assertRaises(E.NamespaceMismatchError) as cm:
            self.cons.await_room("mismatch", other, timeout=10)
        self.assertIn("dtype", str(cm.exception))
        self.assertIn("model_revision", str(cm.exception))
        self.assertNotIsInstance(cm.exception, E.UnavailableError)
        info = self.prod.room_status("mismatch")
        self.assertEqual((info.state, info.reason, info.mismatches), ("aborted", "consumer_failure", 1))
        self.assertIn("dtype", info.detail)
        # The refused consumer got nothing: the attempt is over for the right one too.
        with self.assertRaises(E.TransferAbortedError):
            self.cons.await_room("mismatch", self.cns, attempt=room.attempt, timeout=5)

    def test_page_not_committed_pins_nothing(self):
        room = self.prod.open_room("missing")
        keys, _ = _pages(self.pns, 2, 3)
        with self.assertRaises(E.PageNotPresentError):
            self.prod.publish_room(room, self.pns, keys + [b"\xee" * 32], 48)
        failures = self.cons.stats["node_failures"]
        t0 = time.monotonic()
        with self.assertRaises(E.DeadlineError) as cm:
            self.cons.await_room("missing", self.cns, timeout=0.3)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(self.cons.stats["node_failures"], failures, "an await that waited out its timeout is no node failure")
        self.assertEqual(self.prod.room_status("missing").state, "open")
        self.prod.abort_room(room, "producer_failure")

    def test_abort_before_publish_publishes_nothing(self):
        room = self.prod.open_room("aborted")
        self.assertEqual(self.prod.abort_room(room, "user_cancel", "client went away"), "aborted")
        keys, _ = _pages(self.pns, 2, 4)
        with self.assertRaises(E.TransferAbortedError):
            self.prod.publish_room(room, self.pns, keys, 32)
        with self.assertRaises(E.TransferAbortedError):
            self.cons.await_room("aborted", self.cns, attempt=room.attempt, timeout=5)
        info = self.prod.room_status("aborted")
        self.assertEqual((info.state, info.reason, info.detail), ("aborted", "user_cancel", "client went away"))
        with self.assertRaises(E.InvalidArgumentError):
            self.prod.abort_room(room, "bored")

    def test_abort_while_loading_drains_until_ack(self):
        room = self.prod.open_room("drain")
        keys, _ = _pages(self.pns, 2, 5)
        self.prod.publish_room(room, self.pns, keys, 32)
        g = self.cons.await_room("drain", self.cns, timeout=10)
        self.assertEqual(self.prod.abort_room(room, "timeout", "decode too slow"), "draining")
        with self.assertRaises(E.RoomBusyError):
            self.prod.open_room("drain")  # not reusable while the consumer may read
        self.cons.ack_room(g.room)
        info = self.prod.room_status("drain")
        self.assertEqual((info.state, info.reason), ("aborted", "timeout"))
        self.prod.abort_room(self.prod.open_room("drain"), "user_cancel")

    def test_state_and_unknown_room(self):
        room = self.prod.open_room("state")
        with self.assertRaises(E.TransferStateError):
            self.cons.ack_room(room)  # nobody took the pages
        with self.assertRaises(E.NoRoomError):
            self.prod.room_status("never-opened")
        listed = self.prod.list_rooms()
        self.assertEqual(list(listed), [self.prod.members()[0].node_id])
        mine = [r for r in listed[self.prod.members()[0].node_id] if r.room == "state"]
        self.assertEqual([(r.attempt, r.state, r.tenant) for r in mine], [(room.attempt, "open", "")])  # open mode: no tenant
        self.prod.abort_room(room, "user_cancel")

    def test_every_reason_has_its_exception(self):
        # The one error table: each transfer reason maps to its class,
        # whatever the status code, and none of them is a node failure.
        from test_frame import _RpcError

        want = {"ROOM_BUSY": E.RoomBusyError, "STALE_ATTEMPT": E.StaleAttemptError, "NO_ROOM": E.NoRoomError,
                "TRANSFER_ABORTED": E.TransferAbortedError, "TRANSFER_EXPIRED": E.TransferExpiredError,
                "TRANSFER_STATE": E.TransferStateError, "NAMESPACE_MISMATCH": E.NamespaceMismatchError,
                "PIN_QUOTA": E.PinQuotaError, "PAGE_NOT_PRESENT": E.PageNotPresentError,
                "TOO_MANY_ROOMS": E.TooManyRoomsError}
        codes = {"NO_ROOM": "NOT_FOUND", "TRANSFER_ABORTED": "ABORTED", "TRANSFER_EXPIRED": "DEADLINE_EXCEEDED",
                 "PIN_QUOTA": "RESOURCE_EXHAUSTED", "TOO_MANY_ROOMS": "RESOURCE_EXHAUSTED"}
        for reason, cls in want.items():
            with self.subTest(reason=reason):
                err = E.from_rpc("room", _RpcError(reason, codes.get(reason, "FAILED_PRECONDITION")), "n1")
                self.assertIs(type(err), cls)
                self.assertEqual(err.reason, reason)
                self.assertFalse(E.node_failed(err))


class ThreeNodeRoomsTest(unittest.TestCase):
    """Three nodes: the Python client places rooms as the Go client does;
    a consumer waiting on a room whose owner is killed hears it at once."""

    def setUp(self):
        a = Node()
        self.nodes = [a, Node(etcd=a.etcd), Node(etcd=a.etcd)]
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        for n in reversed(self.nodes):  # the first node's etcd last
            n.stop()

    def client(self, node):
        c = Client(node.addr, node_timeout=3.0, quarantine=30.0)
        self.clients.append(c)
        _wait(lambda: (c.refresh(), sum(m.state == "ALIVE" for m in c.members()) == 3)[1], 30, "three alive members")
        return c

    def owner(self, c, room):
        """The node ID the Python client places room on."""
        from strata_client.placement import View

        v = View([(m.node_id, m.weight) for m in c.members() if m.state == "ALIVE"])
        return v.ids[v.owner(room_key(room))]

    def test_rooms_placed_as_the_go_client_places_them(self):
        c = self.client(self.nodes[2])
        ns = c.open(small_descriptor())
        _wait(lambda: gowriter("-addr", self.nodes[0].addr, "-mode", "get", "-tokens", "1") is not None, 30,
              "the Go client to dial")
        owners = set()
        for i in range(6):
            room = f"xlang-room-{i}"
            toks = _tokens(2 * 16, 40 + i)
            out = gowriter("-addr", self.nodes[0].addr, "-mode", "put", "-room", room, "-seed", str(i),
                           "-tokens", ",".join(map(str, toks)))
            g = c.await_room(room, ns, timeout=10)  # found only on the node the Go client chose
            self.assertEqual(g.room.attempt, out["attempt"])
            self.assertEqual([k.hex() for k in g.keys], out["keys"])
            got = ns.get(g.keys)
            self.assertEqual([bytes(b) for b in got], [go_pattern(i, p, ns.page_bytes) for p in range(2)])
            c.ack_room(g.room)
            owner = self.owner(c, room)
            held = {nid for nid, rooms in c.list_rooms().items() if any(r.room == room for r in rooms)}
            self.assertEqual(held, {owner}, f"room {room}")
            self.assertEqual(c.room_status(room).node_id, owner)
            owners.add(owner)
        self.assertGreaterEqual(len(owners), 2, "six rooms on one node: the test needs them spread")

    def test_consumer_hears_a_killed_owner_at_once(self):
        c = self.client(self.nodes[0])
        ns = c.open(small_descriptor())
        ids = {m.address: m.node_id for m in c.members()}
        # A room owned by a node other than the first (whose etcd the others use).
        room = next(f"killed-{i}" for i in range(100) if self.owner(c, f"killed-{i}") != ids[self.nodes[0].addr])
        victim = next(n for n in self.nodes if ids[n.addr] == self.owner(c, room))
        with self.assertRaises(E.NoRoomError) as cm:  # the channel to the owner is up; it holds no record yet
            c.room_status(room)
        self.assertEqual(cm.exception.node, self.owner(c, room))
        w = _Awaiter(c, room, ns, timeout=60)
        victim.kill()
        w.join(30)
        self.assertFalse(w.is_alive())
        self.assertIsInstance(w.error, E.UnavailableError, w.error)
        self.assertLess(w.took, 30, "the consumer learned of the owner's death at its deadline, not at once")
        with self.assertRaises(E.UnavailableError):
            c.open_room(room)


if __name__ == "__main__":
    unittest.main()
