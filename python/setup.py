"""Builds the native plane into the package: the Go client as a C shared
library (cmd/libstrata, strata_client/_native/libstrata.so; native.py says
why). pyproject.toml holds everything else.

`pip install ./python` runs this from the checkout (pip builds a local
directory in place), so the Go module is the directory above
($STRATA_GO_MODULE names it for a copy of python/ built elsewhere). It needs the
README's toolchain: go and a C compiler (cgo). STRATA_BUILD_NATIVE=0 builds
a package without the library (its clients run on the Python planes and say
so); without go the build fails, saying how to skip it, rather than ship a
client that is slow without knowing it.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
# The Go module the library is built from: the checkout python/ is in, or
# STRATA_GO_MODULE (a copy of python/ built elsewhere).
REPO = os.environ.get("STRATA_GO_MODULE") or os.path.dirname(HERE)


class BuildWithNative(build_py):
    def run(self):
        super().run()
        if os.environ.get("STRATA_BUILD_NATIVE", "1") == "0":
            return
        if not os.path.exists(os.path.join(REPO, "go.mod")) or not os.path.exists(os.path.join(REPO, "cmd", "libstrata")):
            raise RuntimeError(f"strata-client: the Go module is not at {REPO} (build from the repository's python/ "
                               "directory, or set STRATA_BUILD_NATIVE=0 for a package without the native plane)")
        if shutil.which("go") is None:
            raise RuntimeError("strata-client: go is not installed: it builds the native plane (cmd/libstrata); "
                               "install the README's toolchain, or set STRATA_BUILD_NATIVE=0")
        out = os.path.join(self.build_lib, "strata_client", "_native", "libstrata.so")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run([os.path.join(REPO, "scripts", "buildnative.sh"), os.path.abspath(out)], cwd=REPO, check=True)


try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1
    from wheel.bdist_wheel import bdist_wheel


class Wheel(bdist_wheel):
    """The library speaks C to ctypes, not Python's C API: any Python 3 on
    the platform it was built for."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


class NativeDistribution(Distribution):
    """A wheel that holds a shared library is a platform wheel."""

    def has_ext_modules(self):
        return os.environ.get("STRATA_BUILD_NATIVE", "1") != "0"


setup(cmdclass={"build_py": BuildWithNative, "bdist_wheel": Wheel}, distclass=NativeDistribution)
