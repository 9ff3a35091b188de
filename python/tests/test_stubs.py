"""The committed gRPC stubs: `scripts/genpy.sh --check` with this
interpreter (they are what protoc makes from the current
proto/strata/v1/strata.proto, and they import with this interpreter's
protobuf and grpcio; skipped without protoc and grpc_python_plugin), and an
import with warnings as errors that needs no tools."""

import os
import shutil
import subprocess
import sys
import unittest

import _support


class StubsTest(unittest.TestCase):
    @unittest.skipUnless(shutil.which("protoc") and shutil.which("grpc_python_plugin"),
                         "protoc / grpc_python_plugin not installed (apt: protobuf-compiler protobuf-compiler-grpc)")
    def test_genpy_check(self):
        p = subprocess.run(["bash", os.path.join(_support.REPO, "scripts", "genpy.sh"), "--check", sys.executable],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        out = p.stdout.decode(errors="replace")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("stubs current", out)

    def test_stubs_import_without_warnings(self):
        code = ("from strata_client._proto import strata_pb2, strata_pb2_grpc; "
                "assert strata_pb2.PutRequest(namespace_id=b'x').SerializeToString(); "
                "assert strata_pb2_grpc.StrataStub")
        p = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=_support.PYROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))


if __name__ == "__main__":
    unittest.main()
