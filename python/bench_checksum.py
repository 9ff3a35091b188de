"""Checksums beside a busy Python thread (not run by the tests).

First the CPU time (thread_time, which other processes on the machine do
not inflate as they do wall time) one batch of pages costs, by default 128
pages of 8 MiB (64 tokens of Llama-3-8B KV in bf16: 2 x 32 layers x 8 KV
heads x 128 x 2 bytes x 64). Then a pure-Python thread counts in a loop
while the main thread checksums pages in a loop for the same wall time. Printed per implementation: the checksum
throughput, and the busy thread's rate as a share of its rate when it runs
alone. A checksum that releases the GIL leaves the busy thread near its
solo rate (on a machine with a free core); one that holds it starves it.

    python python/bench_checksum.py [--page-mib 8] [--batch 128] [--seconds 2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from strata_client import checksum as C  # noqa: E402


def busy_rate(seconds: float, work=None) -> tuple:
    """(busy-thread iterations per second, work calls per second) over seconds."""
    stop = threading.Event()
    count = [0]

    def spin():
        n = 0
        while not stop.is_set():
            n += 1
        count[0] = n

    t = threading.Thread(target=spin)
    t0 = time.perf_counter()
    t.start()
    calls = 0
    if work is None:
        time.sleep(seconds)
    else:
        while time.perf_counter() - t0 < seconds:
            work()
            calls += 1
    stop.set()
    t.join()
    dt = time.perf_counter() - t0
    return count[0] / dt, calls / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--page-mib", type=float, default=8.0)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=128, help="pages per batch for the CPU-time figure")
    ap.add_argument("--pure", action="store_true", help="also the pure-Python CRC (on a 256 KiB page)")
    a = ap.parse_args()
    size = int(a.page_mib * (1 << 20))
    page = bytearray(os.urandom(size))
    view = memoryview(page)
    print(f"python {sys.version.split()[0]}, crc32c backend: {C.backend()}, page {size} bytes, "
          f"{a.seconds:.1f} s per row, {os.cpu_count()} CPUs")
    batch = [memoryview(bytearray(page)) for _ in range(a.batch)]  # distinct pages: no cache reuse
    for algo in ("crc32c", "sha256"):
        c0 = time.thread_time()
        for p in batch:
            C.checksum(algo, p)
        cpu = time.thread_time() - c0
        print(f"{algo}: {a.batch} pages cost {cpu * 1e3:.0f} ms CPU ({a.batch * size / cpu / 1e9:.2f} GB per CPU second)")
    solo, _ = busy_rate(a.seconds)
    print(f"busy thread alone: {solo / 1e6:.2f} M iterations/s")
    rows = [("strata_client crc32c", lambda: C.checksum("crc32c", view), size)]
    if C.HAVE_FAST_CRC32C and C.CRC32C_RELEASES_GIL:
        import crc32c

        rows.append(("crc32c, gil_release_mode=0 (GIL held)", lambda: crc32c.crc32c(view, 0, gil_release_mode=0), size))
    rows.append(("strata_client sha256 (hashlib)", lambda: C.checksum("sha256", view), size))
    if a.pure:
        small = memoryview(bytearray(os.urandom(256 << 10)))
        rows.append(("pure-Python crc32c (256 KiB)", lambda: C._pure_crc32c_update(0, small), 256 << 10))
    for name, fn, n in rows:
        rate, calls = busy_rate(a.seconds, fn)
        print(f"{name:40s} {calls * n / 1e9:6.2f} GB/s   busy thread at {100 * rate / solo:5.1f}% of alone")


if __name__ == "__main__":
    main()
