"""Python side of strata-load's Python-driven systems (pyworker.go).

strata-load (Go) runs this file with a Python interpreter in one of two
roles:

  serve    the Mooncake Store deployment of one page size: mooncake_master
           (from the installed wheel) on 127.0.0.1, and in this process a
           store client that mounts the global segment every page is
           stored in (the store server). Prints "ready <master pid>" and
           serves until its standard input closes.
  worker   one closed-loop worker: one client of the system (Mooncake's
           MooncakeDistributedStore, or a plain RESP client of Redis), one
           request in flight. It reads one command a line on standard
           input and answers one line, "ok" or "err <message>":

             prep            store the working set: pages 0..--pages-1
             get I           read page I of the working set into a reused buffer
             put K           store one page under key number K
             look I N        ask about N keys of the working set from I*N on
             put-range A B   put keys numbered A..B-1 (Mooncake: warming the segment, a transfer's producer)
             get-range A B   read keys numbered A..B-1 into a reused buffer (Mooncake: a transfer's consumer)
             del A B         remove the keys numbered A..B-1 that put stored
             flush           drop everything the workload stored (Redis: FLUSHALL)

The Redis worker exists so that Mooncake's figures can be read against
Redis driven the same way (a Python process behind a pipe): its cost over
the Go Redis client is the driver's overhead.

Only loopback addresses are used. Standard library only, plus the mooncake
wheel for the Mooncake roles.
"""

import argparse
import ctypes
import os
import socket
import subprocess
import sys
import time

# OBJECT_HAS_LEASE: Mooncake's answer to removing a key under a read lease.
OBJECT_HAS_LEASE = -706
# LEASED_S bounds how long a removal waits for read leases to end.
LEASED_S = 30


def page_bytes(n):
    buf = (ctypes.c_char * n)()
    ctypes.memset(buf, 0x5A, n)
    return buf


class MooncakeWorker:
    def __init__(self, a):
        from mooncake.store import MooncakeDistributedStore

        self.n = a.page_bytes
        self.prefix = a.prefix
        self.store = MooncakeDistributedStore()
        rc = self.store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 2 * self.n + (16 << 20), "tcp", "", a.master)
        if rc != 0:
            raise RuntimeError("setup: %d" % rc)
        self.src, self.dst = page_bytes(self.n), page_bytes(self.n)
        self.sp, self.dp = ctypes.addressof(self.src), ctypes.addressof(self.dst)
        for p in (self.sp, self.dp):
            rc = self.store.register_buffer(p, self.n)
            if rc != 0:
                raise RuntimeError("register_buffer: %d" % rc)
        self.pages = a.pages

    def wkey(self, i):
        return "%sw%d" % (self.prefix, i)

    def pkey(self, k):
        return "%sp%d" % (self.prefix, k)

    def prep(self):
        for i in range(self.pages):
            rc = self.store.put_from(self.wkey(i), self.sp, self.n)
            if rc != 0:
                return "put %d: %d" % (i, rc)
        return None

    def get(self, i):
        got = self.store.get_into(self.wkey(i % self.pages), self.dp, self.n)
        return None if got == self.n else "get_into: %d" % got

    def put(self, k):
        rc = self.store.put_from(self.pkey(k), self.sp, self.n)
        return None if rc == 0 else "put_from: %d" % rc

    def put_range(self, a, b):
        for k in range(a, b):
            err = self.put(k)
            if err:
                return "key %d: %s" % (k, err)
        return None

    def get_range(self, a, b):
        for k in range(a, b):
            got = self.store.get_into(self.pkey(k), self.dp, self.n)
            if got != self.n:
                return "key %d: get_into: %d" % (k, got)
        return None

    def look(self, i, n):
        keys = [self.wkey((i * n + j) % self.pages) for j in range(n)]
        res = self.store.batch_is_exist(keys)
        hit = sum(1 for r in res if r == 1)
        return None if hit == n else "batch_is_exist: %d of %d" % (hit, n)

    def delete(self, a, b):
        # A key read moments ago is under Mooncake's read lease
        # (kv_lease_ttl, default 5 s): its removal answers OBJECT_HAS_LEASE
        # (-706) until the lease ends, so those are tried again, off the
        # clock, for at most LEASED_S.
        deadline = time.monotonic() + LEASED_S
        for s in range(a, b, 1000):
            keys = [self.pkey(k) for k in range(s, min(b, s + 1000))]
            while keys:
                res = self.store.batch_remove(keys)
                bad = [r for r in res if r not in (0, OBJECT_HAS_LEASE)]
                if bad:
                    return "batch_remove: %d of %d failed (%d)" % (len(bad), len(res), bad[0])
                keys = [k for k, r in zip(keys, res) if r == OBJECT_HAS_LEASE]
                if keys and time.monotonic() > deadline:
                    return "batch_remove: %d keys still leased after %d s" % (len(keys), LEASED_S)
                if keys:
                    time.sleep(0.1)
        return None

    def flush(self):
        return None  # the deployment stops with the workload

    def close(self):
        self.store.close()


class RedisWorker:
    """GET, SET and EXISTS over one socket, RESP by hand."""

    def __init__(self, a):
        host, port = a.redis.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.n = a.page_bytes
        self.prefix = a.prefix
        self.src = bytes(page_bytes(self.n))
        self.dst = bytearray(self.n + 2)
        self.rbuf = b""
        self.pages = a.pages

    def wkey(self, i):
        return "%sw%d" % (self.prefix, i)

    def cmd(self, *words, value=None):
        parts = [b"*%d\r\n" % (len(words) + (value is not None))]
        for w in words:
            w = w.encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(w), w))
        if value is not None:
            parts.append(b"$%d\r\n" % len(value))
            self.s.sendmsg([b"".join(parts), value, b"\r\n"])
        else:
            self.s.sendall(b"".join(parts))

    def line(self):
        while b"\r\n" not in self.rbuf:
            chunk = self.s.recv(4096)
            if not chunk:
                raise EOFError("redis closed the connection")
            self.rbuf += chunk
        ln, self.rbuf = self.rbuf.split(b"\r\n", 1)
        return ln

    def prep(self):
        for i in range(self.pages):
            err = self.put(i)
            if err:
                return err
        return None

    def get(self, i):
        self.cmd("GET", self.wkey(i % self.pages))
        ln = self.line()
        if not ln.startswith(b"$") or int(ln[1:]) != self.n:
            return "GET: %r" % ln[:40]
        mv = memoryview(self.dst)
        have = min(len(self.rbuf), self.n + 2)
        mv[:have] = self.rbuf[:have]
        self.rbuf = self.rbuf[have:]
        while have < self.n + 2:
            have += self.s.recv_into(mv[have:], self.n + 2 - have)
        return None

    def put(self, k):
        # k is a slot of the working set (Go chooses it): SET overwrites.
        self.cmd("SET", self.wkey(k), value=self.src)
        ln = self.line()
        return None if ln == b"+OK" else "SET: %r" % ln

    def look(self, i, n):
        self.cmd("EXISTS", *[self.wkey((i * n + j) % self.pages) for j in range(n)])
        ln = self.line()
        return None if ln == b":%d" % n else "EXISTS: %r of %d" % (ln, n)

    def delete(self, a, b):
        return None

    def flush(self):
        self.cmd("FLUSHALL")
        ln = self.line()
        return None if ln == b"+OK" else "FLUSHALL: %r" % ln

    def close(self):
        self.s.close()


def worker(a):
    w = MooncakeWorker(a) if a.system == "mooncake" else RedisWorker(a)
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    ops = {"get": w.get, "put": w.put, "prep": w.prep, "del": w.delete, "look": w.look,
           "put-range": getattr(w, "put_range", None), "get-range": getattr(w, "get_range", None), "flush": w.flush}
    for raw in sys.stdin.buffer:
        f = raw.split()
        try:
            err = ops[f[0].decode()](*map(int, f[1:]))
        except Exception as e:  # reported on the operation's line
            err = "%s: %s" % (type(e).__name__, e)
        out.write(b"ok\n" if err is None else ("err %s\n" % err.replace("\n", " ")).encode())
        out.flush()
    w.close()


def serve(a):
    import mooncake
    from mooncake.store import MooncakeDistributedStore

    master_bin = os.path.join(os.path.dirname(mooncake.__file__), "mooncake_master")
    host, port = a.master.rsplit(":", 1)
    master = subprocess.Popen(
        [master_bin, "--rpc_address=" + host, "--rpc_port=" + port, "--metrics_host=127.0.0.1",
         "--metrics_port=%d" % a.metrics_port, "--rpc_thread_num=4", "--enable_metric_reporting=false",
         "--logtostderr=false", "--minloglevel=2"],
        stdout=subprocess.DEVNULL, stderr=sys.stderr)
    try:
        store = MooncakeDistributedStore()
        deadline = time.time() + 30
        while True:  # the master may not listen yet
            rc = store.setup("127.0.0.1", "P2PHANDSHAKE", a.segment, 16 << 20, "tcp", "", a.master)
            if rc == 0 or time.time() > deadline or master.poll() is not None:
                break
            time.sleep(0.2)
        if rc != 0:
            raise RuntimeError("store server setup: %d (master exit status %s)" % (rc, master.poll()))
        sys.stdout.write("ready %d\n" % master.pid)
        sys.stdout.flush()
        sys.stdin.read()
        store.close()
    finally:
        master.terminate()
        try:
            master.wait(10)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["serve", "worker"])
    p.add_argument("--system", choices=["mooncake", "redis"], default="mooncake")
    p.add_argument("--master", default="127.0.0.1:50051")
    p.add_argument("--metrics-port", type=int, default=0)
    p.add_argument("--segment", type=int, default=1 << 30)
    p.add_argument("--redis", default="")
    p.add_argument("--page-bytes", type=int, default=0)
    p.add_argument("--pages", type=int, default=1)
    p.add_argument("--prefix", default="")
    a = p.parse_args()
    (serve if a.role == "serve" else worker)(a)


if __name__ == "__main__":
    main()
