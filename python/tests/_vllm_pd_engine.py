"""A vLLM engine's OpenAI completions endpoint around strata's connector,
for the P/D tests (test_vllm_pd.py): run as its own process, one per
engine, with the connector built by vLLM's ``KVConnectorFactory`` from a
real ``VllmConfig`` in the role given (``kv_producer``, ``kv_consumer``).

No model runs on a CPU-only machine, so this process does what vLLM's
engine does around the connector, as test_vllm.py does: it parses each
request with vLLM's own ``CompletionRequest`` (``to_sampling_params``
puts ``kv_transfer_params`` in ``extra_args``), builds a real ``Request``
hashed by vLLM's block hasher, calls the scheduler half and steps the
worker half as vLLM's scheduler and model runner would, and answers a
``CompletionResponse`` carrying the connector's ``kv_transfer_params``.
The "model" writes each full block's KV as a function of the tokens up to
its end (``kv_bytes``): the test checks what a decode loaded against that
oracle, not against bytes it was sent. The response's text is a JSON
object of what the engine saw (loaded blocks' digests, load errors, the
request's counts, the connector's log lines).

    python _vllm_pd_engine.py ADDR ROLE [key=value ...]   # prints "PORT n"
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import test_vllm as V  # noqa: E402


def kv_bytes(tokens, layer: int, n: int) -> bytes:
    """The oracle: layer's KV of the block ending tokens, n bytes."""
    return hashlib.shake_256(struct.pack(f"<I{len(tokens)}I", layer, *tokens)).digest(n)


def block_digest(tokens, i: int, layers: int, layer_bytes: int) -> str:
    """SHA-256 of block i of a prompt as the oracle writes it (every layer
    in logical [H, N, C] order: test_vllm.block_digest's bytes)."""
    pre = list(tokens[:(i + 1) * V.BLOCK])
    return hashlib.sha256(b"".join(kv_bytes(pre, j, layer_bytes) for j in range(layers))).hexdigest()


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class Engine:
    def __init__(self, addr, role, revision="r1", cache_dtype="auto", layout="LBHNC", **extra):
        self.role = role
        self.kvc = V.kv_cache_config(cache_dtype)
        self.names = list(self.kvc.kv_cache_groups[0].layer_names)
        cfg = V.vllm_config(addr, cache_dtype=cache_dtype, role=role, strata_model_revision=revision, **extra)
        self.s, self.w = V.connectors(cfg, self.kvc)
        self.caches, _ = V.kv_caches(self.kvc, layout)
        self.w.register_kv_caches(self.caches)
        V.wait_for(lambda: self.s._sched.link.ready() and self.w._worker.link.ready(), 30, "the engine to connect")
        self.free = list(range(V.NUM_BLOCKS))
        self.log = _Lines()
        logging.getLogger("strata_client.vllm").addHandler(self.log)
        logging.getLogger("strata_client.vllm").setLevel(logging.INFO)
        v = self.caches[self.names[0]]
        self.layer_bytes = int(v[0].numel()) * int(v.element_size())

    def request(self, rid, body):
        from vllm.entrypoints.openai.completion.protocol import CompletionRequest
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.request import Request

        cr = CompletionRequest(**body)
        sp = cr.to_sampling_params(max_tokens=cr.max_tokens or 16)
        fn = get_hash_fn_by_name("sha256")
        init_none_hash(fn)
        return Request(rid, list(cr.prompt), sp, None, block_hasher=get_request_block_hasher(V.BLOCK, fn)), cr

    def complete(self, rid, body):
        from vllm.entrypoints.openai.completion.protocol import CompletionResponse, CompletionResponseChoice
        from vllm.entrypoints.serve.engine.protocol import UsageInfo
        from vllm.v1.request import RequestStatus

        del self.log.lines[:]
        before = (self.s.counters(), self.w.counters())
        req, cr = self.request(rid, body)
        obs = {"role": self.role, "max_tokens": req.max_tokens, "params_in": req.kv_transfer_params,
               "layer_bytes": self.layer_bytes, "layers": len(self.names)}
        prompt = list(cr.prompt)
        ids = [self.free.pop() for _ in range((len(prompt) + V.BLOCK) // V.BLOCK)]
        try:
            t0 = time.monotonic()
            n, load_async = V.ask(self.s, req)
            obs.update(n=n, load_async=load_async)
            self.s.update_state_after_alloc(req, V.blocks_of(ids), n)
            if n:  # WAITING_FOR_REMOTE_KVS: the request is in no scheduled list until it loaded
                meta = self.s.build_connector_meta(V.sched_output())
                errors = set()

                def loaded():
                    _, rcv = V.step(self.w, meta)
                    meta.loads = []
                    errors.update(self.w.get_block_ids_with_load_errors())
                    return rid in (rcv or ())

                V.wait_for(loaded, 60, f"finished_recving of {rid}")
                obs["load_s"] = time.monotonic() - t0
                obs["errors"] = sorted(errors)
                good = [b for b in ids[:n // V.BLOCK] if b not in errors]
                obs["digests"] = [V.block_digest(self.caches, self.names, b) for b in good]
                req.num_computed_tokens = n if not errors else 0  # vLLM recomputes from the first failed block
                self.s.update_state_after_alloc(req, V.blocks_of(ids), 0)  # vLLM calls it again once loaded
            # The "forward pass": the model writes the KV of the blocks it computes.
            for i in range(req.num_computed_tokens // V.BLOCK, len(prompt) // V.BLOCK):
                self._write(ids[i], prompt[:(i + 1) * V.BLOCK])
            so = V.sched_output([(req, ids)], {rid: len(prompt) - req.num_computed_tokens})
            V.step(self.w, self.s.build_connector_meta(so))
            # The saves end before the request does (vLLM allows either
            # order): the step that reports it sent then shows whether its
            # publication was waited for.
            V.wait_for(lambda: all(f.done() for f in self.w._worker._saves.get(rid, [])), 60, f"the saves of {rid}")
            req.num_computed_tokens = len(prompt)
            req.append_output_token_ids(7)
            req.status = RequestStatus.FINISHED_LENGTH_CAPPED
            held, params = self.s.request_finished(req, list(ids))
            obs.update(held=held, params_out=params)
            if held:
                self._until_sent(rid, obs, params)
        finally:
            self.free.extend(ids)  # vLLM frees the blocks now: after finished_sending when held
        # this request's counts
        obs["scheduler"], obs["worker"] = ({k: v - b.get(k, 0) for k, v in c.counters().items()}
                                           for c, b in zip((self.s, self.w), before))
        obs["log"] = list(self.log.lines)
        return CompletionResponse(
            model=cr.model or "m", choices=[CompletionResponseChoice(index=0, text=json.dumps(obs), finish_reason="length")],
            usage=UsageInfo(prompt_tokens=len(prompt), completion_tokens=1, total_tokens=len(prompt) + 1),
            kv_transfer_params=params)

    def _write(self, b, tokens):
        import torch

        for j, name in enumerate(self.names):
            blk = self.caches[name][b].view(torch.uint8)
            data = bytearray(kv_bytes(tokens, j, blk.numel()))
            blk.copy_(torch.frombuffer(data, dtype=torch.uint8).reshape(blk.shape))

    def _until_sent(self, rid, obs, params):
        """Steps until the workers report rid's saves (and publication) done:
        vLLM frees the blocks then. The room's state at that moment says
        whether they were freed before any decode took the pages; the
        worker's count of publications whether the pages were published by
        then."""
        meta = self.s.build_connector_meta(V.sched_output(finished=[rid]))
        sent = set()

        def done():
            snd, _ = V.step(self.w, meta, finished=[rid] if not sent else [])
            meta.publishes, meta.deferred = [], set()
            sent.update(snd or ())
            return rid in sent

        V.wait_for(done, 60, f"finished_sending of {rid}")
        obs["published_when_freed"] = self.w.counters()["pd_published"]
        if params:
            c = self.s._sched.link.client()
            obs["room_when_freed"] = {k: c.room_status(f"{params['strata_room']}#{k}").state
                                      for k in params["strata_attempts"]}


def serve(engine):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            rid = self.headers.get("X-Request-Id") or f"req-{time.monotonic_ns()}"
            try:
                out, status = engine.complete(rid, body).model_dump_json().encode(), 200
            except Exception as e:  # the test reads it
                import traceback

                out, status = json.dumps({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}).encode(), 500
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    addr, role = sys.argv[1], sys.argv[2]
    kw = dict(a.split("=", 1) for a in sys.argv[3:])
    serve(Engine(addr, role, **kw))
