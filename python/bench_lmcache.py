"""CPU cost inside the engine's process of one batch on the LMCache paths.

    STRATA_TEST_BIN=<dir with stratad> python python/bench_lmcache.py [--pages 128] [--rounds 3]

Starts a stratad on 127.0.0.1 (python/tests/_support.py), then for the
remote connector (RemoteBackend's connector: batched_put, batched_get) and
the multi-process L2 adapter (store task, load task) runs batches of
``--pages`` chunks of 64 tokens of Llama-3-8B (32 layers, 8 KV heads, head
size 128, bf16: 8 MiB a chunk), alone and with a busy Python thread beside
them. Prints per batch: wall seconds and the process CPU seconds spent
(the busy thread's own CPU subtracted), the median of ``--rounds``.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tests"))

import _support  # noqa: E402
import _lmcache_support as S  # noqa: E402
from bench_common import beside  # noqa: E402


def measure(fn, rounds, busy, prep=None):
    walls, cpus = [], []
    for _ in range(rounds):
        if prep is not None:
            prep()  # off the clock
        w, c, _ = beside(fn, busy, settle=0)
        walls.append(w)
        cpus.append(c)
    return statistics.median(walls), statistics.median(cpus)


def compare(a, write, read, drop):
    """Warms write and read up (a.warmup rounds each), then prints the
    medians of measure for each, alone and beside a busy thread; drop
    clears the last round's writes before the next. write and read are
    (label, function) pairs."""
    for _ in range(a.warmup):
        write[1]()
        read[1]()
    for busy in (False, True):
        for (label, fn), prep in ((write, drop), (read, None)):
            w, c = measure(fn, a.rounds, busy, prep)
            print(f"{label:28}  busy={busy!s:5}  wall {w:.3f}s  cpu {c:.3f}s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured rounds of each path first")
    a = ap.parse_args()
    import torch
    from lmcache.v1.metadata import LMCacheMetadata
    from lmcache.v1.distributed.api import ObjectKey
    from strata_client.lmcache_mp import StrataL2Adapter
    from strata_client import checksum

    n = a.pages
    node = _support.Node(host_bytes="3GiB", extra_args=["--host-prefault"])
    loop = S.Loop()
    try:
        md = LMCacheMetadata(model_name="meta-llama/Meta-Llama-3-8B", world_size=1, local_world_size=1, worker_id=0,
                             local_worker_id=0, kv_dtype=torch.bfloat16, kv_shape=(32, 2, 64, 8, 128), chunk_size=64)
        cfg = S.engine_config(node.addr, chunk_size=64, max_local_cpu_size=2.5)
        st = S.Stack(loop, cfg, md)
        conn = st.conn
        objs = [st.cpu.allocate(md.get_shapes(), md.get_dtypes()) for _ in range(n)]
        for i, o in enumerate(objs):
            o.tensor.fill_(float(i % 7))
        page = len(objs[0].byte_array)
        print(f"pages of {page / 2**20:.1f} MiB, batches of {n}; crc32c fast={checksum.HAVE_FAST_CRC32C}")
        rnd = [0]

        def put():
            rnd[0] += 1
            keys = [st.key((rnd[0] << 20) + i) for i in range(n)]
            for o in objs:
                o.ref_count_up()  # the wrapper drops one reference per put
            loop.run(conn.batched_put(keys, objs), timeout=600)
            put.keys = keys

        def drop_remote():
            # The last round's pages go before the next is put: rounds of
            # fresh pages never read would otherwise evict one another
            # (the node keeps pages that were read over ones never read).
            keys = getattr(put, "keys", None)
            if keys:
                ns = st.strata._ensure()
                ns.delete([st.strata._key(ns, k) for k in keys])

        def get():
            got = loop.run(conn.batched_get(put.keys), timeout=600)
            assert all(g is not None for g in got), f"a miss in the benchmark: {st.strata.counters()}"
            for g in got:
                g.ref_count_down()

        from strata_client import native

        print(f"native plane: {native.native_status()}")
        # The warm-up touches the arena and this process's mapping of it once.
        compare(a, ("remote connector batched_put", put), ("remote connector batched_get", get), drop_remote)

        ad = StrataL2Adapter({"addr": node.addr, "tenant": "acme"})
        shapes, dtypes = md.get_shapes(), md.get_dtypes()

        def wait(table, tid):
            while tid not in table:
                time.sleep(0.001)

        def store():
            rnd[0] += 1
            keys = [ObjectKey(((rnd[0] << 20) + i).to_bytes(32, "big"), md.model_name, 0) for i in range(n)]
            tid = ad.submit_store_task(keys, objs)
            wait(ad._stores, tid)
            assert ad.pop_completed_store_tasks()[tid].is_successful()
            store.keys = keys

        def drop_stored():
            keys = getattr(store, "keys", None)
            if keys:
                ns = ad._namespace(keys[0], shapes, dtypes)
                ns.delete([ad._key(ns, k) for k in keys])

        def load():
            tid = ad.submit_load_task(store.keys, objs)
            wait(ad._loads, tid)
            assert ad.query_load_result(tid).popcount() == n

        compare(a, ("mp L2 adapter store task", store), ("mp L2 adapter load task", load), drop_stored)
        del shapes, dtypes
        ad.close()
        for o in objs:
            o.ref_count_down()
        st.close()
    finally:
        loop.close()
        node.kill()


if __name__ == "__main__":
    main()
