"""Test support: puts python/ on sys.path, builds stratad and the Go writer
once per test run, and starts and stops real nodes on loopback.

Binaries are built with ``go build`` from the main module into a temporary
directory (or $STRATA_TEST_BIN when set and already holding them). Tests that
need a node are skipped, saying why, when ``go`` is not installed.

Engine tests (the real ``sglang``, ``lmcache``, ``vllm`` packages) get their
engine through ``require_engine(modname)``, never with a bare import:

- the engine imports: its module is returned, after checking that it was
  loaded from an installed distribution (a ``site-packages`` or
  ``dist-packages`` directory), not from a stand-in in this tree;
- it does not import and ``STRATA_REQUIRE_ENGINES`` is not ``1``: the test is
  skipped with the reason ``engine <modname> is not installed: <error>
  (python/run_tests.sh runs these in the venv scripts/pyvenv.sh builds)``;
- it does not import and ``STRATA_REQUIRE_ENGINES=1`` (CI, ``.ci/run``): the
  test fails with that reason. A missing engine can then never pass CI as a
  skip. ``python/run_tests.sh`` also fails a CI run in which any test was
  skipped with a reason mentioning "engine", as a second guard.

Call it in ``setUpClass`` or at the top of a test, not at module import time
(a module-level SkipTest hides every other test of the file).
"""

from __future__ import annotations

import atexit
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
REPO = os.path.dirname(PYROOT)
if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

_build_lock = threading.Lock()
_bin_dir = None
_build_error = None
_tmp_dirs = []
_procs = []


def _stop(proc) -> None:
    """SIGTERM and wait (a clean shutdown: the node removes its socket link),
    SIGKILL after 10s. SIGCONT too, so that a paused node gets the SIGTERM."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _cleanup():
    # A node a failed test left running is stopped cleanly, the last started
    # first (nodes that joined use an earlier node's etcd), so that it
    # removes its socket link.
    for p in reversed(_procs):
        try:
            _stop(p)
        except Exception:
            pass
    for d in _tmp_dirs:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)


def bin_dir():
    """Directory holding stratad and gowriter; raises unittest.SkipTest when
    they cannot be built."""
    global _bin_dir, _build_error
    with _build_lock:
        if _bin_dir:
            return _bin_dir
        if _build_error:
            raise unittest.SkipTest(_build_error)
        pre = os.environ.get("STRATA_TEST_BIN")
        if pre and all(os.access(os.path.join(pre, b), os.X_OK) for b in ("stratad", "gowriter", "libstrata.so")):
            os.environ["STRATA_NATIVE_LIB"] = os.path.join(pre, "libstrata.so")
            _bin_dir = pre
            return _bin_dir
        if shutil.which("go") is None:
            _build_error = "go is not installed: cannot build stratad for the node tests"
            raise unittest.SkipTest(_build_error)
        d = tempfile.mkdtemp(prefix="strata-pytest-bin-")
        _tmp_dirs.append(d)
        t0 = time.time()
        p = subprocess.run(
            ["go", "build", "-o", d + os.sep, "./cmd/stratad", "./python/tests/gowriter"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600,
        )
        if p.returncode != 0:
            _build_error = "go build failed:\n" + p.stdout.decode(errors="replace")
            raise AssertionError(_build_error)
        # The native plane (strata_client.native) from this tree, never a
        # stale copy: the clients the tests make load it from here.
        lib = os.path.join(d, "libstrata.so")
        p = subprocess.run([os.path.join(REPO, "scripts", "buildnative.sh"), lib], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        if p.returncode != 0:
            _build_error = "building the native library failed:\n" + p.stdout.decode(errors="replace")
            raise AssertionError(_build_error)
        os.environ["STRATA_NATIVE_LIB"] = lib
        sys.stderr.write(f"[strata tests] built stratad, gowriter and libstrata.so in {time.time() - t0:.1f}s\n")
        _bin_dir = d
        return _bin_dir


def engines_required() -> bool:
    """True where a missing engine is a failure (CI sets STRATA_REQUIRE_ENGINES=1)."""
    return os.environ.get("STRATA_REQUIRE_ENGINES", "") == "1"


def require_engine(modname: str):
    """The real engine module ``modname`` (e.g. "sglang.srt.mem_cache.hicache_storage").

    Skips the calling test when it cannot be imported, or fails it under
    STRATA_REQUIRE_ENGINES=1; fails it in any case when the module imports
    but not from an installed distribution (a stand-in on sys.path).
    """
    try:
        mod = importlib.import_module(modname)
    except Exception as e:  # ImportError, or an engine that breaks on import
        reason = (f"engine {modname} is not installed: {type(e).__name__}: {e} "
                  "(python/run_tests.sh runs these in the venv scripts/pyvenv.sh builds)")
        if engines_required():
            raise AssertionError(reason + " [STRATA_REQUIRE_ENGINES=1: a missing engine fails]") from e
        raise unittest.SkipTest(reason)
    path = os.path.realpath(getattr(mod, "__file__", None) or "")
    parts = path.split(os.sep)
    if "site-packages" not in parts and "dist-packages" not in parts:
        raise AssertionError(f"engine {modname} was imported from {path or '(no file)'}, "
                             "not from an installed distribution: a stand-in is in use")
    return mod


_SERVING = re.compile(r"strata node serving")
_ADDR = re.compile(r"\baddr=(127\.0\.0\.1:\d+)")
_ETCD = re.compile(r"\betcd=(http://127\.0\.0\.1:\d+)")


class Node:
    """A stratad process on loopback with its own data directory."""

    def __init__(self, etcd=None, host_bytes="64MiB", extra_args=(), start_timeout=30.0):
        self.dir = tempfile.mkdtemp(prefix="strata-pytest-node-")
        _tmp_dirs.append(self.dir)
        args = [os.path.join(bin_dir(), "stratad"), "--data-dir", self.dir, "--listen", "127.0.0.1:0",
                "--host-bytes", host_bytes, "--log-level", "info"]
        if etcd:
            args += ["--etcd", etcd]
        else:
            args += ["--embedded-etcd-url", "http://127.0.0.1:0"]
        args += list(extra_args)
        self.log_path = os.path.join(self.dir, "stderr.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True)
        _procs.append(self.proc)
        self.addr = None
        self.etcd = None
        deadline = time.time() + start_timeout
        while time.time() < deadline:
            with open(self.log_path, "rb") as f:
                for line in f.read().decode(errors="replace").splitlines():
                    if _SERVING.search(line):
                        m = _ADDR.search(line)
                        e = _ETCD.search(line)
                        if m:
                            self.addr = m.group(1)
                            self.etcd = e.group(1) if e else etcd
            if self.addr:
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not self.addr:
            self.kill()
            raise AssertionError(f"stratad did not start:\n{self.log()}")

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: the node dies without draining (a crash). Its shm socket
        link stays until the next node starts, which removes the links of
        nodes gone; a test that only ends a node calls stop."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self._log.close()

    def pause(self, timeout=10.0) -> None:
        """SIGSTOP, and wait until every thread of the node is stopped.

        kill(2) returns once the signal is queued; the node's threads stop
        only as each is next scheduled, so on a busy machine a request sent
        right after the signal can still be answered. Reading each thread's
        state from /proc closes that window."""
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while True:
            states = _thread_states(self.proc.pid)
            if states and all(s in "tT" for s in states):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"stratad {self.proc.pid} not stopped after {timeout}s: thread states {states}")
            time.sleep(0.005)

    def resume(self) -> None:
        """SIGCONT after pause."""
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM and wait (a clean shutdown: the node removes its shm socket
        link), SIGKILL after 10s. Of several nodes, stop the one whose etcd
        the others use last."""
        _stop(self.proc)
        self._log.close()


def _thread_states(pid):
    """Each thread's state letter from /proc/PID/task/*/stat ("" for a
    thread that went away while reading)."""
    states = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return states
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces; the state
        # is the first field after its closing parenthesis.
        states.append(stat[stat.rindex(")") + 2])
    return states


def gowriter(*args, timeout=60):
    """Run the Go writer and return its JSON output."""
    import json

    p = subprocess.run([os.path.join(bin_dir(), "gowriter")] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"gowriter {' '.join(args)} failed: {p.stderr.decode(errors='replace')}")
    return json.loads(p.stdout)


def go_pattern(seed: int, page: int, size: int) -> bytes:
    """gowriter's page bytes: byte j of page i is (seed + 31*i + j) % 251."""
    base = (seed + 31 * page) % 251
    period = bytes((base + j) % 251 for j in range(251))
    reps = size // 251 + 1
    return (period * reps)[:size]


def small_descriptor(**kw):
    from strata_client import Descriptor

    d = dict(tenant="acme", model="xlang/test-model", model_revision="r1", engine="xlang", dtype="bf16",
             page_tokens=16, num_layers=2, num_kv_heads=2, head_dim=32)
    d.update(kw)
    return Descriptor(**d)


class NodeTest(unittest.TestCase):
    """A test class sharing one node (cls.node), stopped at the end."""

    @classmethod
    def setUpClass(cls):
        cls.node = Node()

    @classmethod
    def tearDownClass(cls):
        cls.node.stop()


class OneNodeTest(unittest.TestCase):
    """A test class sharing one node, a client of it and a namespace of
    small_descriptor() (cls.node, cls.client, cls.ns). native: the client's
    native argument (None: the native plane when the library loads; False
    for a class that tests the Python planes)."""

    native = None

    @classmethod
    def setUpClass(cls):
        from strata_client import Client

        cls.node = Node()
        cls.client = Client(cls.node.addr, node_timeout=5.0, native=cls.native)
        cls.ns = cls.client.open(small_descriptor())

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.node.stop()
