"""strata_client.futures (the non-blocking layer the vLLM connector uses)
against a real node: futures return at once, results and errors are the
blocking client's, asyncio awaits them."""

from __future__ import annotations

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _support  # noqa: E402


class AsyncNamespaceTest(_support.OneNodeTest):
    def test_put_lookup_get_release(self):
        from strata_client.errors import LeaseNotFoundError
        from strata_client.futures import AsyncNamespace

        ans = AsyncNamespace(self.ns, max_workers=2)
        self.addCleanup(ans.close)
        size = self.ns.page_bytes
        keys = self.ns.page_keys(list(range(300, 300 + 3 * 16)))
        pages = [bytes([i + 1]) * size for i in range(3)]
        res = ans.put([(k, p) for k, p in zip(keys, pages)]).result(timeout=20)
        self.assertTrue(all(r.stored for r in res), res)
        hit, present, lease = ans.lookup(keys, lease=True).result(timeout=20)
        self.assertEqual(hit, 3)
        got = asyncio.run(ans.aget(keys, lease=lease))
        self.assertEqual([bytes(g) for g in got], pages)
        ans.release(lease).result(timeout=20)
        with self.assertRaises(LeaseNotFoundError):
            ans.get(keys, lease=lease).result(timeout=20)

    def test_closed_refuses(self):
        from strata_client.futures import AsyncNamespace

        ans = AsyncNamespace(self.ns, max_workers=1)
        ans.close()
        with self.assertRaises(RuntimeError):
            ans.lookup([b"\0" * 32])


if __name__ == "__main__":
    unittest.main()
