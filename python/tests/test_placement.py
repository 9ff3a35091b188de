"""Weighted rendezvous placement against Go's vectors, bit for bit
(placement/testdata/vectors.json)."""

import json
import os
import struct
import unittest

import _support  # noqa: F401
from strata_client import placement as P

VECTORS = os.path.join(_support.REPO, "placement", "testdata", "vectors.json")


class PlacementVectorsTest(unittest.TestCase):
    def test_vectors(self):
        with open(VECTORS, encoding="utf-8") as f:
            vectors = json.load(f)
        checked = 0
        for view in vectors["views"]:
            nodes = [(n["id"], float(n["weight"])) for n in view["nodes"]]
            v = P.View(nodes)
            for n in view["nodes"]:
                self.assertEqual(f"{P.seed_of(n['id']):016x}", n["seed"], f"{view['name']} seed {n['id']!r}")
            for vk in view["keys"]:
                key = bytes.fromhex(vk["key"])
                k = P.key_word(key)
                for i, (nid, w) in enumerate(nodes):
                    h = P.mix64(k ^ P.seed_of(nid))
                    self.assertEqual(f"{h:016x}", vk["hashes"][i])
                    self.assertEqual(struct.pack(">d", P.score(w, h)).hex(), vk["scores"][i], f"{view['name']} {nid}")
                    checked += 1
                self.assertEqual(v.ranking(key), vk["ranking"], view["name"])
                self.assertEqual(v.ids[v.owner(key)], vk["ranking"][0])
                self.assertEqual([v.ids[i] for i in v.candidates(key, 2)], vk["ranking"][:2])
        self.assertGreater(checked, 0)

    def test_bad_views(self):
        for nodes in ([("", 1.0)], [("a", 1.0), ("a", 2.0)], [("a", 0.0)], [("a", float("inf"))], [("a", float("nan"))]):
            with self.assertRaises(ValueError):
                P.View(nodes)
        self.assertEqual(P.View([]).owner(b"\0" * 32), -1)


if __name__ == "__main__":
    unittest.main()
