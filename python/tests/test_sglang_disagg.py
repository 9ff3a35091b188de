"""strata as SGLang's prefill–decode transfer backend
(``--disaggregation-transfer-backend strata``, strata_client.sglang_disagg)
against the installed sglang (0.5.23) and real stratad nodes, on the CPU.

The backend gets into SGLang the way an installed strata-client does: the
``sglang.srt.plugins`` entry point of python/pyproject.toml, written as the
dist-info pip would install and found by SGLang's own ``load_plugins``. Its
classes come from SGLang's ``get_kv_class`` (the binding in
``disaggregation/prefill.py`` for the sender) for
``TransferBackend("strata")``, and are driven as SGLang's scheduler drives
them: a KVArgs filled as ``prefill.py``/``decode.py`` ``_init_kv_manager``
fill it, from SGLang's own ``MHATokenToKVPool`` (bfloat16, on the CPU) and
``MetadataBuffers``; the sender constructed, polled, ``init``-ed and sent to
as ``prefill.py`` does (chunked sends, the aux row set before the last); the
receiver as ``decode.py`` does (prefill DP rank from
``prefill_info_table``, ``init``, ``send_metadata`` with decode's own page
ids and metadata slot). What SGLang's scheduler loop would do around those
calls (run the model, free and reuse pages) is done by the test.

Not on the CPU, and so not here: ``disaggregation/decode.py`` does not
import in this venv (``sglang.srt.eplb.expert_distribution`` needs
``einops``, which is not installed), so the receiver is constructed as
decode.py:899-917 does, through ``utils.get_kv_class`` (which decode.py
binds), not by decode.py itself; the GPU path (device pointers, the
stream-ordered copy) needs CUDA; and no model runs, so no full P/D request
through launch_server and the router.

The seed's five adapter criteria (shared/seeds/001, "Acceptance criteria
for a backend adapter") are the classes named Criterion1..5. The fault
tests run a prefill or a decode as a second process (this file run as a
script) and SIGKILL it.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _support  # noqa: E402
from _support import PYROOT, Node, require_engine  # noqa: E402

PAGE = 4  # tokens a page
PAGES = 48  # pages in each pool
LAYERS = 2
HEADS = 2
DIM = 8
HIDDEN = 16
BOOTSTRAP = "127.0.0.1:8998"
OPEN_TTL = 5.0  # the nodes' --transfer-open-ttl
PIN_TTL = 6.0  # the nodes' --transfer-pin-ttl
NODE_FLAGS = ["--transfer-open-ttl", f"{OPEN_TTL:g}s", "--transfer-pin-ttl", f"{PIN_TTL:g}s"]

_NAMES = {
    "torch": ("torch", None),
    "np": ("numpy", None),
    "MHATokenToKVPool": ("sglang.srt.mem_cache.memory_pool", "MHATokenToKVPool"),
    "utils": ("sglang.srt.disaggregation.utils", None),
    "prefill_mod": ("sglang.srt.disaggregation.prefill", None),
    "KVPoll": ("sglang.srt.disaggregation.base.conn", "KVPoll"),
    "runtime_context": ("sglang.srt.runtime_context", None),
    "plugins": ("sglang.srt.plugins", None),
    "ServerArgs": ("sglang.srt.server_args", "ServerArgs"),
}


def load_sglang():
    """The installed SGLang's modules into this module (require_engine: a
    missing engine skips, or fails under STRATA_REQUIRE_ENGINES=1)."""
    g = globals()
    for name, (mod, attr) in _NAMES.items():
        m = require_engine(mod)
        g[name] = getattr(m, attr) if attr else m


# ---- the plugin, as an installed strata-client ---------------------------------


def entry_point_dir() -> str:
    """A directory holding strata-client's dist-info with the
    sglang.srt.plugins entry points python/pyproject.toml declares, as pip
    installs it: on sys.path, importlib.metadata (SGLang's load_plugins)
    finds them."""
    import tomllib

    with open(os.path.join(PYROOT, "pyproject.toml"), "rb") as f:
        eps = tomllib.load(f)["project"]["entry-points"]["sglang.srt.plugins"]
    d = tempfile.mkdtemp(prefix="strata-sglang-ep-")
    _support._tmp_dirs.append(d)
    info = os.path.join(d, "strata_client-0.1.0.dist-info")
    os.mkdir(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: strata-client\nVersion: 0.1.0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write("[sglang.srt.plugins]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    return d


def model_dir() -> str:
    """A local model directory (config.json only: nothing is downloaded);
    a second process of a test gets its parent's (STRATA_TEST_MODEL_DIR),
    so that both name the model alike."""
    if os.environ.get("STRATA_TEST_MODEL_DIR"):
        return os.environ["STRATA_TEST_MODEL_DIR"]
    d = tempfile.mkdtemp(prefix="strata-sglang-model-")
    _support._tmp_dirs.append(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,'
                '"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,'
                '"intermediate_size":128,"vocab_size":1000,"max_position_embeddings":2048,'
                '"rms_norm_eps":1e-6,"torch_dtype":"bfloat16","rope_theta":10000}')
    return d


_PROCESS = {}


def setup_process():
    """What SGLang's launcher and its scheduler child do first: load the
    plugins (launch_server.py:79, scheduler.py run_scheduler_process),
    then publish the runtime context with the rank's placement."""
    if _PROCESS:
        return _PROCESS["server_args"]
    load_sglang()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, entry_point_dir())
    importlib.invalidate_caches()
    already = plugins._plugins_loaded
    plugins.load_plugins()
    if already:  # another test of this process loaded SGLang's plugins first
        from sglang.srt.plugins.hook_registry import HookRegistry
        from strata_client.sglang_disagg import register

        register()
        HookRegistry.apply_hooks()
    sa = ServerArgs(model_path=model_dir(), device="cpu", skip_tokenizer_init=True)
    runtime_context.publish(sa, role="scheduler", ranks=runtime_context.SpawnRanks(world_rank=0))
    _PROCESS["server_args"] = sa
    return sa


@contextlib.contextmanager
def environ(**kv):
    saved = {k: os.environ.get(k) for k in kv}
    os.environ.update({k: str(v) for k, v in kv.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def strata():
    """TransferBackend("strata"), as scheduler.py:1513 makes it from the flag."""
    return utils.TransferBackend("strata")


class Side:
    """One engine rank's half as SGLang builds it: its KV pool, metadata
    buffers, the KVArgs _init_kv_manager fills, and the backend's manager
    from get_kv_class."""

    def __init__(self, mode, addr, heads=HEADS, **env):
        self.mode = mode
        sa = setup_process()
        self.pool = MHATokenToKVPool(size=PAGES * PAGE, page_size=PAGE, dtype=torch.bfloat16, head_num=heads,
                                     head_dim=DIM, layer_num=LAYERS, device="cpu", enable_memory_saver=False)
        self.meta = utils.MetadataBuffers(8, HIDDEN, torch.bfloat16, 16)
        a = utils.get_kv_class(strata(), utils.KVClassType.KVARGS)()
        a.engine_rank = 0
        a.pp_rank = 0
        a.system_dp_rank = 0
        a.kv_cache_dtype_str = runtime_context.get_model().kv_cache_dtype
        a.kv_layout = utils.get_pd_kv_layout(self.pool)
        a.prefill_start_layer = 0
        a.kv_data_ptrs, a.kv_data_lens, a.kv_item_lens = utils.get_kv_transfer_buf_infos(self.pool)
        a.num_draft_entries = 0
        a.kv_layer_ids = utils.build_kv_layer_ids(token_to_kv_pool=self.pool, draft_token_to_kv_pool=None,
                                                  num_draft_entries=0, num_hidden_layers=LAYERS)
        if mode == "prefill":
            a.kv_head_num = heads
            a.total_kv_head_num = heads
        a.page_size = PAGE
        a.aux_data_ptrs, a.aux_data_lens, a.aux_item_lens = self.meta.get_buf_infos()
        a.ib_device = None
        a.gpu_id = 0
        utils.setup_state_kv_args(a, self.pool, None, LAYERS, req_to_token_pool=None)
        self.kv_args = a
        dm = utils.DisaggregationMode.PREFILL if mode == "prefill" else utils.DisaggregationMode.DECODE
        settings = dict(STRATA_ADDR=addr, STRATA_TENANT="acme", STRATA_MODEL_REVISION="r1", STRATA_NODE_TIMEOUT=5)
        settings.update(env)
        with environ(**settings):
            self.mgr = utils.get_kv_class(strata(), utils.KVClassType.MANAGER)(a, dm, sa, False)

    def close(self):
        self.mgr.close()

    # -- the pool's bytes, read through SGLang's own tensors --

    def fill(self, pages, seed):
        g = torch.Generator().manual_seed(seed)
        for buf in self.pool.k_buffer + self.pool.v_buffer:
            for p in pages:
                rows = buf[p * PAGE:(p + 1) * PAGE]
                rows.view(torch.uint8).copy_(torch.randint(0, 256, rows.view(torch.uint8).shape, dtype=torch.uint8,
                                                           generator=g))

    def pages(self, pages):
        """The bytes of pages, every layer's K then V."""
        return [b"".join(buf[p * PAGE:(p + 1) * PAGE].contiguous().view(torch.uint8).numpy().tobytes()
                         for buf in self.pool.k_buffer + self.pool.v_buffer) for p in pages]

    def set_aux(self, idx, room, token):
        """What MetadataBuffers.set_buf(req) writes before the last send:
        the first output token, cached tokens, hidden state, the room."""
        m = self.meta
        m.output_ids[idx, 0] = token
        m.cached_tokens[idx, 0] = 3
        m.output_hidden_states[idx] = torch.arange(HIDDEN, dtype=torch.bfloat16) * (token % 7 + 1)
        m.bootstrap_room[idx, 0] = room

    def aux_row(self, idx):
        """The metadata row's bytes, every buffer of get_buf_infos."""
        ptrs, _, items = self.meta.get_buf_infos()
        return b"".join(ctypes.string_at(p + idx * n, n) for p, n in zip(ptrs, items))


# ---- SGLang's calls ---------------------------------------------------------------


def sender(side, room, n_pages, aux_index):
    """prefill.py create_sender -> pop_bootstrapped (poll) ->
    finalize_bootstrap (pop_decode_prefix_len, init)."""
    cls = prefill_mod.get_kv_class(strata(), utils.KVClassType.SENDER)
    s = cls(mgr=side.mgr, bootstrap_addr=BOOTSTRAP, bootstrap_room=room, req_has_disagg_prefill_dp_rank=False)
    assert s.poll() == KVPoll.WaitingForInput, s.poll()
    assert s.pop_decode_prefix_len() == 0
    s.init(n_pages, aux_index)
    return s


def send(s, side, pages, last, room=0, aux_index=0, token=0):
    """prefill.py _send_kv_chunk: set_buf before the last chunk, the state
    payloads (none for an MHA pool) with it."""
    if last:
        side.set_aux(aux_index, room, token)
    if not s.should_send_kv_chunk(len(pages), last):
        return
    s.send(np.asarray(pages, dtype=np.int32), [] if last else None, num_kv_tokens=len(pages) * PAGE)


def prefill(side, room, pages, aux_index=0, token=7, chunks=2):
    s = sender(side, room, len(pages), aux_index)
    step = max(1, len(pages) // chunks)
    for i in range(0, len(pages), step):
        send(s, side, pages[i:i + step], i + step >= len(pages), room, aux_index, token)
    return s


def receiver(side, room):
    """decode.py _create_receiver_and_enqueue -> _resolve_prefill_dp_rank
    (prefill_info_table) -> _init_receiver (init)."""
    cls = utils.get_kv_class(strata(), utils.KVClassType.RECEIVER)
    r = cls(mgr=side.mgr, bootstrap_addr=BOOTSTRAP, bootstrap_room=room)
    assert r.poll() == KVPoll.Bootstrapping, r.poll()
    info = side.mgr.prefill_info_table.get(BOOTSTRAP)
    assert info is not None and info.dp_size == 1
    r.init(0)
    assert r.poll() == KVPoll.WaitingForInput, r.poll()
    return r


def receive(r, pages, aux_index):
    """decode.py _send_kv_metadata: decode's page ids and metadata slot."""
    r.send_metadata(np.asarray(pages, dtype=np.int32), aux_index, [], decode_prefix_len=0)


def wait_for(cond, timeout=30.0, what="condition"):
    """Poll cond until it is true (returned) or the deadline; what (a
    string, or a callable for a message made at the deadline) names it."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what() if callable(what) else what} not reached within {timeout}s")
        time.sleep(0.01)


def wait_poll(x, state, timeout=30.0):
    wait_for(lambda: x.poll() == state, timeout,
             lambda: f"poll {state} (is {x.poll()}: {getattr(x, 'failure_reason', '')})")


def reason(x):
    try:
        x.failure_exception()
    except Exception as e:
        return str(e)
    raise AssertionError("failure_exception did not raise")


_ROOMS = [int(time.time() * 1000) % (1 << 40) << 16]


def new_room():
    _ROOMS[0] += 1
    return _ROOMS[0]


class Gate:
    """Slows one of the manager's page calls (put or get): the call waits
    at the gate until opened, then runs."""

    def __init__(self, mgr, name):
        self.entered = threading.Event()
        self.opened = threading.Event()
        real = getattr(mgr, name)

        def slowed(*a, **kw):
            self.entered.set()
            self.opened.wait(60)
            return real(*a, **kw)

        setattr(mgr, name, slowed)
        self._undo = lambda: setattr(mgr, name, real)

    def open(self):
        self.opened.set()

    def remove(self):
        self.opened.set()
        self._undo()


class PDTest(unittest.TestCase):
    """One node (short transfer TTLs), a prefill side and a decode side, an
    operator client to read rooms."""

    @classmethod
    def setUpClass(cls):
        load_sglang()
        setup_process()
        cls.node = Node(extra_args=NODE_FLAGS)
        from strata_client import Client

        cls.op = Client(cls.node.addr, node_timeout=5.0)

    @classmethod
    def tearDownClass(cls):
        cls.op.close()
        cls.node.stop()

    def setUp(self):
        self.p = Side("prefill", self.node.addr)
        self.d = Side("decode", self.node.addr)
        self.addCleanup(self.p.close)
        self.addCleanup(self.d.close)

    def status(self, room):
        return self.op.room_status(self.p.mgr.room_name(room))

    def wait_state(self, room, state, timeout=30.0):
        return wait_for(lambda: (lambda st: st if st.state == state else None)(self.status(room)), timeout,
                        f"room {room} {state}")

    def load_fails(self, room, dst, slot, why, side=None, timeout=30.0):
        """A decode (self.d, or side) loads room into its pages dst and
        metadata slot: Failed, its reason naming why, with dst's bytes and
        the slot's aux row untouched. Returns the receiver."""
        d = side or self.d
        d.fill(dst, slot + 100)
        before, aux = d.pages(dst), d.aux_row(slot)
        r = receiver(d, room)
        receive(r, dst, slot)
        wait_poll(r, KVPoll.Failed, timeout)
        self.assertIn(why, reason(r))
        self.assertEqual(d.pages(dst), before)
        self.assertEqual(d.aux_row(slot), aux)
        return r

    def transfer(self, room, src, dst, aux_p=1, aux_d=2, token=11, seed=1):
        """A whole P/D handover: prefill fills and sends src, decode loads
        into dst."""
        self.p.fill(src, seed)
        s = prefill(self.p, room, src, aux_p, token)
        wait_poll(s, KVPoll.Success)
        r = receiver(self.d, room)
        receive(r, dst, aux_d)
        wait_poll(r, KVPoll.Success)
        return s, r


class EntryPointTest(unittest.TestCase):
    """The plugin as SGLang loads it in its own processes: the launcher
    (load_plugins before prepare_server_args, launch_server.py:79-81) and a
    spawned child (the scheduler: load_plugins first, scheduler.py)."""

    def run_script(self, plugins_env):
        load_sglang()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([entry_point_dir(), PYROOT]), HF_HUB_OFFLINE="1",
                   SGLANG_PLUGINS=plugins_env)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "entrypoint", model_dir()], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        lines = [x for x in p.stdout.decode().splitlines() if x.startswith("{")]
        self.assertTrue(lines, f"no answer (rc {p.returncode}):\n{p.stderr.decode()[-3000:]}")
        return json.loads(lines[-1]), p.stderr.decode()

    def test_flag_and_classes_in_launcher_and_spawned_child(self):
        out, _ = self.run_script("strata")
        self.assertEqual(out["backend"], "strata")
        self.assertEqual(out["enum"], "TransferBackend.STRATA")
        # prefill.py was imported before load_plugins: its binding is rebound.
        self.assertEqual(out["prefill_sender"], "strata_client.sglang_disagg.StrataKVSender")
        self.assertEqual(out["service_server"], "strata_client.sglang_disagg.StrataKVBootstrapServer")
        self.assertEqual(out["fake_sender"], "sglang.srt.disaggregation.fake.conn.FakeKVSender")
        self.assertEqual(out["members"], ["mooncake", "mori", "nixl", "ascend", "fake", "strata"])
        self.assertEqual(out["child"], {"enum": "TransferBackend.STRATA",
                                        "manager": "strata_client.sglang_disagg.StrataKVManager",
                                        "receiver": "strata_client.sglang_disagg.StrataKVReceiver"})

    def test_without_the_plugin_the_flag_is_refused(self):
        # SGLANG_PLUGINS names the plugins SGLang may load: none here.
        out, err = self.run_script("none")
        self.assertEqual(out["exit"], 2)
        self.assertIn("invalid choice: 'strata'", err)


class HandoverTest(PDTest):
    def test_prefill_publishes_decode_loads_its_own_pages(self):
        room = new_room()
        src, dst = list(range(3, 10)), list(range(20, 27))
        self.p.fill(src, 5)
        self.d.fill(dst, 6)
        before = self.d.pages(dst)
        s = prefill(self.p, room, src, aux_index=1, token=42, chunks=3)
        # Success once published: SGLang frees its pages before any decode came.
        wait_poll(s, KVPoll.Success)
        st = self.status(room)
        self.assertEqual((st.state, st.pages, st.tokens), ("published", len(src) + self.p.mgr.aux_pages, len(src) * PAGE))
        m = s.get_transfer_metric()
        self.assertEqual(m.transfer_total_bytes, st.bytes)
        self.assertGreater(m.transfer_latency_s, 0)
        want = self.p.pages(src)
        self.p.fill(src, 99)  # the prefill reuses its pages: nothing reads them any more
        r = receiver(self.d, room)
        self.assertEqual(self.d.pages(dst), before)
        receive(r, dst, 2)
        wait_poll(r, KVPoll.Success)
        self.assertEqual(self.d.pages(dst), want)
        self.assertEqual(self.d.aux_row(2), self.p.aux_row(1))
        self.assertEqual(int(self.d.meta.bootstrap_room[2, 0]), room)
        self.assertEqual(int(self.d.meta.output_ids[2, 0]), 42)
        self.assertEqual(self.wait_state(room, "acked").attempt, st.attempt)
        c = self.d.mgr.counters()
        self.assertEqual((c["received"], c["receives_failed"]), (1, 0))
        self.assertEqual(self.p.mgr.counters()["published"], 1)

    def test_version_mismatch_is_failed_never_a_hit(self):
        for field, env in (("model_revision", {"STRATA_MODEL_REVISION": "r2"}), ("page_bytes", {"heads": 1})):
            with self.subTest(field=field):
                room = new_room()
                heads = env.pop("heads", HEADS)
                d = Side("decode", self.node.addr, heads=heads, **env)
                self.addCleanup(d.close)
                src = [3, 4]
                self.p.fill(src, 8)
                wait_poll(prefill(self.p, room, src, aux_index=2), KVPoll.Success)
                r = self.load_fails(room, [30, 31], 3, "version_mismatch", side=d)
                self.assertIn(field, reason(r))
                c = d.mgr.counters()
                self.assertEqual((c["mismatches"], c["failed_version_mismatch"], c["received"]), (1, 1, 0))
                st = self.status(room)  # the producer sees why
                self.assertEqual((st.state, st.reason, st.mismatches), ("aborted", "consumer_failure", 1))
                self.assertIn(field, st.detail)

    def test_unservable_configurations_refuse_to_start(self):
        from strata_client.sglang_disagg import UnservableConfiguration

        with self.assertRaisesRegex(UnservableConfiguration, "STRATA_ADDR"):
            Side("prefill", "")
        sa = setup_process()
        with runtime_context.get_parallel().override(pp_size=2, pp_rank=0):
            with self.assertRaisesRegex(UnservableConfiguration, "pipeline parallelism"):
                with environ(STRATA_ADDR=self.node.addr):
                    utils.get_kv_class(strata(), utils.KVClassType.MANAGER)(self.p.kv_args,
                                                                             utils.DisaggregationMode.PREFILL, sa)


class Criterion1(PDTest):
    """For each abort reason, source and destination are kept until the
    transport is quiescent, and nothing partial is published."""

    def test_decode_cancel_while_getting(self):
        room = new_room()
        src, dst = [1, 2, 3, 4], [40, 41, 42, 43]
        self.p.fill(src, 1)
        wait_poll(prefill(self.p, room, src), KVPoll.Success)
        gate = Gate(self.d.mgr, "get")
        self.addCleanup(gate.remove)
        self.d.fill(dst, 2)
        r = receiver(self.d, room)
        receive(r, dst, 4)
        self.assertTrue(gate.entered.wait(30))
        r.abort()  # SGLang releases dst at the next poll
        self.assertEqual(r.poll(), KVPoll.Failed)
        st = self.wait_state(room, "draining")  # the consumer may still read: pinned
        self.assertEqual(st.reason, "user_cancel")
        self.assertGreater(st.pin_expires_unix_ms, 0)
        self.d.fill(dst, 3)  # the next owner of the pages writes them
        mine = self.d.pages(dst)
        gate.open()
        st = self.wait_state(room, "aborted")  # acknowledged once the get stopped
        self.assertEqual(st.pin_expires_unix_ms, 0)
        self.assertEqual(self.d.pages(dst), mine)
        self.assertEqual(int(self.d.meta.bootstrap_room[4, 0]), 0)
        self.assertEqual(self.d.mgr.counters()["receives_aborted"], 1)

    def test_prefill_cancel_while_putting(self):
        room = new_room()
        src, dst = [5, 6, 7, 8], [10, 11, 12, 13]
        self.p.fill(src, 4)
        gate = Gate(self.p.mgr, "put")
        self.addCleanup(gate.remove)
        s = sender(self.p, room, len(src), 0)
        send(s, self.p, src[:2], False)
        self.assertTrue(gate.entered.wait(30))
        send(s, self.p, src[2:], True, room)
        r = receiver(self.d, room)
        self.d.fill(dst, 5)
        before = self.d.pages(dst)
        receive(r, dst, 5)
        s.abort()  # SGLang releases and reuses src at once (scheduler.py process_pending_chunked_abort)
        self.assertEqual(s.poll(), KVPoll.Failed)
        self.p.fill(src, 6)
        gate.open()  # the late put completes: it publishes nothing
        st = self.wait_state(room, "aborted")
        self.assertEqual((st.reason, st.published_unix_ms), ("user_cancel", 0))
        wait_poll(r, KVPoll.Failed)
        self.assertIn("aborted", reason(r))
        self.assertEqual(self.d.pages(dst), before)
        self.assertEqual(self.p.mgr.counters()["published"], 0)

    def test_decode_timeout(self):
        d = Side("decode", self.node.addr, STRATA_PD_AWAIT_TIMEOUT=1)
        self.addCleanup(d.close)
        t0 = time.monotonic()
        self.load_fails(new_room(), [2, 3], 1, "timeout", side=d)
        self.assertGreaterEqual(time.monotonic() - t0, 1)
        self.assertEqual(d.mgr.counters()["failed_timeout"], 1)

    def test_producer_killed_mid_put(self):
        room = new_room()
        proc = role(self.node.addr, "producer", room)
        self.addCleanup(kill, proc)
        wait_line(proc, "PUT")  # one chunk stored, the next put in flight
        self.assertEqual(self.status(room).state, "open")
        kill(proc)
        t0 = time.monotonic()
        self.load_fails(room, [14, 15, 16, 17], 6, "expired", timeout=OPEN_TTL + 10)
        self.assertLess(time.monotonic() - t0, OPEN_TTL + 3)  # at the open TTL, not the await's 300 s
        st = self.status(room)
        self.assertEqual((st.state, st.reason, st.published_unix_ms), ("expired", "producer_failure", 0))


class Criterion2(PDTest):
    """Duplicate completion and cancellation, late callbacks, and an old
    attempt's calls after the room is reused leave the new attempt's
    ownership and output unchanged."""

    def test_duplicates_and_old_attempt_after_reuse(self):
        from strata_client import Room, StaleAttemptError

        room = new_room()
        s1, r1 = self.transfer(room, [1, 2, 3], [20, 21, 22], aux_p=0, aux_d=0, token=5, seed=10)
        a1 = self.wait_state(room, "acked").attempt
        old = Room(self.p.mgr.room_name(room), a1)
        self.op.ack_room(old)  # a duplicate acknowledgement: nothing changes
        self.assertEqual((self.status(room).state, self.status(room).attempt), ("acked", a1))
        # The replay: the same room, a new attempt, other bytes.
        src2, dst2 = [4, 5, 6], [30, 31, 32]
        self.p.fill(src2, 11)
        want = self.p.pages(src2)
        s2 = prefill(self.p, room, src2, aux_index=1, token=6)
        wait_poll(s2, KVPoll.Success)
        a2 = self.status(room).attempt
        self.assertGreater(a2, a1)
        gate = Gate(self.d.mgr, "get")
        self.addCleanup(gate.remove)
        r2 = receiver(self.d, room)
        receive(r2, dst2, 1)
        self.assertTrue(gate.entered.wait(30))
        self.assertEqual(self.status(room).state, "loading")
        # Calls naming the old attempt, late and twice: a late
        # acknowledgement, late cancels, from the operator and from the old
        # transfers' own objects.
        with self.assertRaises(StaleAttemptError):
            self.op.ack_room(old)
        with self.assertRaises(StaleAttemptError):
            self.op.abort_room(old, "user_cancel")
        for x in (s1, s1, r1, r1):
            x.abort()
        for x in (s1, s1, r1, r1):
            x.clear()
        wait_for(lambda: self.p.mgr.counters()["stale"] == 1 and self.d.mgr.counters()["stale"] == 1, 30,
                 "each old transfer's cancel answered stale, once")
        self.assertEqual((s1.poll(), r1.poll()), (KVPoll.Failed, KVPoll.Failed))
        st = self.status(room)
        self.assertEqual((st.state, st.attempt, st.reason), ("loading", a2, ""))
        gate.open()
        wait_poll(r2, KVPoll.Success)
        self.assertEqual(self.d.pages(dst2), want)
        self.assertEqual(self.d.aux_row(1), self.p.aux_row(1))
        self.assertEqual(int(self.d.meta.output_ids[1, 0]), 6)
        st = self.wait_state(room, "acked")
        self.assertEqual((st.attempt, st.reason), (a2, ""))
        self.assertEqual(s2.poll(), KVPoll.Success)


class Criterion3(PDTest):
    """The destination fails midway (page k of n, or staging memory): no
    write reached decode's pages, the room is aborted and released, the
    producer's pages are still readable."""

    def test_get_of_page_k_fails(self):
        room = new_room()
        src, dst = [1, 2, 3, 4, 5], [30, 31, 32, 33, 34]
        self.p.fill(src, 12)
        want = self.p.pages(src)
        s = prefill(self.p, room, src)
        wait_poll(s, KVPoll.Success)
        keys = list(s._keys)
        real = self.d.mgr.get
        lost = bytes(32)

        def third_page_lost(ns, ks, rows):  # page 3 of 5 is not in the store
            return real(ns, ks[:2] + [lost] + ks[3:], rows)

        self.d.mgr.get = third_page_lost
        self.load_fails(room, dst, 7, "missing_pages")
        st = self.wait_state(room, "aborted")
        self.assertEqual((st.reason, st.pin_expires_unix_ms), ("consumer_failure", 0))
        got = self.d.mgr._ensure().get(keys[:len(src)])  # the producer's pages are still there
        self.assertEqual([bytes(x) for x in got], want)

    def test_staging_allocation_fails(self):
        room = new_room()
        src, dst = [6, 7], [35, 36]
        self.p.fill(src, 14)
        wait_poll(prefill(self.p, room, src), KVPoll.Success)

        def no_memory(n):
            raise MemoryError(f"staging for {n} pages")

        self.d.mgr.kv.staging = no_memory
        self.load_fails(room, dst, 0, "MemoryError")
        st = self.wait_state(room, "aborted")
        self.assertEqual(st.reason, "consumer_failure")


class Criterion4(PDTest):
    """The producer is cancelled while its request is preempted (abort, then
    its pages released and reused at once): what was published is the
    snapshot from before, a replay waits while the old attempt drains,
    then succeeds."""

    def test_cancel_during_preemption_then_replay(self):
        room = new_room()
        src, dst1, dst2 = [1, 2, 3, 4], [20, 21, 22, 23], [30, 31, 32, 33]
        self.p.fill(src, 16)
        snapshot = self.p.pages(src)
        s1 = prefill(self.p, room, src, aux_index=0, token=8)
        wait_poll(s1, KVPoll.Success)
        gate = Gate(self.d.mgr, "get")
        self.addCleanup(gate.remove)
        r1 = receiver(self.d, room)
        receive(r1, dst1, 0)
        self.assertTrue(gate.entered.wait(30))
        # Preempted: abort, release, and the pages are someone else's.
        s1.abort()
        self.p.fill(src, 17)
        self.assertEqual(self.wait_state(room, "draining").reason, "user_cancel")
        # The replay cannot reuse the room while the old attempt may be read.
        p2 = Side("prefill", self.node.addr, STRATA_PD_OPEN_WAIT=30)
        self.addCleanup(p2.close)
        p2.fill(src, 18)
        replay = p2.pages(src)
        s2 = prefill(p2, room, src, aux_index=0, token=9)
        wait_for(lambda: p2.mgr.counters()["room_busy_retries"] >= 2, 10, "the replay refused while draining")
        self.assertEqual(s2.poll(), KVPoll.Transferring)
        self.assertEqual(self.status(room).state, "draining")
        gate.open()  # the old consumer finishes reading and acknowledges
        wait_poll(r1, KVPoll.Success)
        self.assertEqual(self.d.pages(dst1), snapshot)  # the snapshot from before the reuse, whole
        wait_poll(s2, KVPoll.Success)
        gate.remove()
        r2 = receiver(self.d, room)
        receive(r2, dst2, 1)
        wait_poll(r2, KVPoll.Success)
        self.assertEqual(self.d.pages(dst2), replay)
        self.assertEqual(int(self.d.meta.output_ids[1, 0]), 9)
        self.assertEqual(self.wait_state(room, "acked").reason, "")


class Criterion5(PDTest):
    """A missing acknowledgement must not free early: a decode that took
    the pages and died keeps them pinned and the room busy until the pin's
    TTL; then the room expires and is reused. The recovery time is
    measured and printed."""

    def test_consumer_killed_before_ack(self):
        room = new_room()
        src = [1, 2, 3]
        proc = role(self.node.addr, "consumer", room)  # awaits the room
        self.addCleanup(kill, proc)
        wait_line(proc, "AWAITING")
        self.p.fill(src, 19)
        wait_poll(prefill(self.p, room, src), KVPoll.Success)
        wait_line(proc, "LOADING")  # it took the pages
        published = self.status(room)
        self.assertEqual(published.state, "loading")
        kill(proc)
        killed = time.time()
        expires = published.pin_expires_unix_ms / 1000
        p2 = Side("prefill", self.node.addr, STRATA_PD_OPEN_WAIT=PIN_TTL + 10)
        self.addCleanup(p2.close)
        p2.fill(src, 20)
        s2 = prefill(p2, room, src)
        while time.time() < expires - 0.5:  # until the pin's TTL: still pinned, the room busy
            st = self.status(room)
            self.assertEqual((st.state, st.attempt), ("loading", published.attempt))
            self.assertEqual(st.pin_expires_unix_ms, published.pin_expires_unix_ms)
            self.assertEqual(s2.poll(), KVPoll.Transferring)
        wait_poll(s2, KVPoll.Success, PIN_TTL + 10)
        done = time.time()
        self.assertGreater(self.status(room).attempt, published.attempt)
        self.assertGreater(p2.mgr.counters()["room_busy_retries"], 0)
        self.assertGreaterEqual(done, expires)
        self.assertLess(done, expires + 3)  # the node sweeps each second; the replay retries at most every 0.5s
        sys.stderr.write(f"\n[criterion 5] consumer killed before its ack: pin TTL "
                         f"{(published.pin_expires_unix_ms - published.published_unix_ms) / 1000:.1f}s; the replay "
                         f"published {done - killed:.2f}s after the kill, {done - expires:.2f}s after the pin's "
                         f"expiry\n")
        r = receiver(self.d, room)
        dst = [40, 41, 42]
        receive(r, dst, 2)
        wait_poll(r, KVPoll.Success)
        self.assertEqual(self.d.pages(dst), p2.pages(src))


# ---- second processes -------------------------------------------------------------


def role(addr, name, room):
    """This file as a script: a prefill ("producer") or decode ("consumer")
    rank in a process of its own, which prints a line when it got where the
    test kills it."""
    env = dict(os.environ, STRATA_ADDR=addr, HF_HUB_OFFLINE="1", STRATA_TEST_MODEL_DIR=setup_process().model_path)
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), name, addr, str(room)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def kill(proc):
    """SIGKILL (a crash) and reap."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)
    proc.stdout.close()


def wait_line(proc, want, timeout=180.0):
    out = []

    def read():
        for line in proc.stdout:
            line = line.decode(errors="replace").rstrip()
            out.append(line)
            if line == want:
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    if not out or out[-1] != want:
        raise AssertionError(f"{want!r} not printed within {timeout}s:\n" + "\n".join(out[-40:]))


def _block_after(mgr, name, calls, line):
    """The manager's put or get runs `calls` times, then prints line and
    blocks for good (until the process is killed)."""
    real = getattr(mgr, name)
    n = [0]

    def wrapped(*a, **kw):
        if n[0] < calls:
            n[0] += 1
            return real(*a, **kw)
        print(line, flush=True)
        threading.Event().wait()

    setattr(mgr, name, wrapped)


def _role_main(name, addr, room):
    load_sglang()
    if name == "producer":
        side = Side("prefill", addr)
        _block_after(side.mgr, "put", 1, "PUT")
        src = [1, 2, 3, 4]
        side.fill(src, 21)
        prefill(side, room, src, chunks=2)
    else:
        side = Side("decode", addr)
        _block_after(side.mgr, "get", 0, "LOADING")
        receive(receiver(side, room), [5, 6, 7], 0)
        print("AWAITING", flush=True)
    threading.Event().wait()


def _entrypoint_main(model):
    """The launcher's steps with the plugin installed, and a spawned
    child's (the scheduler's first statement is load_plugins)."""
    import multiprocessing as mp

    import sglang.srt.disaggregation.prefill as prefill_before  # bound before the plugins load

    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args

    load_plugins()
    try:
        sa = prepare_server_args(["--model-path", model, "--device", "cpu", "--skip-tokenizer-init",
                                  "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "strata"])
    except SystemExit as e:  # argparse refused the flag (its message is on stderr)
        print(json.dumps({"exit": e.code}))
        return
    from sglang.srt.disaggregation.utils import KVClassType, TransferBackend, get_kv_class
    from sglang.srt.managers import disagg_service

    tb = TransferBackend(sa.disaggregation_transfer_backend)
    out = {"backend": sa.disaggregation_transfer_backend, "enum": str(tb), "members": [m.value for m in TransferBackend],
           "prefill_sender": _qualname(prefill_before.get_kv_class(tb, KVClassType.SENDER)),
           "service_server": _qualname(disagg_service.get_kv_class(tb, KVClassType.BOOTSTRAP_SERVER)),
           "fake_sender": _qualname(get_kv_class(TransferBackend.FAKE, KVClassType.SENDER))}
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    child = ctx.Process(target=_spawned_child, args=(q,))
    child.start()
    out["child"] = q.get(timeout=600)
    child.join(60)
    print(json.dumps(out))


def _qualname(c):
    return f"{c.__module__}.{c.__qualname__}"


def _spawned_child(q):
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.disaggregation.utils import KVClassType, TransferBackend, get_kv_class

    tb = TransferBackend("strata")
    q.put({"enum": str(tb), "manager": _qualname(get_kv_class(tb, KVClassType.MANAGER)),
           "receiver": _qualname(get_kv_class(tb, KVClassType.RECEIVER))})


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "entrypoint":
        _entrypoint_main(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] in ("producer", "consumer"):
        _role_main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    else:
        unittest.main()
