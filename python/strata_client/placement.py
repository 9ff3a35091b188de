"""Capacity-weighted rendezvous (HRW) placement, bit for bit as Go's
``github.com/stratakv/strata/placement`` (see its package doc): clients and
nodes that see the same membership compute the same owner of every key.

``tests/test_placement.py`` checks every seed, hash, score and ranking in
``placement/testdata/vectors.json``.
"""

from __future__ import annotations

import math
from typing import Iterable, List, Tuple

__all__ = ["View", "seed_of", "mix64", "ln", "score", "key_word", "uniform"]

_MASK = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3

_LN2_HI = 6.93147180369123816490e-01  # 0x3fe62e42fee00000
_LN2_LO = 1.90821492927058770002e-10  # 0x3dea39ef35793c76
_L1 = 6.666666666666735130e-01
_L2 = 3.999999999940941908e-01
_L3 = 2.857142874366239149e-01
_L4 = 2.222219843214978396e-01
_L5 = 1.818357216161805012e-01
_L6 = 1.531383769920937332e-01
_L7 = 1.479819860511658591e-01
_SQRT2_OVER_2 = float.fromhex("0x1.6a09e667f3bcdp-1")
_TWO_M53 = 2.0 ** -53


def mix64(z: int) -> int:
    """The SplitMix64 finalizer."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def seed_of(node_id: str) -> int:
    """mix64(fnv1a64(UTF-8 bytes of the node ID))."""
    h = _FNV_OFFSET
    for b in node_id.encode("utf-8"):
        h ^= b
        h = (h * _FNV_PRIME) & _MASK
    return mix64(h)


def key_word(key: bytes) -> int:
    """The first 8 bytes of the key, little-endian."""
    return int.from_bytes(bytes(key[:8]), "little")


def uniform(h: int) -> float:
    """Top 53 bits with the lowest forced to one, times 2^-53 (exact)."""
    return float((h >> 11) | 1) * _TWO_M53


def ln(x: float) -> float:
    """FreeBSD e_log.c as Go's pure-Go math.log; CPython rounds every
    operation once and never fuses a multiply-add, as the Go code forces."""
    f1, ki = math.frexp(x)
    if f1 < _SQRT2_OVER_2:
        f1 *= 2
        ki -= 1
    f = f1 - 1
    k = float(ki)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (_L1 + s4 * (_L3 + s4 * (_L5 + s4 * _L7)))
    t2 = s4 * (_L2 + s4 * (_L4 + s4 * _L6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)


def score(weight: float, h: int) -> float:
    return weight / -ln(uniform(h))


class View:
    """An immutable snapshot of the live nodes: (node_id, weight) pairs.

    Nodes are indexed in ascending order of their IDs (Unicode code point
    order, which is UTF-8 byte order), like the Go View.
    """

    def __init__(self, nodes: Iterable[Tuple[str, float]]):
        ns = sorted(((str(i), float(w)) for i, w in nodes), key=lambda n: n[0])
        for j, (nid, w) in enumerate(ns):
            if not nid:
                raise ValueError("placement: empty node id")
            if j and ns[j - 1][0] == nid:
                raise ValueError(f"placement: duplicate node id {nid!r}")
            if not (w > 0) or math.isinf(w):
                raise ValueError(f"placement: node {nid!r} weight {w!r} must be finite and > 0")
        self._nodes: List[Tuple[str, float]] = ns
        self._seeds = [seed_of(nid) for nid, _ in ns]
        self._weights = [w for _, w in ns]

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def ids(self) -> List[str]:
        return [n[0] for n in self._nodes]

    def nodes(self) -> List[Tuple[str, float]]:
        return list(self._nodes)

    def _ranks(self, key: bytes) -> List[Tuple[float, int, int]]:
        k = key_word(key)
        out = []
        for i, (seed, w) in enumerate(zip(self._seeds, self._weights)):
            h = mix64(k ^ seed)
            out.append((score(w, h), h, i))
        return out

    def owner(self, key: bytes) -> int:
        """Index of the node that owns ``key``; -1 for an empty view."""
        if not self._nodes:
            return -1
        best = None
        for r in self._ranks(key):
            # higher score, then higher hash, then lower index
            if best is None or (r[0], r[1], -r[2]) > (best[0], best[1], -best[2]):
                best = r
        return best[2]

    def candidates(self, key: bytes, n: int = 0) -> List[int]:
        """Indices of the key's top ``n`` nodes (all when n <= 0), best first."""
        ranks = sorted(self._ranks(key), key=lambda r: (-r[0], -r[1], r[2]))
        if n > 0:
            ranks = ranks[:n]
        return [r[2] for r in ranks]

    def ranking(self, key: bytes) -> List[str]:
        """Node IDs for ``key``, best first."""
        return [self._nodes[i][0] for i in self.candidates(key)]
