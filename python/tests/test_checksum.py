"""strata_client.checksum: CRC-32C and SHA-256 values, the GIL released on
large pages, and the loud pure-Python fallback when crc32c is missing."""

import hashlib
import os
import subprocess
import sys
import threading
import time
import unittest

import _support  # noqa: F401  (puts python/ on sys.path)
from strata_client import checksum as C


def progressed_beside(fn, calls=50, limit_s=10.0):
    """True when a Python thread ran while fn ran on this thread.

    Forced GIL switches are turned off (switch interval 1000 s), so the other
    thread, made runnable just before, can only run when fn releases the GIL
    itself. It runs a bounded loop and exits. fn is called up to `calls`
    times (the OS may be slow to wake the thread on a loaded machine)."""
    go = threading.Event()
    progress = [0]

    def spin():
        go.wait()
        n = 0
        for _ in range(20000):
            n += 1
        progress[0] = n

    old = sys.getswitchinterval()
    t = threading.Thread(target=spin, daemon=True)
    t.start()  # returns once spin runs; it then blocks on go
    sys.setswitchinterval(1000.0)
    try:
        go.set()  # spin is now waiting for the GIL, which only fn can give up
        deadline = time.monotonic() + limit_s
        for _ in range(calls):
            fn()
            if progress[0] or time.monotonic() > deadline:
                break
        ran = progress[0] > 0
    finally:
        sys.setswitchinterval(old)
    t.join(30)
    return ran


class ValuesTest(unittest.TestCase):
    def test_known_vectors(self):
        # RFC 3720 B.4 and the CRC catalogue's check value.
        self.assertEqual(C.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(C.crc32c(bytes(32)), 0x8A9136AA)
        self.assertEqual(C.crc32c(b"\xff" * 32), 0x62A8AB43)
        self.assertEqual(C._pure_crc32c_update(0, b"123456789"), 0xE3069283)
        self.assertEqual(C.checksum("crc32c", b"123456789"), bytes.fromhex("e3069283"))
        self.assertEqual(C.checksum("sha256", b"abc"), hashlib.sha256(b"abc").digest())

    def test_buffers_and_chunks_agree(self):
        data = os.urandom(300_000)
        want = C._pure_crc32c_update(0, data[:70_000])
        for buf in (data[:70_000], bytearray(data[:70_000]), memoryview(bytearray(data))[:70_000]):
            self.assertEqual(C.crc32c(buf), want)
        for algo in ("crc32c", "sha256"):
            h = C.Hasher(algo)
            for i in range(0, len(data), 65_536):
                h.update(memoryview(data)[i:i + 65_536])
            self.assertEqual(h.digest(), C.checksum(algo, data))

    def test_numpy_page(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed")
        a = np.arange(1 << 16, dtype=np.uint16)
        self.assertEqual(C.checksum("crc32c", a), C.checksum("crc32c", a.tobytes()))


class GilTest(unittest.TestCase):
    PAGE = bytearray(os.urandom(16 << 20))

    def test_control_a_checksum_that_holds_the_gil_starves_the_thread(self):
        # The harness can fail: a C call that keeps the GIL lets nothing run.
        small = memoryview(self.PAGE)[:4096]
        self.assertFalse(progressed_beside(lambda: C._pure_crc32c_update(0, small), calls=3))
        if C.HAVE_FAST_CRC32C and C.CRC32C_RELEASES_GIL:
            import crc32c

            view = memoryview(self.PAGE)
            self.assertFalse(progressed_beside(lambda: crc32c.crc32c(view, 0, gil_release_mode=0), calls=5))

    def test_crc32c_releases_the_gil_on_a_page(self):
        if not C.HAVE_FAST_CRC32C:
            self.fail(f"the crc32c C extension is not installed: {C.backend()}")
        if not C.CRC32C_RELEASES_GIL:
            self.skipTest(f"crc32c older than 2.5 (Debian's python3-crc32c) holds the GIL: {C.backend()}")
        view = memoryview(self.PAGE)
        self.assertTrue(progressed_beside(lambda: C.checksum("crc32c", view)))
        h = C.Hasher("crc32c")
        self.assertTrue(progressed_beside(lambda: h.update(view)))

    def test_sha256_releases_the_gil_on_a_page(self):
        view = memoryview(self.PAGE)
        self.assertTrue(progressed_beside(lambda: C.checksum("sha256", view), calls=5))


class FallbackTest(unittest.TestCase):
    def test_missing_crc32c_warns_loudly_and_can_be_refused(self):
        code = r"""
import sys, warnings, logging, io
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "crc32c":
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
log = io.StringIO()
logging.getLogger("strata_client").addHandler(logging.StreamHandler(log))
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    from strata_client import checksum as C
assert not C.HAVE_FAST_CRC32C and C.backend() == "pure-python", C.backend()
assert any(issubclass(x.category, RuntimeWarning) and "unfit for serving" in str(x.message) for x in w), w
assert C.crc32c(b"123456789") == 0xE3069283
C.checksum("crc32c", bytes(70000))
text = log.getvalue()
assert "unfit for serving" in text and "70000-byte page" in text, text
try:
    C.require_fast_crc32c()
except C.ChecksumUnavailableError as e:
    assert "crc32c>=2.5" in str(e), e
else:
    raise AssertionError("require_fast_crc32c did not raise")
print("ok")
"""
        p = subprocess.run([sys.executable, "-c", code], cwd=_support.PYROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        out = p.stdout.decode(errors="replace")
        self.assertEqual(p.returncode, 0, out)
        self.assertTrue(out.strip().endswith("ok"), out)

    def test_fast_path_needs_nothing_else(self):
        if C.HAVE_FAST_CRC32C:
            C.require_fast_crc32c()


if __name__ == "__main__":
    unittest.main()
