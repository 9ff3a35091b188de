#!/usr/bin/env python3
"""Get throughput of the Python client over gRPC and over the raw tcp data
plane, side by side in one run.

Two clients on the same node, one with ``raw=False`` (gRPC) and one with
the raw plane, read the same working set of pages into reused buffers,
taking turns round by round (the order alternates, so neither always runs
first). Each get's pages are verified (CRC-32C) as in normal use. Prints
pages per second and MB/s per round, then the medians and the ratio raw ÷
gRPC.

A third turn measures this interpreter's loopback limit for the same
pattern: a server process answers each 8-byte request with one page,
which the client receives with ``recv_into`` into a reused buffer and
checks with the same CRC-32C (``--no-limit`` leaves it out). raw ÷ limit
is then what the protocol, the node and the client cost on top of what
Python can do with one socket at all.

    /usr/bin/python3 python/bench_raw.py                  # starts a node (go build)
    /usr/bin/python3 python/bench_raw.py --addr 127.0.0.1:7070

Then lookups of ``--lookup-keys`` keys (default 1,000: the working set's
keys first, then keys the node lacks) over gRPC and over the raw plane's
Lookup frame (protocol 3), taking turns the same way (0: left out).

Not run by the tests.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from strata_client import Client, Descriptor  # noqa: E402
from strata_client.checksum import HAVE_FAST_CRC32C, crc32c  # noqa: E402

# The loopback limit's page server: answers every 8 bytes with one page.
_PAGE_SERVER = """
import os, socket, sys
size = int(sys.argv[1])
page = os.urandom(size)
lis = socket.create_server(("127.0.0.1", 0))
print(lis.getsockname()[1], flush=True)
c, _ = lis.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
req = bytearray(8)
while True:
    got = 0
    while got < 8:
        k = c.recv_into(memoryview(req)[got:])
        if not k:
            sys.exit(0)
        got += k
    c.sendall(page)
"""


def descriptor(page_kib: int) -> Descriptor:
    """A namespace whose pages are page_kib KiB: 2 (K, V) x layers x 2
    heads x 32 dims x 2 bytes x 16 tokens."""
    layers = page_kib * 1024 // (2 * 2 * 32 * 2 * 16)
    if layers < 1 or layers * 2 * 2 * 32 * 2 * 16 != page_kib * 1024:
        raise SystemExit(f"--page-kib must be a multiple of 8, got {page_kib}")
    return Descriptor(tenant="bench", model="bench/raw", model_revision="r1", engine="bench", dtype="bf16",
                      page_tokens=16, num_layers=layers, num_kv_heads=2, head_dim=32)


def run_lookups(ns, keys: List[bytes], want: int, seconds: float) -> float:
    """Lookup all keys, over and over, for about seconds; lookups/s."""
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        if ns.lookup(keys).hit_prefix != want:
            raise SystemExit("lookup: the working set must stay in the node")
        n += 1
        now = time.perf_counter()
        if now >= end:
            return n / (now - t0)


def run_gets(ns, keys: List[bytes], bufs: List[bytearray], batch: int, seconds: float) -> float:
    """Get keys round-robin, batch at a time, for about seconds; pages/s."""
    pages = 0
    i = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        ks = [keys[(i + j) % len(keys)] for j in range(batch)]
        out = ns.get(ks, bufs[:batch])
        if any(o is None for o in out):
            raise SystemExit("a page was not found: the working set must stay in the node")
        pages += batch
        i += batch
        now = time.perf_counter()
        if now >= end:
            return pages / (now - t0)


class Limit:
    """The loopback limit: one page per request from a server process."""

    def __init__(self, size: int):
        self.size = size
        self.proc = subprocess.Popen([sys.executable, "-c", _PAGE_SERVER, str(size)], stdout=subprocess.PIPE)
        port = int(self.proc.stdout.readline())
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = memoryview(bytearray(size))

    def run(self, seconds: float) -> float:
        """Pages per second for about seconds."""
        pages = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        req = bytes(8)
        while True:
            self.sock.sendall(req)
            got = 0
            while got < self.size:
                k = self.sock.recv_into(self.buf[got:])
                if not k:
                    raise SystemExit("the page server hung up")
                got += k
            crc32c(self.buf)
            pages += 1
            now = time.perf_counter()
            if now >= end:
                return pages / (now - t0)

    def close(self) -> None:
        self.sock.close()
        self.proc.wait(timeout=5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", default="", help="a running node's gRPC address (default: start one with go build)")
    ap.add_argument("--page-kib", type=int, default=256, help="page size in KiB (default 256)")
    ap.add_argument("--pages", type=int, default=64, help="working set in pages (default 64)")
    ap.add_argument("--batch", type=int, default=1, help="keys per get (default 1)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds, each one turn per path (default 6)")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per turn (default 1)")
    ap.add_argument("--no-limit", action="store_true", help="leave out the loopback limit")
    ap.add_argument("--lookup-keys", type=int, default=1000, help="keys per lookup in the lookup turns (default 1000; 0: none)")
    args = ap.parse_args()

    node = None
    addr = args.addr
    if not addr:
        sys.path.insert(0, os.path.join(HERE, "tests"))
        from _support import Node  # builds stratad with go build

        node = Node(host_bytes="1GiB")
        addr = node.addr
    try:
        bench(addr, args)
    finally:
        if node is not None:
            node.stop()


def bench(addr: str, args) -> None:
    d = descriptor(args.page_kib)
    with Client(addr, raw=False, node_timeout=10.0) as cg, Client(addr, node_timeout=10.0) as cr:
        ng, nr = cg.open(d), cr.open(d)
        if not cr.raw_active:
            raise SystemExit(f"the node at {addr} serves no raw data plane")
        keys = nr.page_keys(list(range(16 * args.pages)))
        data = [os.urandom(nr.page_bytes) for _ in keys]
        res = nr.put_chain(keys, data)
        if not all(r.stored for r in res):
            raise SystemExit(f"put failed: {[r for r in res if not r.stored][:3]}")
        bufs = [bytearray(nr.page_bytes) for _ in range(args.batch)]
        limit: Optional[Limit] = None if args.no_limit else Limit(nr.page_bytes)
        try:
            turns = [("grpc", lambda s: run_gets(ng, keys, bufs, args.batch, s)),
                     ("raw", lambda s: run_gets(nr, keys, bufs, args.batch, s))]
            if limit is not None:
                turns.append(("limit", limit.run))
            for _, fn in turns:  # warm up: connections, caches
                fn(0.2)
            mb = nr.page_bytes / 1e6
            print(f"{args.page_kib} KiB pages, {args.pages}-page working set, {args.batch} key(s) per get, "
                  f"{args.rounds} rounds of {args.seconds:g}s per path")
            rates = rounds(turns, args, lambda v: f"{v:6.0f} pages/s {v * mb:5.0f} MB/s")
        finally:
            if limit is not None:
                limit.close()
        med = {name: statistics.median(v) for name, v in rates.items()}
        print("median: " + ", ".join(f"{n} {v:.0f} pages/s ({v * mb:.0f} MB/s)" for n, v in med.items()))
        ratios = [f"raw / grpc = {med['raw'] / med['grpc']:.2f}"]
        if "limit" in med:
            ratios += [f"raw / limit = {med['raw'] / med['limit']:.2f}", f"grpc / limit = {med['grpc'] / med['limit']:.2f}"]
        print("; ".join(ratios))
        print(f"raw reads {cr.stats['raw_reads']}, fallbacks {cr.stats['raw_fallbacks']}, "
              f"checksum failures {cr.stats['checksum_failures'] + cg.stats['checksum_failures']}, "
              f"crc32c {'C extension' if HAVE_FAST_CRC32C else 'pure Python'}")
        if args.lookup_keys > 0:
            lkeys = keys[:args.lookup_keys] + [k for k in nr.page_keys(list(range(10**6, 10**6 + 16 * args.lookup_keys)))][:max(0, args.lookup_keys - len(keys))]
            want = min(len(keys), args.lookup_keys)
            turns = [("grpc", lambda s: run_lookups(ng, lkeys, want, s)), ("raw", lambda s: run_lookups(nr, lkeys, want, s))]
            for _, fn in turns:
                fn(0.2)
            print(f"lookups of {len(lkeys)} keys ({want} present):")
            lr = rounds(turns, args, lambda v: f"{v:6.0f} lookups/s")
            lm = {name: statistics.median(v) for name, v in lr.items()}
            print("median: " + ", ".join(f"{n} {v:.0f} lookups/s ({1e3 / v:.2f} ms each)" for n, v in lm.items())
                  + f"; raw / grpc = {lm['raw'] / lm['grpc']:.2f}; raw lookups {cr.stats['raw_lookups']}")


def rounds(turns: List[Tuple[str, object]], args, show) -> dict:
    """Run every turn once per round for args.seconds, the order rotating
    round by round, printing each round's rates (show formats one); returns
    each turn's rates."""
    rates = {name: [] for name, _ in turns}
    for r in range(args.rounds):
        k = r % len(turns)
        line = []
        for name, fn in turns[k:] + turns[:k]:
            v = fn(args.seconds)
            rates[name].append(v)
            line.append(f"{name} {show(v)}")
        print(f"round {r + 1}: " + " | ".join(line))
    return rates


if __name__ == "__main__":
    main()
