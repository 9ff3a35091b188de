"""A small prefill–decode proxy for vLLM engines that use StrataConnector
(``kv_role: kv_producer`` for the prefill, ``kv_consumer`` for the decode).

The installed vLLM wheel ships no P/D proxy (its toy proxy lives in vLLM's
tests, its demo proxy in its examples), so this one does what they do, with
the standard library alone::

    python -m strata_client.pd_proxy --port 8000 \\
        --prefill http://10.0.0.1:8100 --decode http://10.0.0.2:8200

For each ``POST /v1/completions`` or ``/v1/chat/completions``:

1. the request goes to a prefill engine (round robin) with ``max_tokens``
   (and ``max_completion_tokens``) 1, no streaming, and
   ``kv_transfer_params: {"do_remote_decode": true, "strata_room": room}``:
   the room is the request's ``X-Request-Id`` (or a fresh one) and a random
   suffix, one per request and per retry, whatever ids the engines give it;
2. the ``kv_transfer_params`` of the prefill's answer (the room, its
   attempts, the tokens published) go with the original request to a decode
   engine, whose answer (streamed or not) is the client's.

Prefill and decode never connect to each other. A prefill that fails (an
error status, unreachable) is logged and the request goes to the decode
without parameters: the decode computes the prompt itself.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import logging
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

__all__ = ["Proxy", "prefill_body", "decode_body", "main"]

log = logging.getLogger("strata_client.pd_proxy")

ROUTES = ("/v1/completions", "/v1/chat/completions")


def prefill_body(body: Dict[str, Any], room: str) -> Dict[str, Any]:
    """The prefill's request: one token, not streamed, asking for a remote decode."""
    out = dict(body)
    out["kv_transfer_params"] = {"do_remote_decode": True, "do_remote_prefill": False, "strata_room": room}
    out["stream"] = False
    out["max_tokens"] = 1
    if "max_completion_tokens" in out:
        out["max_completion_tokens"] = 1
    out.pop("stream_options", None)
    return out


def decode_body(body: Dict[str, Any], params: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The decode's request: the client's, with the prefill's kv_transfer_params."""
    out = dict(body)
    if params:
        out["kv_transfer_params"] = params
    return out


class _Upstreams:
    """Engine base URLs, taken in turn."""

    def __init__(self, urls: Sequence[str]):
        if not urls:
            raise ValueError("pd_proxy: no engine URL")
        self.urls = [urllib.parse.urlsplit(u if "://" in u else "http://" + u) for u in urls]
        self._next = itertools.cycle(range(len(self.urls)))
        self._lock = threading.Lock()

    def take(self) -> urllib.parse.SplitResult:
        with self._lock:
            return self.urls[next(self._next)]


def _post(url: urllib.parse.SplitResult, path: str, body: Dict[str, Any], headers: Dict[str, str],
          timeout: float) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)
    data = json.dumps(body).encode()
    conn.request("POST", (url.path.rstrip("/") or "") + path, body=data,
                 headers={**headers, "Content-Type": "application/json", "Content-Length": str(len(data))})
    return conn, conn.getresponse()


class Proxy:
    """The proxy's routing, apart from its HTTP server (``serve``)."""

    def __init__(self, prefill: Sequence[str], decode: Sequence[str], timeout: float = 600.0):
        self.prefill = _Upstreams(prefill)
        self.decode = _Upstreams(decode)
        self.timeout = timeout
        self.stats = {"requests": 0, "prefill_failures": 0}
        self._lock = threading.Lock()

    def _count(self, k: str) -> None:
        with self._lock:
            self.stats[k] += 1

    def kv_params(self, path: str, body: Dict[str, Any], headers: Dict[str, str], room: str) -> Optional[Dict[str, Any]]:
        """Run the prefill; its kv_transfer_params, or None when it failed."""
        url = self.prefill.take()
        try:
            conn, resp = _post(url, path, prefill_body(body, room), headers, self.timeout)
            try:
                data = resp.read()
            finally:
                conn.close()
            if resp.status // 100 != 2:
                raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
            return json.loads(data).get("kv_transfer_params") or None
        except Exception as e:  # the decode computes the prompt
            self._count("prefill_failures")
            log.warning("pd_proxy: prefill of %s on %s failed (%s): the decode computes the prompt", room,
                        url.netloc, e)
            return None

    def forward(self, path: str, body: Dict[str, Any], headers: Dict[str, str]
                ) -> Tuple[int, List[Tuple[str, str]], Iterator[bytes]]:
        """(status, headers, body chunks) of the decode's answer to the
        request, after its prefill."""
        self._count("requests")
        rid = headers.get("X-Request-Id") or uuid.uuid4().hex
        headers = {**headers, "X-Request-Id": rid}
        room = f"{rid}-{uuid.uuid4().hex[:8]}"  # a client's retry under its id is another room
        params = self.kv_params(path, body, headers, room)
        conn, resp = _post(self.decode.take(), path, decode_body(body, params), headers, self.timeout)
        keep = [(k, v) for k, v in resp.getheaders() if k.lower() in ("content-type", "x-request-id")]

        def chunks() -> Iterator[bytes]:
            try:
                while True:
                    b = resp.read1(65536)
                    if not b:
                        return
                    yield b
            finally:
                conn.close()

        return resp.status, keep, chunks()

    def serve(self, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
        """An HTTP server of the proxy (call serve_forever on it)."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the answer ends when the connection closes: streams pass as they come

            def do_GET(self) -> None:
                if self.path in ("/health", "/healthz"):
                    self._reply(200, b"ok\n")
                else:
                    self._reply(404, b"not found\n")

            def do_POST(self) -> None:
                if self.path not in ROUTES:
                    self._reply(404, b"not found\n")
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                except ValueError as e:
                    self._reply(400, f"bad JSON: {e}\n".encode())
                    return
                fwd = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "x-request-id")}
                try:
                    status, headers, chunks = proxy.forward(self.path, body, fwd)
                except OSError as e:
                    self._reply(502, f"decode engine: {e}\n".encode())
                    return
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                for b in chunks:
                    self.wfile.write(b)
                    self.wfile.flush()

            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("pd_proxy: " + fmt, *args)

        return ThreadingHTTPServer((host, port), Handler)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m strata_client.pd_proxy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--prefill", action="append", required=True, help="a prefill engine's URL (repeatable)")
    ap.add_argument("--decode", action="append", required=True, help="a decode engine's URL (repeatable)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds an engine may take to answer")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    srv = Proxy(a.prefill, a.decode, a.timeout).serve(a.host, a.port)
    log.info("pd_proxy: serving on %s:%d, prefill %s, decode %s", a.host, srv.server_address[1], a.prefill, a.decode)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
