"""The built wheel: `pip wheel ./python` builds the native plane into the
package (python/setup.py), and the wheel, installed on its own (no
checkout on the path), loads its own libstrata.so and moves pages through
it against a real node."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from _support import PYROOT, Node, bin_dir

_CHILD = r"""
import json, os, sys
import strata_client
from strata_client import Client, Descriptor, native
d = Descriptor(tenant="acme", model="xlang/wheel", model_revision="r1", engine="xlang", dtype="bf16",
               page_tokens=16, num_layers=2, num_kv_heads=2, head_dim=32)
with Client(sys.argv[1], refresh_interval=0) as c:
    ns = c.open(d)
    keys = ns.page_keys(list(range(64)))
    data = [bytes([i]) * ns.page_bytes for i in range(len(keys))]
    stored = [r.status for r in ns.put_chain(keys, data)]
    got = ns.get(keys)
    print(json.dumps({"package": strata_client.__file__, "status": native.native_status(), "active": c.native_active,
                      "stored": stored, "equal": [bytes(g) for g in got] == data, "stats": c.stats}))
"""


class WheelTest(unittest.TestCase):
    def test_wheel_carries_and_uses_the_native_plane(self):
        bin_dir()  # go is here (else skipped, saying why)
        node = Node()
        self.addCleanup(node.stop)
        with tempfile.TemporaryDirectory(prefix="strata-wheel-") as tmp:
            wheels, target = os.path.join(tmp, "wheels"), os.path.join(tmp, "site")
            p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels,
                                PYROOT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace")[-3000:])
            (whl,) = os.listdir(wheels)
            self.assertRegex(whl, r"^strata_client-.*-py3-none-linux_\w+\.whl$")
            p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target,
                                os.path.join(wheels, whl)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace")[-3000:])
            env = {k: v for k, v in os.environ.items() if k not in ("STRATA_NATIVE_LIB", "PYTHONPATH")}
            env["PYTHONPATH"] = target
            p = subprocess.run([sys.executable, "-c", _CHILD, node.addr], cwd=tmp, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace")[-3000:])
            out = json.loads(p.stdout.decode().strip().splitlines()[-1])
            self.assertTrue(out["package"].startswith(target), out)
            self.assertEqual(out["status"], "loaded: " + os.path.join(target, "strata_client", "_native", "libstrata.so"))
            self.assertTrue(out["active"], out)
            self.assertEqual(out["stored"], ["COMMITTED"] * 4)
            self.assertTrue(out["equal"], out)
            self.assertEqual((out["stats"]["native_puts"], out["stats"]["native_gets"]), (1, 1), out)


if __name__ == "__main__":
    unittest.main()
