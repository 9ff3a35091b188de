"""What the engine connectors (lmcache.py, lmcache_mp.py, sglang.py) share: a namespace
opened on first use and reopened at most every ``reconnect_interval``
seconds after a failure, cumulative counters, and failures counted and
logged at most once per operation every 10 seconds; batches cut into node
calls of bounded bytes (spans)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Dict, Iterable, Optional

from .client import Client
from .namespace import Namespace

# _LOG_EVERY is how often one operation's failures are logged, in seconds.
_LOG_EVERY = 10.0


class Connected:
    """A mixin for an engine connector. The connector sets addresses,
    token, node_timeout and reconnect_interval, has a descriptor() method,
    and calls _init_connected first thing in its constructor."""

    addresses: str
    token: Optional[str]
    node_timeout: float
    reconnect_interval: float

    def _init_connected(self, what: str, logger: logging.Logger, counters: Iterable[str]) -> None:
        """what names the connector in log lines; counters are the names
        counters() reports (a "not_connected" one counts the calls refused
        while reconnecting is not due)."""
        self._what = what
        self._log = logger
        self._lock = threading.Lock()
        self._client: Optional[Client] = None
        self._ns: Optional[Namespace] = None
        self._last_attempt = 0.0
        self._last_error = ""
        self._logged: Dict[str, float] = {}
        self._counters: Dict[str, int] = {k: 0 for k in counters}

    def descriptor(self):
        raise NotImplementedError

    def _ensure(self) -> Namespace:
        """The namespace, opening it (and the client) if none is open.
        Raises ConnectionError while a reconnect is not due yet, or what
        opening raised."""
        ns = self._ns
        if ns is not None:
            return ns
        with self._lock:
            if self._ns is not None:
                return self._ns
            now = time.monotonic()
            if self._last_attempt and now - self._last_attempt < self.reconnect_interval:
                raise ConnectionError(f"strata not connected (last error: {self._last_error})")
            self._last_attempt = now
            try:
                d = self.descriptor()
                if self._client is None:
                    self._client = Client(self.addresses, token=self.token, node_timeout=self.node_timeout)
                self._ns = self._client.open(d)
                self._log.info("%s: namespace %s (%d-byte pages) on %s", self._what, self._ns.id.hex()[:12],
                               self._ns.page_bytes, self.addresses)
                return self._ns
            except Exception as e:
                self._last_error = str(e)
                raise

    def _fail(self, op: str, e: BaseException) -> None:
        """Count a failed op (a miss to the engine) and log it, at most once
        per op every 10 seconds."""
        with self._lock:
            self._counters["failures"] += 1
            if "not_connected" in self._counters and isinstance(e, ConnectionError) and "not connected" in str(e):
                self._counters["not_connected"] += 1
        now = time.monotonic()
        if now - self._logged.get(op, -1e9) >= _LOG_EVERY:
            self._logged[op] = now
            self._log.warning("%s: %s failed: %s", self._what, op, e)

    def _count(self, **kv: int) -> None:
        with self._lock:
            for k, v in kv.items():
                self._counters[k] = self._counters.get(k, 0) + v

    def counters(self) -> Dict[str, int]:
        """Cumulative counters: hits, misses, writes, failures."""
        with self._lock:
            return dict(self._counters)


def spans(n: int, page_bytes: int, limit: int):
    """[start, end) runs of n pages of at most limit bytes (one page at
    least): a batch of big pages is several node calls, each bounded by
    its own node timeout, not one call that no timeout fits."""
    step = max(1, limit // max(1, page_bytes))
    for a in range(0, n, step):
        yield a, min(n, a + step)
