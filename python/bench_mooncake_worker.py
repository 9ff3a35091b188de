"""Mooncake Store's side of bench_batch.py (not a test): run with the
interpreter of the venv benchmarks/mooncake-venv.sh builds (the
mooncake-transfer-engine-non-cuda wheel), standard library otherwise.

    python bench_mooncake_worker.py bench --page-bytes 8388608 --pages 128 --rounds 5

The deployment is strata-load's, by its own driver (benchmarks/load/pydriver.py
"serve"; benchmarks/README.md, "Mooncake"): a mooncake_master from the wheel
on 127.0.0.1 (free ports) and a store server, a process of its own that
mounts the global segment every page is stored in,
protocol tcp, metadata P2PHANDSHAKE. This process is the client, like an
engine's: a MooncakeDistributedStore with no segment of its own, so every
page crosses the TCP transport to the store server. Its page buffers are
registered (register_buffer), one region for the pages it puts and one for
the pages it reads, and a batch is one batch_put_from / batch_get_into.

Gets read the same working set (stored once, then read once unmeasured);
puts store fresh keys, removed after each round off the clock (they were
never read, so no read lease holds them); one unmeasured put round warms
the segment first. Each case runs alone and beside a busy pure-Python
thread (bench_common.Busy); "cpu" is this process's CPU time less the
busy thread's own. The result is one JSON object on stdout; progress and
Mooncake's logs go to stderr.
"""

import argparse
import ctypes
import json
import os
import socket
import subprocess
import sys


from bench_common import beside  # noqa: E402  (python/, this script's directory)

# strata-load's driver, whose "serve" deploys the master and store server.
PYDRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "load", "pydriver.py")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def bench(a):
    from mooncake.store import MooncakeDistributedStore

    n, pages = a.page_bytes, a.pages
    total = n * pages
    master = "127.0.0.1:%d" % free_port()
    # The working set and one put round's pages, with room under the
    # master's eviction watermark (strata-load's sizing).
    segment = (2 * total) * 5 // 4 + (64 << 20)
    srv = subprocess.Popen([sys.executable, PYDRIVER, "serve", "--master", master,
                            "--metrics-port", str(free_port()), "--segment", str(segment)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr)
    try:
        line = srv.stdout.readline().decode().strip()
        if not line.startswith("ready"):
            raise RuntimeError("store server did not start: %r (exit %s)" % (line, srv.poll()))
        store = MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master)
        if rc != 0:
            raise RuntimeError("client setup: %d" % rc)
        src = (ctypes.c_char * total)()
        dst = (ctypes.c_char * total)()
        ctypes.memset(src, 0x5A, total)
        ctypes.memset(dst, 0, total)  # touched once, as the strata side's buffers
        sp, dp = ctypes.addressof(src), ctypes.addressof(dst)
        for p in (sp, dp):
            rc = store.register_buffer(p, total)
            if rc != 0:
                raise RuntimeError("register_buffer: %d" % rc)
        sptrs = [sp + i * n for i in range(pages)]
        dptrs = [dp + i * n for i in range(pages)]
        sizes = [n] * pages
        wkeys = ["w%d" % i for i in range(pages)]
        seq = [0]

        def put_round():
            seq[0] += 1
            keys = ["p%d-%d" % (seq[0], i) for i in range(pages)]
            return keys

        def do_get():
            res = store.batch_get_into(wkeys, dptrs, sizes)
            bad = [r for r in res if r != n]
            if bad:
                raise RuntimeError("batch_get_into: %d of %d pages failed (%d)" % (len(bad), pages, bad[0]))

        def do_put(keys):
            res = store.batch_put_from(keys, sptrs, sizes)
            bad = [r for r in res if r != 0]
            if bad:
                raise RuntimeError("batch_put_from: %d of %d pages failed (%d)" % (len(bad), pages, bad[0]))

        def remove(keys):
            res = store.batch_remove(keys)
            bad = [r for r in res if r != 0]
            if bad:
                raise RuntimeError("batch_remove: %d of %d failed (%d)" % (len(bad), len(res), bad[0]))

        do_put(wkeys)  # the working set
        do_get()  # warm-up, unmeasured
        k = put_round()
        do_put(k)  # warms the segment, unmeasured
        remove(k)

        out = {"page_bytes": n, "pages": pages, "cases": {}}
        for name in ("get", "get_busy", "put", "put_busy"):
            out["cases"][name] = {"wall": [], "cpu": [], "busy_loops": []}

        def timed(name, fn):
            wall, cpu, loops = beside(fn, name.endswith("_busy"))
            c = out["cases"][name]
            c["wall"].append(wall)
            c["cpu"].append(cpu)
            c["busy_loops"].append(loops)

        for r in range(a.rounds):
            for name in ("get", "get_busy"):
                timed(name, do_get)
            for name in ("put", "put_busy"):
                keys = put_round()
                timed(name, lambda: do_put(keys))
                remove(keys)
            sys.stderr.write("mooncake %d B: round %d/%d\n" % (n, r + 1, a.rounds))
        store.close()
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    finally:
        try:
            srv.stdin.close()
            srv.wait(30)
        except Exception:
            srv.kill()
            srv.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["bench"])
    p.add_argument("--master", default="")
    p.add_argument("--metrics-port", type=int, default=0)
    p.add_argument("--segment", type=int, default=1 << 30)
    p.add_argument("--page-bytes", type=int, default=8 << 20)
    p.add_argument("--pages", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    bench(a)


if __name__ == "__main__":
    main()
