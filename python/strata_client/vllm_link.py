"""The vLLM connector's connection to strata, shared by its scheduler and
worker halves: a client and the shard namespaces, opened on a background
thread and retried every few seconds while strata is unreachable, so that
neither vLLM's start-up nor its step loop ever waits on the network or sees
an exception. Until it is connected every lookup is a miss and every save
is skipped (counted)."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Optional

from .client import Client
from .descriptor import Descriptor
from .futures import AsyncNamespace
from .namespace import Namespace

log = logging.getLogger("strata_client.vllm")


class Counters:
    """Named event counts, safe to bump from the I/O pool's threads."""

    def __init__(self, *names: str):
        self._lock = threading.Lock()
        self._c: Dict[str, int] = dict.fromkeys(names, 0)  # guarded by _lock

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._c[name] += n

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._c)


class Link:
    """Client + namespaces (by shard name) + one I/O pool."""

    def __init__(self, settings, descriptors: Callable[[], Dict[str, Descriptor]], name: str):
        self.s = settings
        self._descriptors = descriptors
        self.pool = ThreadPoolExecutor(max_workers=settings.io_threads, thread_name_prefix=f"strata-{name}")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        # guarded by _lock
        self._client: Optional[Client] = None
        self._ns: Dict[str, Namespace] = {}
        self._aio: Dict[str, AsyncNamespace] = {}
        self.last_error = ""
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Connect in the background (the descriptors may need state the
        worker learns at register_kv_caches, so this is separate from
        construction)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._connect_loop, name="strata-connect", daemon=True)
            self._thread.start()

    def _connect_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._connect_once()
                return
            except Exception as e:  # strata unreachable or refusing: retry
                self.last_error = f"{type(e).__name__}: {e}"
                log.warning("strata: cannot connect to %s (%s); retrying in %.0fs", self.s.addr, self.last_error,
                            self.s.connect_retry)
            self._stop.wait(self.s.connect_retry)

    def _connect_once(self) -> None:
        descs = self._descriptors()
        c = Client(self.s.addr, token=self.s.token, node_timeout=self.s.node_timeout)
        try:
            opened = {shard: c.open(d) for shard, d in descs.items()}
        except Exception:
            c.close()
            raise
        with self._lock:
            if self._stop.is_set():
                c.close()
                return
            self._client = c
            self._ns = opened
            self._aio = {shard: AsyncNamespace(ns, executor=self.pool) for shard, ns in opened.items()}
        log.info("strata: connected to %s, namespaces %s", self.s.addr,
                 {k: v.id.hex()[:12] for k, v in opened.items()})

    def ready(self) -> bool:
        with self._lock:
            return self._client is not None

    def client(self) -> Optional[Client]:
        """The client (None until connected): transfer rooms are its calls."""
        with self._lock:
            return self._client

    def ns(self, shard: str) -> Optional[Namespace]:
        with self._lock:
            return self._ns.get(shard)

    def shards(self) -> Dict[str, Namespace]:
        with self._lock:
            return dict(self._ns)

    def aio(self, shard: str) -> Optional[AsyncNamespace]:
        with self._lock:
            return self._aio.get(shard)

    def close(self) -> None:
        """Stop connecting, wait for submitted calls, close the client."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.s.node_timeout * 4 + 5)
        self.pool.shutdown(wait=True)
        with self._lock:
            c, self._client = self._client, None
            self._ns, self._aio = {}, {}
        if c is not None:
            c.close()
