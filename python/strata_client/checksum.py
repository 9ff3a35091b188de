"""Page checksums: CRC-32C (Castagnoli) as 4 bytes big-endian, or SHA-256.

Both run with the GIL released on large buffers, so verifying or summing a
page in an engine's scheduler process does not stall its other Python
threads:

- CRC-32C comes from the ``crc32c`` package (PyPI ``crc32c>=2.5``, a
  dependency of ``strata-client``): a C extension using the SSE 4.2 / ARMv8
  CRC instructions where the CPU has them (``crc32c.hardware_based``), a
  slice-by-8 software path otherwise. It is called with
  ``gil_release_mode=-1``: the GIL is released for buffers of 32 KiB or
  more. It accepts any buffer (bytes, bytearray, memoryview, numpy, a
  contiguous CPU torch tensor's memory) without a copy.
  ``google-crc32c`` was not chosen: its C extension only takes read-only
  buffers (``bytearray`` and ``memoryview`` of one are refused, so a page in
  a host pool would have to be copied first) and only releases the GIL for
  ``bytes`` objects of 1 MiB or more.
- SHA-256 is ``hashlib`` (OpenSSL), which releases the GIL for inputs over
  2 KiB.

Debian's ``python3-crc32c`` (2.3) is also accepted; it has no
``gil_release_mode`` and holds the GIL, which is detected here
(``CRC32C_RELEASES_GIL``).

Without any ``crc32c`` module a pure-Python table-driven fallback is used.
It is correct but runs at a few MB/s (around a second for a 2 MiB page) and
holds the GIL throughout, so it is unfit for serving: importing this module
then emits a ``RuntimeWarning`` and logs an error on the ``strata_client``
logger, and the first CRC over 64 KiB or more logs it again with the page
size. ``require_fast_crc32c()`` raises ``ChecksumUnavailableError`` in that
case, for callers that would rather refuse to start; ``backend()`` says
which implementation is in use (for stats and logs).
"""

from __future__ import annotations

import hashlib
import logging
import struct
import warnings


__all__ = [
    "crc32c", "crc32c_update", "checksum", "Hasher", "backend", "require_fast_crc32c",
    "ChecksumUnavailableError", "HAVE_FAST_CRC32C", "CRC32C_HARDWARE", "CRC32C_RELEASES_GIL",
]

_log = logging.getLogger("strata_client")

# The install hint given wherever the fast CRC is missing.
_HINT = "pip install 'crc32c>=2.5' (a dependency of strata-client: pip install ./python)"


class ChecksumUnavailableError(RuntimeError):
    """Raised by require_fast_crc32c() when only the pure-Python CRC-32C is available."""


def _pure_table():
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


def _pure_crc32c_update(crc: int, data, _t=_pure_table()) -> int:
    """CRC-32C in pure Python: the fallback and the reference for tests."""
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = _t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


try:
    import crc32c as _crc32c_mod
except ImportError as _e:  # no crc32c module at all
    _crc32c_mod = None
    _IMPORT_ERROR = _e
else:
    _IMPORT_ERROR = None

if _crc32c_mod is not None:
    HAVE_FAST_CRC32C = True
    CRC32C_HARDWARE = bool(getattr(_crc32c_mod, "hardware_based", False))
    _fn = _crc32c_mod.crc32c
    try:
        _fn(b"", 0, gil_release_mode=-1)
        CRC32C_RELEASES_GIL = True
    except TypeError:  # crc32c < 2.5 (Debian's python3-crc32c 2.3): no gil_release_mode
        CRC32C_RELEASES_GIL = False

    if CRC32C_RELEASES_GIL:
        def crc32c_update(crc: int, data) -> int:
            """CRC-32C of ``data`` continuing from ``crc`` (GIL released for >= 32 KiB)."""
            return _fn(data, crc, gil_release_mode=-1)
    else:
        def crc32c_update(crc: int, data) -> int:
            """CRC-32C of ``data`` continuing from ``crc`` (old crc32c: the GIL is held)."""
            return _fn(data, crc)
else:
    HAVE_FAST_CRC32C = False
    CRC32C_HARDWARE = False
    CRC32C_RELEASES_GIL = False
    _slow_warned = False
    _msg = (f"strata_client: the crc32c C extension is not installed ({_IMPORT_ERROR}); "
            "CRC-32C page checksums fall back to pure Python, a few MB/s with the GIL held "
            f"(about a second per 2 MiB page): unfit for serving. Fix: {_HINT}, or use "
            "namespaces with checksum='sha256' (hashlib).")
    warnings.warn(_msg, RuntimeWarning, stacklevel=2)
    _log.error("%s", _msg)

    def crc32c_update(crc: int, data) -> int:
        """CRC-32C of ``data`` continuing from ``crc`` (pure-Python fallback: slow)."""
        global _slow_warned
        if not _slow_warned and memoryview(data).nbytes >= 64 << 10:
            _slow_warned = True
            _log.error("strata_client: pure-Python CRC-32C over a %d-byte page: this is slow. Fix: %s",
                       memoryview(data).nbytes, _HINT)
        return _pure_crc32c_update(crc, data)


def backend() -> str:
    """Which CRC-32C implementation is in use: "crc32c (hardware, GIL released)",
    "crc32c (software, GIL held)", "pure-python", ..."""
    if not HAVE_FAST_CRC32C:
        return "pure-python"
    return (f"crc32c ({'hardware' if CRC32C_HARDWARE else 'software'}, "
            f"GIL {'released' if CRC32C_RELEASES_GIL else 'held'})")


def require_fast_crc32c() -> None:
    """Raise ChecksumUnavailableError unless the crc32c C extension is in use."""
    if not HAVE_FAST_CRC32C:
        raise ChecksumUnavailableError(
            f"the crc32c C extension is not installed ({_IMPORT_ERROR}): {_HINT}")


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C of ``data`` (continuing from ``crc``)."""
    return crc32c_update(crc, data)


def checksum(algorithm: str, data) -> bytes:
    """The wire checksum of a page: CRC-32C big-endian or the SHA-256 digest."""
    if algorithm == "sha256":
        return hashlib.sha256(data).digest()
    return struct.pack(">I", crc32c_update(0, data))


class Hasher:
    """Incremental page checksum, fed chunk by chunk as a page streams in."""

    __slots__ = ("algorithm", "_crc", "_sha")

    def __init__(self, algorithm: str):
        self.algorithm = algorithm
        self._crc = 0
        self._sha = hashlib.sha256() if algorithm == "sha256" else None

    def update(self, data) -> None:
        if self._sha is not None:
            self._sha.update(data)
        else:
            self._crc = crc32c_update(self._crc, data)

    def digest(self) -> bytes:
        if self._sha is not None:
            return self._sha.digest()
        return struct.pack(">I", self._crc)
