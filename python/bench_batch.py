"""Batch get and put as an engine makes them, in a Python process, with
and without a busy Python thread beside it (issue 41, "Measure as engines
do"). Not a test; one run measures, per batch shape (128 x 8 MiB = 1 GiB,
and 128 x 256 KiB):

- strata's native plane over same-host shared memory (Client(native=True)),
  over raw tcp (native=True, shm=False), and the pure-Python planes
  (native=False: raw tcp from Python) for reference: one ns.get / ns.put
  of the whole batch into / from numpy buffers;
- Mooncake Store's Python client on the same bytes (batch_get_into /
  batch_put_from of registered buffers), in the interpreter of the venv
  benchmarks/mooncake-venv.sh builds, through bench_mooncake_worker.py
  (master and store server deployed as strata-load deploys them);
- memcpy of the same bytes: np.copyto page by page into preallocated
  buffers, in this process;
- the loopback TCP limit as strata-load measures it (its `tcp` system, one
  connection, on the same page sizes), in the same run.

    "$(scripts/pyvenv.sh)/bin/python" python/bench_batch.py   # --rounds 5 --small-rounds 15

starts a stratad (python/tests/_support.py builds it and libstrata.so,
and sets $STRATA_NATIVE_LIB) with --host-prefault, unless --addr names a
running node. Each case is one batch: the node's arena and the client's
mapping are touched by unmeasured rounds first; gets read one working set
(stored once), puts write fresh keys that are deleted after each round, off
the clock. The planes and memcpy take turns round by round (a drifting
machine slows them alike); Mooncake runs after them, per shape, in its own
processes. Figures are medians (p50) over the rounds. "CPU s/GiB" is the
engine process's CPU time (time.process_time, every thread: Python, the Go
runtime of the native plane, gRPC) less the busy thread's own
(time.thread_time), per GiB moved, as bench_sglang.py counts "engine CPU";
the node's CPU is not in it. "busy÷alone" is the p50 wall time beside the
busy thread over the p50 alone. "÷ mooncake", "÷ memcpy", "÷ loopback" are
GB/s ratios (this row's over theirs), alone / beside the busy thread:
Mooncake's alone and beside its own busy thread; memcpy's and the
loopback's are limits of the machine, so both figures divide by their GB/s
alone (memcpy copies page by page, 128 np.copyto calls, each of which
gives the GIL back, so beside a busy thread it pays the switch interval
per page: its busy row is shown but divides nothing).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))
sys.path.insert(0, HERE)

GIB = 1 << 30


from bench_common import alone, beside  # noqa: E402


def parse_size(s: str) -> int:
    s = s.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def human(n: int) -> str:
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m} {unit}"
    return f"{n} B"


class Cell:
    """The rounds of one case: wall seconds, engine CPU seconds, busy
    thread loops per second."""

    def __init__(self):
        self.wall, self.cpu, self.loops = [], [], []

    def p50(self, what="wall"):
        xs = getattr(self, what)
        return statistics.median(xs) if xs else float("nan")


def timed(cell: Cell, busy: bool, fn) -> None:
    wall, cpu, loops = beside(fn, busy)
    cell.wall.append(wall)
    cell.cpu.append(cpu)
    cell.loops.append(loops)


# ---- the loopback limit (strata-load's tcp system) -------------------------------------


def loopback(sizes, duration: str, tmp: str, repeats: int = 3):
    """{(op, page bytes): GB/s} of strata-load's tcp system, one worker
    (one connection, one request in flight), the median of repeats runs
    (one run of it moved by half between two runs on this VM), and the
    command that measured it; or (None, reason)."""
    exe = os.path.join(tmp, "strata-load")
    p = subprocess.run(["go", "build", "-o", exe, "./cmd/strata-load"], cwd=REPO, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=600)
    if p.returncode != 0:
        return None, "go build ./cmd/strata-load failed: " + p.stdout.decode(errors="replace")[-500:]
    out = os.path.join(tmp, "strata-load-out")
    cmd = [exe, "--systems", "tcp", "--ops", "get,put", "--sizes", ",".join(f"{s // 1024}K" for s in sizes),
           "--concurrency", "1", "--duration", duration, "--quiet", "--out", out]
    runs = {}
    for _ in range(repeats):
        p = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        if p.returncode != 0:
            return None, "strata-load failed: " + p.stdout.decode(errors="replace")[-500:]
        with open(os.path.join(out, "results.csv")) as f:
            for row in csv.DictReader(f):
                if row["system"] == "tcp" and row["workers"] == "1" and not row.get("error"):
                    runs.setdefault((row["op"], int(row["page_bytes"])), []).append(float(row["gb_per_s"]))
    res = {k: statistics.median(v) for k, v in runs.items()}
    shown = (f"median of {repeats} runs of strata-load " + " ".join(cmd[1:-1]) + " <dir> (GB/s each: " +
             "; ".join(f"{op} {b // 1024} KiB " + ", ".join(f"{x:.2f}" for x in v) for (op, b), v in sorted(runs.items()))
             + ")")
    return res, shown


# ---- Mooncake ---------------------------------------------------------------------------


def mooncake_python(given):
    """The interpreter with the mooncake wheel, or (None, why not)."""
    if given:
        return given, None
    try:
        p = subprocess.run([os.path.join(REPO, "benchmarks", "mooncake-venv.sh")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"benchmarks/mooncake-venv.sh: {e}"
    if p.returncode != 0:
        return None, "benchmarks/mooncake-venv.sh failed: " + p.stderr.decode(errors="replace")[-400:]
    return p.stdout.decode().strip().splitlines()[-1], None


def mooncake(python, page_bytes, pages, rounds, tmp):
    """{case: Cell} from bench_mooncake_worker.py, or (None, why not)."""
    log = os.path.join(tmp, f"mooncake-{page_bytes}.log")
    with open(log, "wb") as err:
        try:
            p = subprocess.run([python, os.path.join(HERE, "bench_mooncake_worker.py"), "bench", "--page-bytes",
                                str(page_bytes), "--pages", str(pages), "--rounds", str(rounds)],
                               stdout=subprocess.PIPE, stderr=err, timeout=600)
        except subprocess.TimeoutExpired:
            return None, "bench_mooncake_worker.py timed out"
    if p.returncode != 0:
        with open(log, "rb") as f:
            tail = f.read().decode(errors="replace")[-800:]
        return None, f"bench_mooncake_worker.py exit {p.returncode}: {tail}"
    d = json.loads(p.stdout.decode().strip().splitlines()[-1])
    cells = {}
    for name, c in d["cases"].items():
        cell = Cell()
        cell.wall, cell.cpu, cell.loops = c["wall"], c["cpu"], c["busy_loops"]
        cells[name] = cell
    return cells, None


# ---- one batch shape --------------------------------------------------------------------


def descriptor(page_bytes: int):
    """Llama-3-8B in bf16 (32 layers x 8 KV heads x head_dim 128, K and V:
    128 KiB a token), page_tokens chosen for the page size."""
    from strata_client import Descriptor

    per_token = 32 * 2 * 8 * 128 * 2
    if page_bytes % per_token:
        raise SystemExit(f"page size {page_bytes} is not a whole number of Llama-3-8B tokens ({per_token} B)")
    return Descriptor(tenant="bench", model="meta-llama/Meta-Llama-3-8B", model_revision="bench-batch",
                      engine="bench", dtype="bf16", page_tokens=page_bytes // per_token, num_layers=32,
                      num_kv_heads=8, head_dim=128)


PLANES = [  # name, Client kwargs
    ("strata native shm", dict(native=True, shm=True)),
    ("strata native raw tcp", dict(native=True, shm=False)),
    ("strata Python plane (raw tcp)", dict(native=False)),
]


def shape(a, addr, page_bytes, pages, rounds, mc_python, tmp, notes):
    import numpy as np

    from strata_client import Client, Page

    total = page_bytes * pages
    print(f"\n## {pages} x {human(page_bytes)} ({human(total)} a batch), p50 of {rounds} rounds", flush=True)
    rng = np.random.default_rng(page_bytes)
    tile = rng.integers(0, 256, size=min(total, 4 << 20), dtype=np.uint8)
    src = np.resize(tile, total)
    for i in range(pages):  # no two pages alike
        src[i * page_bytes:i * page_bytes + 8] = np.frombuffer(i.to_bytes(8, "little"), dtype=np.uint8)
    dst = np.zeros(total, dtype=np.uint8)
    store = np.zeros(total, dtype=np.uint8)  # memcpy's "arena"
    srcs = [src[i * page_bytes:(i + 1) * page_bytes] for i in range(pages)]
    dsts = [dst[i * page_bytes:(i + 1) * page_bytes] for i in range(pages)]
    stores = [store[i * page_bytes:(i + 1) * page_bytes] for i in range(pages)]

    clients = []
    for name, kw in PLANES:
        if name not in a.planes:
            continue
        c = Client(addr, node_timeout=a.node_timeout, refresh_interval=0, **kw)
        ns = c.open(descriptor(page_bytes))
        if ns.page_bytes != page_bytes:
            raise SystemExit(f"namespace pages are {ns.page_bytes} bytes, want {page_bytes}")
        clients.append((name, c, ns))
    wkeys = [os.urandom(32) for _ in range(pages)]

    def check_put(res, what):
        bad = [r for r in res if r.status != "COMMITTED"]
        if bad:
            raise SystemExit(f"{what}: {len(bad)} of {len(res)} pages not committed: {bad[0]}")

    def check_get(out, what):
        miss = sum(1 for o in out if o is None)
        if miss:
            raise SystemExit(f"{what}: {miss} of {len(out)} pages missed")

    check_put(clients[0][2].put([Page(key=k, data=d) for k, d in zip(wkeys, srcs)]), "working set")
    for name, c, ns in clients:  # warm-up: touch the mapping, the arena, the connections
        check_get(ns.get(wkeys, dsts), name + " warm-up get")
        keys = [os.urandom(32) for _ in range(pages)]
        check_put(ns.put([Page(key=k, data=d) for k, d in zip(keys, srcs)]), name + " warm-up put")
        ns.delete(keys)
    if not all(bytes(dsts[i][:64]) == bytes(srcs[i][:64]) for i in range(pages)) or \
            not np.array_equal(dst[-4096:], src[-4096:]):
        raise SystemExit("a warm-up get did not read the pages' bytes")
    for name, c, ns in clients:
        st = c.native_stats() if c.native_active else {}
        line = f"{name}: native_active={c.native_active}"
        if st:
            line += f" native_stats={json.dumps(st, sort_keys=True)}"
        if not c.native_active:
            line += f" raw_active={c.raw_active}"
        print(line, flush=True)
        want_shm = name == "strata native shm"
        if "native" in name and not c.native_active:
            notes.append(f"{human(page_bytes)}: {name}: native plane NOT active")
        elif st and bool(st.get("shm_active")) != want_shm:
            notes.append(f"{human(page_bytes)}: {name}: shm_active={st.get('shm_active')}, expected {want_shm}")
        elif st and not want_shm and not st.get("raw_active"):
            notes.append(f"{human(page_bytes)}: {name}: raw_active={st.get('raw_active')}, expected True")
        elif not st and not c.raw_active:
            notes.append(f"{human(page_bytes)}: {name}: raw plane NOT active")

    rows = {}
    for name, _, _ in clients:
        rows[name] = {k: Cell() for k in ("get", "get_busy", "put", "put_busy")}
    rows["memcpy"] = {k: Cell() for k in ("get", "get_busy", "put", "put_busy")}

    def memcpy_get():
        for i in range(pages):
            np.copyto(dsts[i], stores[i])

    def memcpy_put():
        for i in range(pages):
            np.copyto(stores[i], srcs[i])

    memcpy_put()
    memcpy_get()  # warm-up
    for r in range(rounds):
        for busy in (False, True):
            sfx = "_busy" if busy else ""
            timed(rows["memcpy"]["get" + sfx], busy, memcpy_get)
            timed(rows["memcpy"]["put" + sfx], busy, memcpy_put)
        for name, c, ns in clients:
            for busy in (False, True):
                sfx = "_busy" if busy else ""
                out = []
                timed(rows[name]["get" + sfx], busy, lambda: out.append(ns.get(wkeys, dsts)))
                check_get(out[0], name + " get")
            for busy in (False, True):
                sfx = "_busy" if busy else ""
                keys = [os.urandom(32) for _ in range(pages)]
                pg = [Page(key=k, data=d) for k, d in zip(keys, srcs)]
                out = []
                timed(rows[name]["put" + sfx], busy, lambda: out.append(ns.put(pg)))
                check_put(out[0], name + " put")
                ns.delete(keys)
        print(f"round {r + 1}/{rounds} done", flush=True)
    for name, c, ns in clients:
        st = c.native_stats() if c.native_active else {}
        if st:
            print(f"{name} after: native_stats={json.dumps(st, sort_keys=True)}", flush=True)
    ns0 = clients[0][2]
    ns0.delete(wkeys)
    for _, c, _ in clients:
        c.close()
    del srcs, dsts, stores, src, dst, store
    gc.collect()

    if mc_python:
        print("mooncake ...", flush=True)
        cells, why = mooncake(mc_python, page_bytes, pages, rounds, tmp)
        if cells:
            rows["mooncake"] = cells
        else:
            notes.append(f"{human(page_bytes)}: Mooncake not measured: {why}")
    return rows


def table(rows, page_bytes, pages, lb):
    total = page_bytes * pages
    gib = total / GIB

    def gbs(cell):
        return total / cell.p50() / 1e9

    mc, mem = rows.get("mooncake"), rows["memcpy"]
    hdr = ["system", "get s", "get s busy", "get busy÷alone", "put s", "put s busy", "put busy÷alone",
           "get GB/s", "put GB/s", "CPU s/GiB get", "CPU s/GiB put", "÷ mooncake get", "÷ mooncake put",
           "÷ memcpy get", "÷ memcpy put", "÷ loopback get", "÷ loopback put"]
    lines = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] + ["---:"] * (len(hdr) - 1)) + "|"]

    def ratio(c, base, op):
        if base is None:
            return "–"
        return f"{gbs(c[op]) / gbs(base[op]):.2f} / {gbs(c[op + '_busy']) / gbs(base[op + '_busy']):.2f}"

    def limit(c, base, op):
        if not base:
            return "–"
        return f"{gbs(c[op]) / base:.2f} / {gbs(c[op + '_busy']) / base:.2f}"

    order = [n for n, _ in PLANES if n in rows] + (["mooncake"] if mc else []) + ["memcpy"]
    for name in order:
        c = rows[name]
        cells = [name]
        cells += [f"{c['get'].p50():.3f}", f"{c['get_busy'].p50():.3f}", f"{c['get_busy'].p50() / c['get'].p50():.2f}",
                  f"{c['put'].p50():.3f}", f"{c['put_busy'].p50():.3f}", f"{c['put_busy'].p50() / c['put'].p50():.2f}",
                  f"{gbs(c['get']):.2f} / {gbs(c['get_busy']):.2f}", f"{gbs(c['put']):.2f} / {gbs(c['put_busy']):.2f}"]
        if name == "memcpy":
            cells += ["–", "–"]
        else:
            cells += [f"{c['get'].p50('cpu') / gib:.3f} / {c['get_busy'].p50('cpu') / gib:.3f}",
                      f"{c['put'].p50('cpu') / gib:.3f} / {c['put_busy'].p50('cpu') / gib:.3f}"]
        if name.startswith("strata"):
            cells += [ratio(c, mc, "get"), ratio(c, mc, "put"), limit(c, gbs(mem["get"]), "get"),
                      limit(c, gbs(mem["put"]), "put")]
        else:
            cells += ["–"] * 4
        if "tcp" in name and lb:
            for op in ("get", "put"):
                cells.append(limit(c, lb.get((op, page_bytes)), op))
        else:
            cells += ["–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    if lb:
        g, p = lb.get(("get", page_bytes)), lb.get(("put", page_bytes))
        lines.append("| loopback tcp limit (strata-load `tcp`, 1 connection) | | | | | | | "
                     f"{g:.2f} | {p:.2f} | | | | | | | | |" if g and p else "")
    return "\n".join(l for l in lines if l)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", help="a running node (default: start one with --host-prefault)")
    ap.add_argument("--host-bytes", default="4GiB", help="host tier of the node this starts")
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds of the 8 MiB batches (p50 over them)")
    ap.add_argument("--small-rounds", type=int, default=15, help="measured rounds of the 256 KiB batches")
    ap.add_argument("--pages", type=int, default=128)
    ap.add_argument("--sizes", default="8M,256K", help="page sizes; a shape each")
    ap.add_argument("--node-timeout", type=float, default=60.0)
    ap.add_argument("--planes", default=",".join(n for n, _ in PLANES),
                    help="strata planes to measure (comma-separated names of the table's rows)")
    ap.add_argument("--mooncake-python", default=os.environ.get("STRATA_MOONCAKE_PYTHON", ""),
                    help="interpreter with the mooncake wheel (default: benchmarks/mooncake-venv.sh's)")
    ap.add_argument("--no-mooncake", action="store_true")
    ap.add_argument("--no-loopback", action="store_true")
    ap.add_argument("--loopback-duration", default="2s", help="strata-load --duration per case")
    a = ap.parse_args()
    a.planes = [p.strip() for p in a.planes.split(",") if p.strip()]
    sizes = [parse_size(s) for s in a.sizes.split(",")]

    tmp = tempfile.mkdtemp(prefix="strata-bench-batch-")
    notes = []
    node = None
    try:
        import numpy as np

        from strata_client import checksum, native

        addr = a.addr
        if not addr:
            from _support import Node

            node = Node(host_bytes=a.host_bytes, extra_args=["--host-prefault"], start_timeout=120.0)
            addr = node.addr
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL).stdout.decode().strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().strip()
        dirty = ", ".join(ln[3:] for ln in dirty.splitlines())
        print(f"bench_batch: commit {commit}{' (uncommitted changes in ' + dirty + ')' if dirty else ''}, "
              f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}, numpy {np.__version__}")
        print(f"node {addr}{' (started here: --host-bytes ' + a.host_bytes + ' --host-prefault)' if node else ''}; "
              f"checksum: {checksum.backend()}; switch interval {sys.getswitchinterval() * 1e3:.0f} ms")

        mc_python = None
        if not a.no_mooncake:
            mc_python, why = mooncake_python(a.mooncake_python)
            if not mc_python:
                notes.append(f"Mooncake not measured: {why}")
                print(f"Mooncake: not measured: {why}", flush=True)
            else:
                print(f"Mooncake: {mc_python}", flush=True)

        lb = None
        if not a.no_loopback:
            print("loopback limit (strata-load tcp) ...", flush=True)
            lb, shown = loopback(sizes, a.loopback_duration, tmp)
            if lb is None:
                notes.append(f"loopback limit not measured: {shown}")
            else:
                print(f"loopback: {shown}: " + ", ".join(f"{op} {human(s)} {g:.2f} GB/s"
                                                         for (op, s), g in sorted(lb.items())), flush=True)

        results = []
        for s in sizes:
            rounds = a.rounds if s >= (1 << 20) else max(a.rounds, a.small_rounds)
            rows = shape(a, addr, s, a.pages, rounds, mc_python, tmp, notes)
            results.append((s, rounds, rows))
            print(f"native: {native.native_status()}", flush=True)

        print(f"\n# Results (commit {commit}); busy thread alone: {alone(0.5, 1.0) / 1e6:.1f} M loops/s")
        for s, rounds, rows in results:
            print(f"\n{a.pages} × {human(s)} ({human(s * a.pages)} a batch), p50 of {rounds} rounds; "
                  "a / b: alone / beside the busy thread\n")
            print(table(rows, s, a.pages, lb))
            busy = "; ".join(f"{n} {statistics.median(r['get_busy'].loops) / 1e6:.1f}/"
                             f"{statistics.median(r['put_busy'].loops) / 1e6:.1f}"
                             for n, r in rows.items())
            print(f"\nbusy thread beside get/put, M loops/s: {busy}")
        if notes:
            print("\nNotes:")
            for n in notes:
                print(f"- {n}")
        return 0
    finally:
        if node:
            node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
