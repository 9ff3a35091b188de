"""The committed gRPC stubs are what scripts/genpy.sh generates from the
current proto/strata/v1/strata.proto (skipped without protoc and
grpc_python_plugin)."""

import os
import shutil
import subprocess
import tempfile
import unittest

import _support

PROTO_DIR = os.path.join(_support.PYROOT, "strata_client", "_proto")


@unittest.skipUnless(shutil.which("protoc") and shutil.which("grpc_python_plugin"),
                     "protoc / grpc_python_plugin not installed (apt: protobuf-compiler protobuf-compiler-grpc)")
class StubsTest(unittest.TestCase):
    def test_stubs_are_current(self):
        with tempfile.TemporaryDirectory() as out:
            env = dict(os.environ, GENPY_OUT=out)
            p = subprocess.run(["bash", os.path.join(_support.REPO, "scripts", "genpy.sh")], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
            for name in ("strata_pb2.py", "strata_pb2_grpc.py"):
                with open(os.path.join(out, name), "rb") as f:
                    fresh = f.read()
                with open(os.path.join(PROTO_DIR, name), "rb") as f:
                    committed = f.read()
                self.assertEqual(fresh, committed, f"{name} is stale: run scripts/genpy.sh")


if __name__ == "__main__":
    unittest.main()
