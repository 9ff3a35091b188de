"""The top-level README's Python section, as a user follows it: a fresh
venv, `pip install ./python` into it, then the README's example block
against a running node, with the package imported from that venv (not from
the checkout).

The fresh venv is offline: `pip install --no-index --no-build-isolation`,
its dependencies (grpcio, protobuf, crc32c, numpy) and setuptools found
through a .pth file naming this interpreter's site-packages directories, so the test
needs no network and still fails when pyproject.toml is broken, a module or
the stubs are left out of the package, or a declared dependency range does
not admit the installed versions. (scripts/pyvenv.sh does the same install
with PyPI reachable when it builds the test venv.)
"""

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import unittest

import _support

README = os.path.join(_support.REPO, "README.md")


def readme_example() -> str:
    """The first ```python block after the README's "pip install ./python" line."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    at = text.find("pip install ./python")
    if at < 0:
        raise AssertionError("README.md has no `pip install ./python` line")
    m = re.compile(r"^```python\n(.*?)^```", re.S | re.M).search(text, at)
    if not m:
        raise AssertionError("README.md has no ```python block after `pip install ./python`")
    return m.group(1)


def unmet_dependencies() -> list:
    """python/pyproject.toml's dependencies this interpreter does not meet."""
    import tomllib
    from importlib.metadata import PackageNotFoundError, version

    from pip._vendor.packaging.requirements import Requirement

    with open(os.path.join(_support.PYROOT, "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    unmet = []
    for d in deps:
        r = Requirement(d)
        try:
            v = version(r.name)
        except PackageNotFoundError:
            v = None
        if v is None or not r.specifier.contains(v, prereleases=True):
            unmet.append(f"{d} (installed: {v})")
    return unmet


def _pip_supports_python_flag() -> bool:
    p = subprocess.run([sys.executable, "-m", "pip", "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    m = re.match(rb"pip (\d+)\.(\d+)", p.stdout)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (22, 3)


class ReadmeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.node = _support.Node()

    @classmethod
    def tearDownClass(cls):
        cls.node.stop()

    def test_example_in_a_fresh_venv_after_pip_install(self):
        if not _pip_supports_python_flag():
            self.skipTest(f"{sys.executable} has no pip >= 22.3 (pip --python): run the suite in the "
                          "venv scripts/pyvenv.sh builds")
        unmet = unmet_dependencies()
        if unmet:  # e.g. Debian's python3-crc32c 2.3; never in the venv scripts/pyvenv.sh builds
            self.skipTest(f"{sys.executable} does not meet strata-client's dependencies: {', '.join(unmet)}")
        code = readme_example()
        self.assertIn('"127.0.0.1:7070"', code)
        code = code.replace('"127.0.0.1:7070"', repr(self.node.addr))
        with tempfile.TemporaryDirectory(prefix="strata-readme-") as d:
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
            vpy = os.path.join(venv, "bin", "python")
            purelib = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     stdout=subprocess.PIPE, check=True, timeout=60).stdout.decode().strip()
            deps = set(site.getsitepackages()) | {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
            with open(os.path.join(purelib, "strata_test_deps.pth"), "w") as f:
                f.write("\n".join(sorted(deps)) + "\n")
            # A copy of python/ without tests, as pip would see a fresh checkout.
            src = os.path.join(d, "src")
            shutil.copytree(_support.PYROOT, src, ignore=shutil.ignore_patterns(
                "tests", "__pycache__", "build", "*.egg-info"))
            p = subprocess.run([sys.executable, "-m", "pip", "--python", vpy, "--disable-pip-version-check",
                                "install", "--no-index", "--no-build-isolation", src],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                               env=dict(os.environ, STRATA_GO_MODULE=_support.REPO))  # the copy's checkout
            out = p.stdout.decode(errors="replace")
            self.assertEqual(p.returncode, 0, "pip install ./python failed:\n" + out)
            check = ("import os, strata_client; "
                     "print('FROM', os.path.realpath(strata_client.__file__))\n")
            # The installed package's own native library, not the tests' build.
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "STRATA_NATIVE_LIB")}
            code += "\nfrom strata_client import native; print('NATIVE', native.native_status())\n"
            p = subprocess.run([vpy, "-c", check + code], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=120, env=env)
            out = p.stdout.decode(errors="replace")
            self.assertEqual(p.returncode, 0, "README example failed:\n" + out + "\nnode log:\n" + self.node.log())
            lines = out.strip().splitlines()
            self.assertTrue(lines[0].startswith("FROM " + os.path.realpath(purelib) + os.sep), lines[0])
            self.assertEqual(lines[-2], r"4 [b'\x00', b'\x01', b'\x02', b'\x03']")
            self.assertEqual(lines[-1], "NATIVE loaded: " + os.path.join(
                os.path.dirname(lines[0][len("FROM "):]), "_native", "libstrata.so"))


if __name__ == "__main__":
    unittest.main()
