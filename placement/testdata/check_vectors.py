#!/usr/bin/env python3
"""Check strata's placement test vectors against the Python client.

The weighted rendezvous scoring is specified in the Go package doc of
github.com/stratakv/strata/placement; python/strata_client/placement.py
implements it bit for bit with the Python standard library alone, and is the
reference for non-Go clients. This script loads that module by its path (the
rest of the client, and grpc, are not needed) and checks every seed, hash,
score and ranking in vectors.json. Usage:

    python3 check_vectors.py [path/to/vectors.json]

Exit status 0 when everything matches, 1 otherwise.
"""

import importlib.util
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "..", "python", "strata_client", "placement.py")


def load_placement():
    """The Python client's placement module, loaded from its file."""
    spec = importlib.util.spec_from_file_location("strata_client_placement", CLIENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bits(x):
    return struct.pack(">d", x).hex()


def main():
    P = load_placement()
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "vectors.json")
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
        ranked = P.View(nodes)
        for n in view["nodes"]:
            expect(f"{view['name']} seed {n['id']!r}", f"{P.seed_of(n['id']):016x}", n["seed"])
        for vk in view["keys"]:
            key = bytes.fromhex(vk["key"])
            k = P.key_word(key)
            for i, (node_id, weight) in enumerate(nodes):
                h = P.mix64(k ^ P.seed_of(node_id))
                where = f"{view['name']} key {vk['key'][:16]} node {node_id!r}"
                expect(where + " hash", f"{h:016x}", vk["hashes"][i])
                expect(where + " score", bits(P.score(weight, h)), vk["scores"][i])
            expect(f"{view['name']} key {vk['key'][:16]} ranking", ranked.ranking(key), vk["ranking"])
    print(f"{checked} checks, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
