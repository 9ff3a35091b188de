"""vLLM prefill–decode through strata: StrataConnector as ``kv_producer``
and ``kv_consumer`` in separate processes (_vllm_pd_engine.py: vLLM's own
config, factory, request parsing, Request, block hasher, KV cache views and
scheduler outputs around the connector), a real stratad between them, and
strata_client.pd_proxy in front, as vLLM's P/D convention has it (the
installed wheel ships no P/D proxy: its toy proxy is in vLLM's tests).

- Through the proxy: the prefill sees ``max_tokens`` 1 and
  ``do_remote_decode``; it holds its blocks until its workers published
  the pages and frees them then, while the room is still only published
  (no decode took it); the decode loads exactly the blocks the prefill's
  "model" wrote (checked against the token-history oracle, not against
  bytes sent), asynchronously, with no load error.
- A decode whose namespace differs (another KV dtype and model revision)
  gets a load error for every block, logged naming the differing fields,
  counted, and the producer sees the refusal in its room: never a hit.
- A room aborted before the decode loads, and the room of another prompt:
  every block a load error, the reason logged; vLLM recomputes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import _support  # noqa: E402
import _vllm_pd_engine as PD  # noqa: E402
import test_vllm as V  # noqa: E402


def _post(url, body, rid=None, timeout=120):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **({"X-Request-Id": rid} if rid else {})})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class _EngineProc:
    """An engine process; .url once it serves."""

    def __init__(self, addr, role, **kw):
        args = [sys.executable, os.path.join(HERE, "_vllm_pd_engine.py"), addr, role] + [f"{k}={v}" for k, v in kw.items()]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=dict(os.environ, PYTHONPATH=_support.PYROOT))
        self.url = None
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def wait(self, timeout=240):
        box = []
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        line = (box or [b""])[0].decode()
        if not line.startswith("PORT "):
            self.stop()
            raise AssertionError(f"engine did not start: {line!r}\n" + b"".join(self.stderr).decode(errors="replace")[-3000:])
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _obs(resp):
    return json.loads(resp["choices"][0]["text"])


class VLLMPDTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        V._require_vllm()
        cls.node = _support.Node()
        a = cls.node.addr
        procs = [_EngineProc(a, "kv_producer"), _EngineProc(a, "kv_consumer", layout="BLHNC"),
                 _EngineProc(a, "kv_consumer", revision="r2", cache_dtype="fp8", strata_pd_await_timeout=5)]
        try:
            cls.prefill, cls.decode, cls.other = [p.wait() for p in procs]
        except Exception:
            for p in procs:
                p.stop()
            cls.node.stop()
            raise
        from strata_client import Client

        cls.client = Client(a, node_timeout=5.0)
        cls.proxies = []

    @classmethod
    def tearDownClass(cls):
        for srv in cls.proxies:
            srv.shutdown()
            srv.server_close()
        cls.client.close()
        for p in (cls.prefill, cls.decode, cls.other):
            p.stop()
        cls.node.stop()

    def proxy(self, decode):
        from strata_client.pd_proxy import Proxy

        srv = Proxy([self.prefill.url], [decode.url], timeout=120).serve("127.0.0.1", 0)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.proxies.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    def expected(self, prompt, blocks, obs):
        return [PD.block_digest(prompt, i, obs["layers"], obs["layer_bytes"]) for i in range(blocks)]

    def test_prefill_to_decode_through_the_proxy(self):
        prompt = list(range(100, 100 + 4 * V.BLOCK + 5))  # 4 full blocks and a partial one
        resp = _post(self.proxy(self.decode), {"model": "m", "prompt": prompt, "max_tokens": 8}, rid="pd-1")
        got = _obs(resp)
        self.assertEqual(got["role"], "kv_consumer")
        params = got["params_in"]
        self.assertEqual((params["strata_tokens"], sorted(params["strata_attempts"])), (4 * V.BLOCK, ["0/0"]))
        self.assertTrue(params["strata_room"].startswith("pd-1-"), params)
        self.assertEqual((got["n"], got["load_async"], got["errors"]), (4 * V.BLOCK, True, []), got)
        self.assertEqual(got["digests"], self.expected(prompt, 4, got), "the decode loaded other bytes than the prefill wrote")
        self.assertEqual(got["worker"]["pd_loaded_pages"], 4)
        self.assertEqual(got["worker"]["pd_load_errors"], 0)
        self.assertEqual(got["scheduler"]["lookups"], 0, "a P/D load is no lookup")
        self.assertEqual(resp["kv_transfer_params"], None)
        # The producer's side, through the room: acknowledged by the decode.
        info = self.client.room_status(params["strata_room"] + "#0/0")
        self.assertEqual((info.state, info.pages, info.tokens), ("acked", 4, 4 * V.BLOCK))

    def test_producer_frees_its_blocks_when_published(self):
        prompt = list(range(300, 300 + 3 * V.BLOCK))  # exactly 3 blocks
        resp = _post(self.prefill.url, {"model": "m", "prompt": prompt, "max_tokens": 1,
                                        "kv_transfer_params": {"do_remote_decode": True, "strata_room": "held-1"}})
        got = _obs(resp)
        self.assertEqual(got["role"], "kv_producer")
        self.assertTrue(got["held"], "request_finished must hold the blocks until the pages are published")
        self.assertEqual(got["room_when_freed"], {"0/0": "published"}, "blocks freed only once published, before any decode")
        self.assertGreaterEqual(got["published_when_freed"], 1, "finished_sending came before the publication returned")
        self.assertEqual(resp["kv_transfer_params"], got["params_out"])
        p = resp["kv_transfer_params"]
        self.assertEqual((p["do_remote_prefill"], p["strata_room"], p["strata_tokens"]), (True, "held-1", 3 * V.BLOCK))
        self.assertEqual(got["worker"]["pd_publish_failures"], 0)
        # The decode with those parameters: a full prompt, the last token recomputed by vLLM.
        out = _obs(_post(self.decode.url, {"model": "m", "prompt": prompt, "max_tokens": 4, "kv_transfer_params": p}))
        self.assertEqual((out["n"], out["errors"]), (3 * V.BLOCK, []))
        self.assertEqual(out["digests"], self.expected(prompt, 3, out))

    def test_namespace_mismatch_is_a_load_error(self):
        prompt = list(range(500, 500 + 3 * V.BLOCK + 1))
        got = _obs(_post(self.proxy(self.other), {"model": "m", "prompt": prompt, "max_tokens": 4}, rid="mm-1"))
        room = got["params_in"]["strata_room"] + "#0/0"
        self.assertEqual((got["n"], got["load_async"]), (3 * V.BLOCK, True))
        self.assertEqual(len(got["errors"]), 3, "every block of a mismatched namespace is a load error")
        self.assertEqual(got["digests"], [])
        self.assertEqual(got["worker"]["pd_error_mismatch"], 1)
        self.assertEqual(got["worker"]["pd_loaded_pages"], 0)
        logged = [l for l in got["log"] if "mismatch" in l]
        self.assertTrue(logged and "model_revision" in logged[0] and "dtype" in logged[0], got["log"])
        info = self.client.room_status(room)
        self.assertEqual((info.state, info.reason, info.mismatches), ("aborted", "consumer_failure", 1))
        self.assertIn("model_revision", info.detail)

    def test_aborted_room_is_a_load_error_and_recomputed(self):
        prompt = list(range(700, 700 + 2 * V.BLOCK + 3))
        resp = _post(self.prefill.url, {"model": "m", "prompt": prompt, "max_tokens": 1,
                                        "kv_transfer_params": {"do_remote_decode": True, "strata_room": "abort-1"}})
        p = resp["kv_transfer_params"]
        from strata_client.transfer import Room

        self.assertEqual(self.client.abort_room(Room("abort-1#0/0", p["strata_attempts"]["0/0"]), "user_cancel",
                                                "the client went away"), "aborted")
        got = _obs(_post(self.decode.url, {"model": "m", "prompt": prompt, "max_tokens": 4, "kv_transfer_params": p}))
        self.assertEqual((got["n"], len(got["errors"])), (2 * V.BLOCK, 2))
        self.assertEqual(got["worker"]["pd_error_aborted"], 1)
        self.assertTrue(any("aborted" in l and "recomputed" in l for l in got["log"]), got["log"])

    def test_another_prompts_room_is_a_load_error(self):
        # Parameters of another prompt (a proxy's mix-up): the producer's
        # keys are not the decode's blocks', so nothing is loaded into them.
        a, b = list(range(900, 900 + 2 * V.BLOCK + 1)), list(range(950, 950 + 2 * V.BLOCK + 1))
        p = _post(self.prefill.url, {"model": "m", "prompt": a, "max_tokens": 1,
                                     "kv_transfer_params": {"do_remote_decode": True, "strata_room": "mixup-1"}})
        p = p["kv_transfer_params"]
        got = _obs(_post(self.decode.url, {"model": "m", "prompt": b, "max_tokens": 4, "kv_transfer_params": p}))
        self.assertEqual((got["n"], len(got["errors"]), got["digests"]), (2 * V.BLOCK, 2, []))
        self.assertEqual(got["worker"]["pd_error_keys"], 1)
        info = self.client.room_status("mixup-1#0/0")
        self.assertEqual((info.state, info.reason), ("aborted", "consumer_failure"))
        self.assertIn("not this prompt's", info.detail)


if __name__ == "__main__":
    unittest.main()
