"""scripts/pyvenv.sh's key and input checks, on a copy of the repository's
files (nothing is built: --path only says where the venv would be)."""

import os
import shutil
import subprocess
import tempfile
import unittest

import _support


class PyvenvKeyTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="strata-pyvenv-")
        self.addCleanup(shutil.rmtree, self.repo, True)
        os.makedirs(os.path.join(self.repo, "scripts"))
        shutil.copy(os.path.join(_support.REPO, "scripts", "pyvenv.sh"), os.path.join(self.repo, "scripts"))
        shutil.copytree(os.path.join(_support.PYROOT, "requirements"), os.path.join(self.repo, "python", "requirements"))
        shutil.copy(os.path.join(_support.PYROOT, "pyproject.toml"), os.path.join(self.repo, "python"))
        self.root = os.path.join(self.repo, "venvs")

    def run_script(self, *args):
        env = dict(os.environ, STRATA_VENV_ROOT=self.root)
        return subprocess.run(["bash", os.path.join(self.repo, "scripts", "pyvenv.sh")] + list(args), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)

    def path(self):
        p = self.run_script("--path")
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        out = p.stdout.decode().strip()
        self.assertEqual(os.path.dirname(out), self.root)
        return out

    def req(self, name):
        return os.path.join(self.repo, "python", "requirements", name)

    def test_key_follows_every_requirement_file(self):
        base = self.path()
        self.assertEqual(self.path(), base, "the same files give the same venv")
        with open(self.req("base.txt"), "a") as f:
            f.write("# a comment is a change\n")
        changed = self.path()
        self.assertNotEqual(changed, base)
        with open(self.req("zzengine.txt"), "w") as f:
            f.write("six==1.16.0\n")
        self.assertNotEqual(self.path(), changed, "a new engine file is a new venv")
        os.remove(self.req("zzengine.txt"))
        self.assertEqual(self.path(), changed)
        self.assertFalse(os.path.exists(self.root) and os.listdir(self.root), "--path builds nothing")

    def test_loose_requirement_lines_are_refused(self):
        for line in ("torch>=2", "six", "six==1.16.0 ; python_version > '3'"):
            with open(self.req("zzengine.txt"), "w") as f:
                f.write(line + "\n")
            p = self.run_script("--path")
            self.assertNotEqual(p.returncode, 0, line)
            self.assertIn("must be name==version", p.stderr.decode(), line)
            self.assertIn("zzengine.txt:1", p.stderr.decode(), line)


if __name__ == "__main__":
    unittest.main()
