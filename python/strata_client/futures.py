"""Non-blocking calls on a namespace: futures and asyncio.

The client's calls (``Namespace.lookup``, ``get``, ``put``, ``delete`` and
a lease's ``renew``/``release``) block their caller until every node's part
is answered or timed out. An engine's scheduler loop must not wait on the
network, so this module runs those same calls on a small thread pool and
hands back ``concurrent.futures.Future`` objects (or awaitables with the
``a*`` methods). Nothing here speaks a protocol: every call is the
blocking client's, with its routing, retries, timeouts, checksum
verification and error mapping, run on another thread. The client's gRPC
channels and raw-plane connection pools are thread-safe, so calls overlap.

    from strata_client import Client
    from strata_client.futures import AsyncNamespace

    with Client("127.0.0.1:7070") as c:
        ans = AsyncNamespace(c.open(descriptor), max_workers=4)
        fut = ans.lookup(keys, lease=True)        # returns at once
        ...
        if fut.done():
            hit, present, lease = fut.result()
        pages = await ans.aget(keys[:hit], bufs, lease=lease)   # in asyncio code
        ans.close()

A future's ``result()`` raises what the blocking call would have raised.
``close`` waits for the calls already submitted and refuses new ones
(``RuntimeError`` from ``submit``, as ``ThreadPoolExecutor`` does).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, List, Optional, Sequence

from .client import Lease, LookupResult, PutResult
from .namespace import Namespace

__all__ = ["AsyncNamespace"]


class AsyncNamespace:
    """A namespace whose calls return futures instead of blocking.

    ``executor`` may be shared between namespaces (it is not shut down by
    ``close`` then); without one, a pool of ``max_workers`` threads named
    ``strata-<prefix>`` is created and owned.
    """

    def __init__(self, ns: Namespace, max_workers: int = 4, executor: Optional[ThreadPoolExecutor] = None,
                 thread_name_prefix: str = "strata-io"):
        self.ns = ns
        self._owned = executor is None
        self._pool = executor or ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name_prefix)

    # ---- futures ---------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Future:
        """Run any blocking call on the pool (e.g. a sequence of client calls
        that belong together)."""
        return self._pool.submit(fn, *args, **kw)

    def lookup(self, keys: Sequence[bytes], lease: bool = False, ttl_ms: int = 0,
               timeout: Optional[float] = None) -> "Future[LookupResult]":
        return self._pool.submit(self.ns.lookup, keys, lease, ttl_ms, timeout)

    def exists(self, keys: Sequence[bytes], timeout: Optional[float] = None) -> "Future[int]":
        return self._pool.submit(self.ns.exists, keys, timeout)

    def get(self, keys: Sequence[bytes], bufs: Optional[Sequence[Any]] = None, lease: Optional[Lease] = None,
            timeout: Optional[float] = None) -> "Future[List[Optional[Any]]]":
        return self._pool.submit(self.ns.get, keys, bufs, lease, timeout)

    def put(self, pages: Sequence[Any], timeout: Optional[float] = None) -> "Future[List[PutResult]]":
        return self._pool.submit(self.ns.put, pages, timeout)

    def delete(self, keys: Sequence[bytes], timeout: Optional[float] = None) -> "Future[int]":
        return self._pool.submit(self.ns.delete, keys, timeout)

    def renew(self, lease: Lease, ttl_ms: int = 0, timeout: Optional[float] = None) -> "Future[None]":
        return self._pool.submit(lease.renew, ttl_ms, timeout)

    def release(self, lease: Lease, timeout: Optional[float] = None) -> "Future[None]":
        return self._pool.submit(lease.release, timeout)

    # ---- asyncio -----------------------------------------------------------------

    async def alookup(self, keys: Sequence[bytes], lease: bool = False, ttl_ms: int = 0,
                      timeout: Optional[float] = None) -> LookupResult:
        return await asyncio.wrap_future(self.lookup(keys, lease, ttl_ms, timeout))

    async def aget(self, keys: Sequence[bytes], bufs: Optional[Sequence[Any]] = None, lease: Optional[Lease] = None,
                   timeout: Optional[float] = None) -> List[Optional[Any]]:
        return await asyncio.wrap_future(self.get(keys, bufs, lease, timeout))

    async def aput(self, pages: Sequence[Any], timeout: Optional[float] = None) -> List[PutResult]:
        return await asyncio.wrap_future(self.put(pages, timeout))

    async def adelete(self, keys: Sequence[bytes], timeout: Optional[float] = None) -> int:
        return await asyncio.wrap_future(self.delete(keys, timeout))

    # ---- lifetime ------------------------------------------------------------------

    def close(self, wait: bool = True) -> None:
        """Stop taking calls; with ``wait``, return once the submitted ones
        finished. A shared executor is left running."""
        if self._owned:
            self._pool.shutdown(wait=wait)

    def __enter__(self) -> "AsyncNamespace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
