"""CPU the SGLang backend costs inside the engine's process per 128-page
batch (STORAGE_BATCH_SIZE), for batch_set_v1 and batch_get_v1, with and
without a busy Python thread beside it (the scheduler's own Python work).

Not a test. Needs the SGLang test environment (python/requirements/) and
starts a stratad (built with `go build`, or $STRATA_TEST_BIN) unless --addr
names a running node:

    python python/bench_sglang.py            # --rounds 3 --page-tokens 64

Pages are SGLang's real MHATokenToKVPoolHost on the CPU, page_first layout,
Llama-3-8B shape in bf16: 32 layers x 8 KV heads x head_dim 128 x 2 bytes x
64 tokens per K and per V segment = 4 MiB each, 8 MiB a page, 1 GiB a
batch. "engine CPU" is the process's CPU time less the busy thread's own.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tests"))
sys.path.insert(0, HERE)


from bench_common import alone, beside  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", help="a running node (default: start one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--page-tokens", type=int, default=64)
    ap.add_argument("--pages", type=int, default=128)
    ap.add_argument("--node-timeout", type=float, default=30.0)
    ap.add_argument("--warmup", type=int, default=3,
                    help="unmeasured set+get rounds first: the node's arena and this process's mapping of it "
                         "are touched once, as in an engine that has run a while")
    a = ap.parse_args()

    import torch
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorageExtraInfo
    from sglang.srt.mem_cache.utils import get_storage_hash_str

    import test_sglang as T
    from strata_client import checksum

    T.load_sglang()

    node = None
    addr = a.addr
    if not addr:
        node = T.Node(host_bytes=f"{2 * a.pages * 9}MiB", extra_args=["--host-prefault"])
        addr = node.addr
    pt, n = a.page_tokens, a.pages
    pool = T.mha_pool(torch.bfloat16, pages=n + 1, page_size=pt, layers=32, heads=8, dim=128)
    b = T.attach(T.config(addr, strata_node_timeout=a.node_timeout), pool)
    idx = pool.alloc(n * pt)
    T.fill(pool, idx, 1)
    size = b._ensure().page_bytes
    from strata_client import native

    print(f"page {size} bytes ({size / 2**20:.0f} MiB), {n} pages a batch; checksum: "
          f"{checksum.backend()}; native plane: {native.native_status()} {b._client.native_stats()}; "
          f"raw plane: {b._client.raw_active}")
    rows = []
    base = 0
    try:
        for _ in range(a.warmup):
            base += 1
            keys = get_storage_hash_str(list(range(base * 10**7, base * 10**7 + n * pt)), None, page_size=pt)
            assert all(b.batch_set_v1(keys, idx, HiCacheStorageExtraInfo(prefix_keys=[])))
            assert all(b.batch_get_v1(keys, idx))
        for busy in (False, True):
            for r in range(a.rounds):
                base += 1
                keys = get_storage_hash_str(list(range(base * 10**7, base * 10**7 + n * pt)), None, page_size=pt)
                for op in ("set", "get"):
                    res = []
                    if op == "set":
                        call = lambda: res.extend(b.batch_set_v1(keys, idx, HiCacheStorageExtraInfo(prefix_keys=[])))
                    else:
                        call = lambda: res.extend(b.batch_get_v1(keys, idx))
                    wall, cpu, loops = beside(call, busy)
                    assert all(res), f"{op}: {res.count(False)} pages failed"
                    rows.append((op, busy, r, wall, cpu, loops))
                b.clear()
        print(f"busy thread alone: {alone(1.0, 2.0):.0f} loops/s")
        print(f"{'op':4} {'busy':5} {'round':5} {'wall s':>7} {'engine CPU s':>12} {'GB/s':>6} {'busy loops/s':>13}")
        for op, busy, r, wall, cpu, lps in rows:
            print(f"{op:4} {str(busy):5} {r:5} {wall:7.3f} {cpu:12.3f} {n * size / wall / 1e9:6.2f} {lps:13.0f}")
        for op in ("set", "get"):
            for busy in (False, True):
                cs = sorted(x[4] for x in rows if x[0] == op and x[1] == busy)
                ws = sorted(x[3] for x in rows if x[0] == op and x[1] == busy)
                print(f"median {op} busy={busy}: wall {ws[len(ws) // 2]:.3f} s, engine CPU {cs[len(cs) // 2]:.3f} s "
                      f"per {n}-page batch ({cs[len(cs) // 2] / n * 1e3:.2f} ms a page)")
    finally:
        b.close()
        if node:
            node.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
