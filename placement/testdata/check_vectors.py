#!/usr/bin/env python3
"""Reproduce strata's placement test vectors with the Python standard library.

This is the reference for non-Go clients: it implements the weighted
rendezvous scoring specified in the Go package doc of
github.com/stratakv/strata/placement, bit for bit, and checks every seed,
hash, score and ranking in vectors.json. Usage:

    python3 check_vectors.py [path/to/vectors.json]

Exit status 0 when everything matches, 1 otherwise.
"""

import json
import math
import os
import struct
import sys

MASK = (1 << 64) - 1


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & MASK
    return h


def mix64(z):
    """SplitMix64 finalizer."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def seed_of(node_id):
    return mix64(fnv1a64(node_id.encode("utf-8")))


def key_word(key):
    return int.from_bytes(key[:8], "little")


def uniform(h):
    """Top 53 bits with the lowest set, times 2^-53: exact, in (0, 1)."""
    return float((h >> 11) | 1) * 2.0**-53


LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
L1 = 6.666666666666735130e-01
L2 = 3.999999999940941908e-01
L3 = 2.857142874366239149e-01
L4 = 2.222219843214978396e-01
L5 = 1.818357216161805012e-01
L6 = 1.531383769920937332e-01
L7 = 1.479819860511658591e-01
SQRT2_OVER_2 = float.fromhex("0x1.6a09e667f3bcdp-1")


def ln(x):
    """FreeBSD e_log.c as in Go's math.log; each operation rounded once.

    Python evaluates left to right with one IEEE rounding per operation and
    never fuses a multiply-add, which is what the Go code forces.
    """
    f1, ki = math.frexp(x)
    if f1 < SQRT2_OVER_2:
        f1 *= 2
        ki -= 1
    f = f1 - 1
    k = float(ki)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)))
    t2 = s4 * (L2 + s4 * (L4 + s4 * L6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)


def score(weight, h):
    return weight / -ln(uniform(h))


def ranking(nodes, key):
    """Node IDs for key, best first: score, then hash, then ID, descending."""
    k = key_word(key)
    ranked = []
    for node_id, weight in nodes:
        h = mix64(k ^ seed_of(node_id))
        ranked.append((-score(weight, h), -h, node_id))
    ranked.sort()
    return [node_id for _, _, node_id in ranked]


def bits(x):
    return struct.pack(">d", x).hex()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "vectors.json")
    with open(path, encoding="utf-8") as f:
        vectors = json.load(f)
    failures = checked = 0

    def expect(what, got, want):
        nonlocal failures, checked
        checked += 1
        if got != want:
            failures += 1
            print(f"MISMATCH {what}: got {got}, want {want}")

    for view in vectors["views"]:
        nodes = [(n["id"], float(n["weight"])) for n in view["nodes"]]
        for n in view["nodes"]:
            expect(f"{view['name']} seed {n['id']!r}", f"{seed_of(n['id']):016x}", n["seed"])
        for vk in view["keys"]:
            key = bytes.fromhex(vk["key"])
            k = key_word(key)
            for i, (node_id, weight) in enumerate(nodes):
                h = mix64(k ^ seed_of(node_id))
                where = f"{view['name']} key {vk['key'][:16]} node {node_id!r}"
                expect(where + " hash", f"{h:016x}", vk["hashes"][i])
                expect(where + " score", bits(score(weight, h)), vk["scores"][i])
            expect(f"{view['name']} key {vk['key'][:16]} ranking", ranking(nodes, key), vk["ranking"])
    print(f"{checked} checks, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
