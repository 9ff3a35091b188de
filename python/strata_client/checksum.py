"""Page checksums: CRC-32C (Castagnoli) as 4 bytes big-endian, or SHA-256.

CRC-32C uses Debian's ``python3-crc32c`` (a C extension: about 1-2 GB/s on
one core with its software slice-by-8 path, more with SSE4.2) when it is
installed, and otherwise a pure-Python table-driven fallback. The fallback
is correct but slow (a few MB/s, i.e. around a second for a 2 MiB page), so
it is only fit for tests and tiny pages: install python3-crc32c, or use a
``sha256`` namespace (hashlib, ~1.5 GB/s) where it is missing.
``HAVE_FAST_CRC32C`` says which one is in use.
"""

from __future__ import annotations

import hashlib
import struct


__all__ = ["crc32c", "crc32c_update", "checksum", "Hasher", "HAVE_FAST_CRC32C"]

try:  # Debian: python3-crc32c
    import crc32c as _crc32c_mod

    def crc32c_update(crc: int, data) -> int:
        return _crc32c_mod.crc32c(data, crc)

    HAVE_FAST_CRC32C = True
except Exception:  # pragma: no cover - exercised only without the package
    _POLY = 0x82F63B78
    _TABLE = []
    for _i in range(256):
        _c = _i
        for _ in range(8):
            _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
        _TABLE.append(_c)
    _TABLE = tuple(_TABLE)

    def crc32c_update(crc: int, data) -> int:
        c = crc ^ 0xFFFFFFFF
        t = _TABLE
        for b in bytes(data):
            c = t[(c ^ b) & 0xFF] ^ (c >> 8)
        return c ^ 0xFFFFFFFF

    HAVE_FAST_CRC32C = False


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
