"""SGLang prefill–decode (P/D) transfer through strata:
``--disaggregation-transfer-backend strata``.

Installed with the strata-client package, SGLang loads this module as a
plugin (entry point ``strata`` of the group ``sglang.srt.plugins``,
python/pyproject.toml) in each process it starts, the spawned scheduler
included; nothing in SGLang is patched::

    export STRATA_ADDR=10.0.0.5:7070,10.0.0.6:7070 STRATA_TENANT=acme \\
           STRATA_MODEL_REVISION=0e9e39f
    python -m sglang.launch_server --model-path M --port 30000 \\
        --disaggregation-mode prefill --disaggregation-transfer-backend strata
    python -m sglang.launch_server --model-path M --port 30001 \\
        --disaggregation-mode decode --disaggregation-transfer-backend strata
    python -m sglang_router.launch_router --pd-disaggregation \\
        --prefill http://P:30000 8998 --decode http://D:30001 --port 8000

How it plugs in, matched against sglang==0.5.23 as installed: SGLang's
transfer backends are a closed ``Enum`` (``disaggregation/utils.py``,
``TransferBackend``) and an ``if/elif`` chain (``get_kv_class``, which
raises "Unsupported transfer backend" for any other member). Its plugin
framework (``sglang/srt/plugins``) runs ``register`` below in every
process (``load_plugins``: launch_server, ``Engine``, and the scheduler
child as its first statement) and then applies the hooks registered here:

- ``add_disagg_transfer_backend_choices(["strata"])`` (arg_groups/
  choices.py), SGLang's public way to extend the flag's choices;
- a class REPLACE of ``TransferBackend`` by an equal enum with one more
  member, STRATA (every ``TransferBackend.X`` comparison in SGLang runs at
  call time; the hook registry rebinds the modules that imported it);
- an AROUND hook on ``get_kv_class`` that answers this module's classes
  for STRATA and calls the original for every other backend.

The pull model (docs/design.md §14): the prefill and decode never connect
to each other.

- Prefill (``StrataKVSender``): ``init`` opens the room
  ``sglang/<bootstrap_room>/tp<attention TP rank>`` (a room busy with an
  earlier attempt is retried until it drains, at most ``STRATA_PD_OPEN_WAIT``
  seconds); each ``send`` copies its pages out of the KV pool at once
  (stream-ordered on a GPU) and puts them from that copy; the last chunk
  adds the metadata (aux) row as the trailing page(s) and publishes.
  ``poll`` says Success once the publish returns: the pages are pinned in
  the store and SGLang may free its own. Nothing reads the KV pool after
  ``send`` returns, so an abort followed by an immediate release and
  overwrite publishes the snapshot taken before it, or nothing.
- Decode (``StrataKVReceiver``): ``send_metadata`` names the pages decode
  allocated; a worker awaits the room (bounded by SGLang's
  ``SGLANG_DISAGGREGATION_WAITING_TIMEOUT``), gets every page into staging
  memory of its own, and only when all arrived verified writes them into
  the KV pool at decode's page ids, then the aux row, then acknowledges.
  ``poll`` says Success after that. An ``abort`` waits out a write in
  progress and fences later ones, so SGLang may release the pages as soon
  as ``poll`` says Failed; the store's pin is released by the
  acknowledgement sent once the worker stopped reading.
- A failure is ``KVPoll.Failed`` with its reason (``failure_exception``
  raises SGLang's own ``KVTransferError``, which SGLang logs per request),
  counted in the manager's ``counters()`` by reason. A consumer whose
  namespace differs from the producer's (model revision, page layout,
  attention TP, ...) is refused by the store naming the differing fields:
  Failed, never a hit.

Settings (environment, inherited by SGLang's children): ``STRATA_ADDR``
(required), ``STRATA_TENANT`` (default "default"), ``STRATA_TOKEN``,
``STRATA_MODEL`` (the model's name in the namespace; default
``--served-model-name``, else the last two components of the model path),
``STRATA_MODEL_REVISION`` (both are part of the namespace: prefill and
decode must agree), ``STRATA_NODE_TIMEOUT`` (seconds per node call, default 5),
``STRATA_PD_OPEN_WAIT`` (default 30), ``STRATA_PD_AWAIT_TIMEOUT`` (default
SGLang's waiting timeout), ``STRATA_PD_THREADS`` (default 128: the
transfers of a rank that proceed at once, a decode's await included; more
wait their turn).

Refused at start, naming why (the manager's constructor raises
``UnservableConfiguration``): models with extra state pools (mamba, SWA,
DSA, ...: ``kv_args.state_types``), pipeline or attention-context
parallelism, a KV pool neither on the CPU nor on CUDA, a metadata buffer on
the GPU, and decode host destinations (SGLang refuses those itself:
``supports_host_destination`` is False).
"""

from __future__ import annotations

import enum
import hashlib
import logging
import math
import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Deque, List, Optional, Sequence

import numpy as np

try:
    from sglang.srt.disaggregation.base.conn import (  # type: ignore
        BaseKVBootstrapServer,
        BaseKVManager,
        BaseKVReceiver,
        BaseKVSender,
        KVArgs,
        KVPoll,
        KVTransferDestination,
        KVTransferMetric,
    )
except ImportError as e:  # pragma: no cover - exercised only without SGLang
    raise ImportError(
        "strata_client.sglang_disagg is SGLang's P/D transfer backend and needs SGLang "
        f"(pip install './python[sglang]'): {e}") from e

from . import errors as E
from ._connector import Connected, spans
from .descriptor import key_from_engine_hash, page_format_string
from .engines import _model_name, engine_descriptor
from .namespace import Namespace
from .transfer import CONSUMER_FAILURE, PRODUCER_FAILURE, USER_CANCEL, Grant, Room

logger = logging.getLogger(__name__)

__all__ = ["BACKEND", "register", "StrataKVManager", "StrataKVSender", "StrataKVReceiver", "StrataKVBootstrapServer",
           "UnservableConfiguration"]

# BACKEND is the name of the backend on SGLang's command line.
BACKEND = "strata"

# _PUT_BYTES bounds one put or get call (a batch of big pages is several
# node calls, each bounded by the node timeout).
_PUT_BYTES = 64 << 20

# _AWAIT_SLICE is the longest one await call waits, so that an abort is
# seen within it.
_AWAIT_SLICE = 1.0

# The manager's counters (counters()); failures are also counted by reason
# as failed_<reason>.
_COUNTERS = ("rooms_opened", "room_busy_retries", "pages_put", "bytes_put", "published", "sends_failed",
             "sends_aborted", "awaits", "pages_got", "bytes_got", "received", "receives_failed", "receives_aborted",
             "mismatches", "acks_failed", "aborts_sent", "stale", "failures", "not_connected")


class UnservableConfiguration(RuntimeError):
    """SGLang runs a configuration this backend cannot transfer (raised by
    the manager's constructor, so the server does not start)."""


# ---- plugin -----------------------------------------------------------------


def register() -> None:
    """The plugin (entry point group ``sglang.srt.plugins``): adds "strata"
    to the flag's choices and registers the hooks that make
    ``TransferBackend("strata")`` and ``get_kv_class`` answer this
    module's classes. SGLang's ``load_plugins`` applies them."""
    from sglang.srt.arg_groups.choices import (  # type: ignore
        DISAGG_TRANSFER_BACKEND_CHOICES,
        add_disagg_transfer_backend_choices,
    )
    from sglang.srt.disaggregation import utils  # type: ignore
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType  # type: ignore

    if BACKEND not in DISAGG_TRANSFER_BACKEND_CHOICES:
        add_disagg_transfer_backend_choices([BACKEND])
    if BACKEND not in {m.value for m in utils.TransferBackend}:
        HookRegistry.register("sglang.srt.disaggregation.utils.TransferBackend",
                              with_strata(utils.TransferBackend), HookType.REPLACE)
    HookRegistry.register("sglang.srt.disaggregation.utils.get_kv_class", _get_kv_class, HookType.AROUND)


def with_strata(backends: type) -> type:
    """SGLang's TransferBackend enum with one more member, STRATA: a new
    enum of the same name and module (an Enum with members cannot be
    subclassed)."""
    members = [(m.name, m.value) for m in backends] + [(BACKEND.upper(), BACKEND)]
    return enum.Enum(backends.__name__, members, module=backends.__module__, qualname=backends.__qualname__)


def _get_kv_class(original: Callable[..., Any], transfer_backend: Any, class_type: Any) -> Any:
    """get_kv_class, around SGLang's: this module's classes for STRATA (the
    shared KVArgs stays SGLang's), SGLang's answer for the others. A member
    of the enum as it was before the replacement is mapped by value."""
    from sglang.srt.disaggregation import utils  # type: ignore

    tb = utils.TransferBackend(getattr(transfer_backend, "value", transfer_backend))
    kind = getattr(class_type, "value", class_type)
    if tb.value != BACKEND or kind == "kvargs":
        return original(tb, class_type)
    return {"manager": StrataKVManager, "sender": StrataKVSender, "receiver": StrataKVReceiver,
            "bootstrap_server": StrataKVBootstrapServer}[kind]


class StrataKVBootstrapServer(BaseKVBootstrapServer):
    """SGLang starts a bootstrap server on the prefill (managers/
    disagg_service.py). With strata the decode learns nothing from the
    prefill, so this one binds no port and holds nothing."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port


# ---- settings ---------------------------------------------------------------


def _env(name: str, default: Any) -> Any:
    v = os.environ.get(name, "")
    return default if v == "" else v


def _waiting_timeout() -> float:
    from sglang.srt.environ import envs  # type: ignore

    return float(envs.SGLANG_DISAGGREGATION_WAITING_TIMEOUT.get())


# ---- pages in SGLang's buffers ------------------------------------------------


class _CudaBytes:
    """Device memory as a 1-D uint8 array torch can view
    (``__cuda_array_interface__``)."""

    def __init__(self, ptr: int, n: int):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 3,
                                         "strides": None}


def _bytes_at(ptr: int, n: int, device: str) -> Any:
    """A uint8 tensor over n bytes at address ptr of device (SGLang's
    buffer pointers from get_contiguous_buf_infos / get_buf_infos)."""
    import ctypes

    import torch  # type: ignore

    if device == "cpu":
        return torch.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=torch.uint8, count=n)
    return torch.as_tensor(_CudaBytes(ptr, n), device=device)


class _Pages:
    """A set of SGLang buffers (pointers, lengths, per-page item lengths:
    page p of buffer i is at ptr_i + p*item_len_i) read and written as
    pages of sum(item_lens) bytes: buffer 0's item, then buffer 1's, ..."""

    def __init__(self, ptrs: Sequence[int], lens: Sequence[int], items: Sequence[int], device: str):
        self.device = device
        self.items = [int(x) for x in items]
        self.page_bytes = sum(self.items)
        self.rows = min((int(n) // it for n, it in zip(lens, self.items)), default=0)
        self.views = [_bytes_at(int(p), self.rows * it, device).view(self.rows, it) for p, it in zip(ptrs, self.items)]

    def _index(self, idx: Sequence[int]) -> Any:
        import torch  # type: ignore

        ix = np.asarray(idx, dtype=np.int64).reshape(-1)
        if len(ix) and (int(ix.min()) < 0 or int(ix.max()) >= self.rows):
            raise ValueError(f"page ids {int(ix.min())}..{int(ix.max())} outside the {self.rows} pages of the buffers")
        return torch.from_numpy(ix).to(self.device)

    def staging(self, n: int) -> Any:
        """n pages of host memory (pinned when the buffers are on a GPU)."""
        import torch  # type: ignore

        return torch.empty((n, self.page_bytes), dtype=torch.uint8, pin_memory=self.device != "cpu")

    def gather(self, idx: Sequence[int], wait_event: Any = None) -> Any:
        """Copies of the pages at idx in host memory, and on a GPU the event
        that records their copy (None on the CPU): the copies are ordered
        on the current stream, before whatever overwrites the pages next."""
        import torch  # type: ignore

        out = self.staging(len(idx))
        ix = self._index(idx)
        gpu = self.device != "cpu"
        if gpu and wait_event is not None:
            torch.cuda.current_stream(self.device).wait_event(wait_event)
        off = 0
        for v, it in zip(self.views, self.items):
            out[:, off:off + it].copy_(v.index_select(0, ix), non_blocking=gpu)
            off += it
        ev = None
        if gpu:
            ev = torch.cuda.Event()
            ev.record(torch.cuda.current_stream(self.device))
        return out, ev

    def scatter(self, idx: Sequence[int], src: Any) -> None:
        """Write pages src (host, one row a page) at idx, and wait until
        they are written."""
        import torch  # type: ignore

        ix = self._index(idx)
        gpu = self.device != "cpu"
        off = 0
        for v, it in zip(self.views, self.items):
            v.index_copy_(0, ix, src[:, off:off + it].to(self.device, non_blocking=gpu))
            off += it
        if gpu:
            torch.cuda.current_stream(self.device).synchronize()


class _Serial:
    """Jobs run one after another, in submission order, on a shared pool."""

    def __init__(self, pool: ThreadPoolExecutor):
        self._pool = pool
        self._lock = threading.Lock()
        self._jobs: Deque[Callable[[], None]] = deque()
        self._running = False

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._jobs.append(job)
            if self._running:
                return
            self._running = True
        self._pool.submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._running = False
                    return
                job = self._jobs.popleft()
            job()


class _Failure(Exception):
    """A transfer failure with the reason it is counted under
    (failed_<reason>) and, once an attempt is known, the abort reason the
    room is told."""

    def __init__(self, reason: str, detail: str, abort: str = ""):
        super().__init__(detail)
        self.reason, self.detail, self.abort = reason, detail, abort


def _failure(e: BaseException, side: str) -> _Failure:
    """The reason a strata error is counted under."""
    if isinstance(e, _Failure):
        return e
    if isinstance(e, E.NamespaceMismatchError):
        return _Failure("version_mismatch", f"the decode's namespace is not the prefill's: {e}")
    if isinstance(e, (E.TransferAbortedError, E.TransferExpiredError)):
        return _Failure("aborted" if isinstance(e, E.TransferAbortedError) else "expired", str(e))
    if isinstance(e, E.UnavailableError):
        return _Failure("unavailable", str(e), PRODUCER_FAILURE if side == "prefill" else CONSUMER_FAILURE)
    return _Failure("error", f"{type(e).__name__}: {e}", PRODUCER_FAILURE if side == "prefill" else CONSUMER_FAILURE)


# ---- manager ------------------------------------------------------------------


class StrataKVManager(Connected, BaseKVManager):
    """One per scheduler rank (prefill or decode): the strata client, the
    namespace of this rank's pages, the workers, and the counters."""

    def __init__(self, args: KVArgs, disaggregation_mode: Any, server_args: Any, is_mla_backend: Optional[bool] = False):
        from sglang.srt.runtime_context import get_parallel  # type: ignore

        self.kv_args = args
        self.disaggregation_mode = disaggregation_mode
        self.server_args = server_args
        self.is_mla_backend = bool(is_mla_backend)
        self.addresses = str(_env("STRATA_ADDR", ""))
        if not self.addresses:
            raise UnservableConfiguration("the strata transfer backend needs STRATA_ADDR (the strata nodes' addresses)")
        self.tenant = str(_env("STRATA_TENANT", "default"))
        self.token = _env("STRATA_TOKEN", None)
        self.model = str(_env("STRATA_MODEL", ""))
        self.model_revision = str(_env("STRATA_MODEL_REVISION", ""))
        self.node_timeout = float(_env("STRATA_NODE_TIMEOUT", 5.0))
        self.reconnect_interval = float(_env("STRATA_RECONNECT_INTERVAL", 1.0))
        self.open_wait = float(_env("STRATA_PD_OPEN_WAIT", 30.0))
        self.await_timeout = float(_env("STRATA_PD_AWAIT_TIMEOUT", _waiting_timeout()))
        self._init_connected("strata P/D transfer", logger, _COUNTERS)
        parallel = get_parallel()
        self.attn_tp_size, self.attn_tp_rank = int(parallel.attn_tp_size), int(parallel.attn_tp_rank)
        self.attn_cp_size, self.attn_cp_rank = int(parallel.attn_cp_size), int(parallel.attn_cp_rank)
        self.pp_size = int(parallel.pp_size)
        self._refuse_unservable(args)
        device = str(getattr(server_args, "device", "") or "cuda")
        if device.startswith("cuda"):
            device = f"cuda:{int(getattr(args, 'gpu_id', 0) or 0)}"
        elif device != "cpu":
            raise UnservableConfiguration(f"the strata transfer backend moves KV on the CPU or CUDA, not {device!r}")
        self.kv = _Pages(args.kv_data_ptrs, args.kv_data_lens, args.kv_item_lens, device)
        self.aux = _Pages(args.aux_data_ptrs, args.aux_data_lens, args.aux_item_lens, "cpu")
        self.page_bytes = self.kv.page_bytes
        self.aux_pages = max(1, math.ceil(self.aux.page_bytes / self.page_bytes))
        self._pool = ThreadPoolExecutor(int(_env("STRATA_PD_THREADS", 128)), thread_name_prefix="strata-pd")
        if self._decode():
            self.prefill_info_table = _AnyPrefill(self._prefill_info())

    def _decode(self) -> bool:
        return getattr(self.disaggregation_mode, "value", self.disaggregation_mode) == "decode"

    def _refuse_unservable(self, args: KVArgs) -> None:
        why = []
        if self.pp_size > 1:
            why.append(f"pipeline parallelism (pp_size {self.pp_size})")
        if self.attn_cp_size > 1:
            why.append(f"attention context parallelism (attn_cp_size {self.attn_cp_size})")
        states = [getattr(s, "value", s) for s in (getattr(args, "state_types", None) or [])]
        if states:
            why.append(f"state pools {states} beside the KV pool")
        from sglang.srt.environ import envs  # type: ignore

        if envs.SGLANG_MOONCAKE_CUSTOM_MEM_POOL.get() == "INTRA_NODE_NVLINK":
            why.append("metadata buffers on the GPU (SGLANG_MOONCAKE_CUSTOM_MEM_POOL=INTRA_NODE_NVLINK)")
        if why:
            raise UnservableConfiguration("the strata transfer backend does not transfer " + "; ".join(why))

    def _prefill_info(self) -> Any:
        """What decode.py asks each prefill's bootstrap server for, to pick
        the prefill's DP rank. A room is named by the request's bootstrap
        room, so any DP rank will do; a prefill of another layout is told
        apart by the namespace."""
        from sglang.srt.disaggregation.common.conn import PrefillServerInfo  # type: ignore

        return PrefillServerInfo(attn_tp_size=self.attn_tp_size, attn_cp_size=1, dp_size=1, pp_size=1,
                                 page_size=int(self.kv_args.page_size), kv_cache_dtype=self.kv_args.kv_cache_dtype_str,
                                 follow_bootstrap_room=True)

    def register_to_bootstrap(self) -> None:
        """Nothing to register: the decode never asks the prefill."""

    def try_ensure_parallel_info(self, bootstrap_addr: str) -> bool:
        """decode.py's slow path to a prefill's topology: strata needs none."""
        return True

    def descriptor(self):
        """The namespace of this rank's transfer pages: model, revision,
        page size, KV dtype and layout, attention TP rank, and SGLang's own
        signature of the KV byte layout (utils.kv_layout_signature) with
        the metadata row's item sizes. Prefill and decode must agree on all
        of it; the store refuses a decode that does not, naming the
        fields."""
        from sglang.srt.disaggregation.utils import kv_layout_signature  # type: ignore

        a, sa = self.kv_args, self.server_args
        model = self.model or _model_name(str(getattr(sa, "served_model_name", None) or getattr(sa, "model_path", "")))
        return engine_descriptor(
            tenant=self.tenant, model=model, model_revision=self.model_revision, engine="sglang",
            page_tokens=int(a.page_size), kv_dtype=str(a.kv_cache_dtype_str or ""), layout=str(a.kv_layout or ""),
            tp_size=self.attn_tp_size, tp_rank=self.attn_tp_rank, mla=self.is_mla_backend, page_bytes=self.page_bytes,
            page_format=page_format_string([("kv", [("B", self.page_bytes)], "uint8")]),
            extra={"sglang_pd": "1", "sglang_attn_tp": f"{self.attn_tp_rank}/{self.attn_tp_size}",
                   "sglang_kv_layout_signature": f"{kv_layout_signature(a):x}",
                   "sglang_kv_buffers": f"{len(a.kv_item_lens)}x{','.join(sorted({str(x) for x in a.kv_item_lens}))}",
                   "sglang_aux_item_lens": ",".join(str(int(x)) for x in a.aux_item_lens)})

    def room_name(self, bootstrap_room: int) -> str:
        """The strata room of a request on this rank: KV is sharded by
        attention TP rank, so each rank hands over its own."""
        return f"sglang/{int(bootstrap_room)}/tp{self.attn_tp_rank}"

    def page_keys(self, ns: Namespace, room: Room, first: int, n: int, kind: str = "kv") -> List[bytes]:
        """The keys of pages first..first+n of an attempt ("kv" or "aux"):
        another attempt's never collide with them."""
        return [key_from_engine_hash(ns.id, hashlib.sha256(
            f"sglang-pd\x00{room.name}\x00{room.attempt}\x00{kind}\x00{first + i}".encode()).digest())
            for i in range(n)]

    def put(self, ns: Namespace, keys: List[bytes], rows: Any, first_depth: int, parent: Optional[bytes]) -> None:
        """Put pages (rows of a host tensor) as one chain, in calls of
        bounded bytes; raises unless every page is stored."""
        for a, b in spans(len(keys), self.page_bytes, _PUT_BYTES):
            res = ns.put_chain(keys[a:b], [rows[i] for i in range(a, b)], first_depth=first_depth + a,
                               parent=keys[a - 1] if a else parent)
            bad = [(a + i, r) for i, r in enumerate(res) if not r.stored]
            if bad:
                i, r = bad[0]
                raise _Failure("put", f"{len(bad)} of {b - a} pages not stored (page {i}: {r.status} {r.reason})",
                               PRODUCER_FAILURE)
        self._count(pages_put=len(keys), bytes_put=len(keys) * self.page_bytes)

    def get(self, ns: Namespace, keys: List[bytes], rows: Any) -> None:
        """Get pages into rows of a host tensor, in calls of bounded bytes;
        raises unless every page arrived verified."""
        for a, b in spans(len(keys), self.page_bytes, _PUT_BYTES):
            got = ns.get(keys[a:b], [rows[i] for i in range(a, b)])
            missing = [a + i for i, x in enumerate(got) if x is None]
            if missing:
                raise _Failure("missing_pages", f"{len(missing)} of {len(keys)} pages missing or corrupt "
                               f"(first: page {missing[0]})", CONSUMER_FAILURE)
        self._count(pages_got=len(keys), bytes_got=len(keys) * self.page_bytes)

    def failed(self, side: str, f: _Failure) -> None:
        """Count and log a failed transfer."""
        self._count(**{f"failed_{f.reason}": 1, ("sends_failed" if side == "prefill" else "receives_failed"): 1})
        if f.reason == "version_mismatch":
            self._count(mismatches=1)
        self._fail(f"{side} {f.reason}", f)

    def abort_room(self, room: Room, reason: str, detail: str) -> None:
        """Tell the room an attempt ended. A failure is counted and logged
        (the attempt then ends at its TTL: the open TTL, or the pin's)."""
        try:
            self._client.abort_room(room, reason, detail[:1000])
            self._count(aborts_sent=1)
        except E.StaleAttemptError as e:  # the room moved on: nothing changed
            self._count(stale=1)
            self._log.info("%s: abort of %s attempt %d: %s", self._what, room.name, room.attempt, e)
        except Exception as e:
            self._fail("abort room", e)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            c, self._client, self._ns = self._client, None, None
        if c is not None:
            c.close()


class _AnyPrefill(dict):
    """decode.py's ``kv_manager.prefill_info_table``: one answer for every
    prefill address (strata's rooms need no prefill topology)."""

    def __init__(self, info: Any):
        super().__init__()
        self._info = info

    def get(self, key: Any, default: Any = None) -> Any:
        return self._info

    def __getitem__(self, key: Any) -> Any:
        return self._info

    def __contains__(self, key: Any) -> bool:
        return True


def _transfer_error(bootstrap_room: int, reason: str) -> Exception:
    from sglang.srt.disaggregation.common.conn import KVTransferError  # type: ignore

    return KVTransferError(bootstrap_room, reason)


class _Outcome:
    """What a sender and a receiver share: the outcome SGLang polls, why it
    failed, and the attempt to abort in the store, once."""

    def _init_outcome(self, mgr: StrataKVManager, bootstrap_addr: str, bootstrap_room: Optional[int]) -> None:
        self.kv_mgr = mgr
        self.bootstrap_addr = bootstrap_addr
        self.bootstrap_room = int(bootstrap_room or 0)
        self.room_name = mgr.room_name(self.bootstrap_room)
        # _lock guards the fields below it (and those of the subclass).
        self._lock = threading.Lock()
        self.conclude_state: Optional[int] = None
        self.failure_reason = ""
        self._aborted = False
        self._abort_sent = False

    def _attempt_locked(self) -> Optional[Room]:
        raise NotImplementedError

    def _conclude_locked(self, state: int, reason: str = "") -> None:
        self.conclude_state = state
        self.failure_reason = reason

    def _take_abort_locked(self) -> Optional[Room]:
        """The attempt to abort in the store, once it is known, once."""
        room = self._attempt_locked()
        if room is None or self._abort_sent:
            return None
        self._abort_sent = True
        return room

    def _aborting(self, counter: str) -> Optional[Room]:
        """SGLang aborts the transfer: Failed from now on (counted once
        under counter), and the attempt to abort in the store, if it is
        known and not told yet. Waits for the lock (a receiver's write into
        the KV pool holds it)."""
        with self._lock:
            if self._aborted:
                return None
            self._aborted = True
            if self.conclude_state != KVPoll.Failed:
                self._conclude_locked(KVPoll.Failed, "aborted by SGLang")
                self.kv_mgr._count(**{counter: 1})
            return self._take_abort_locked()

    def failure_exception(self) -> None:
        raise _transfer_error(self.bootstrap_room, self.failure_reason or "strata transfer failed")


# ---- prefill ------------------------------------------------------------------


class StrataKVSender(_Outcome, BaseKVSender):
    """The prefill side of one request: opens the room, puts the pages of
    each send from a copy taken at the send, publishes after the last."""

    def __init__(self, mgr: StrataKVManager, bootstrap_addr: str, bootstrap_room: int,
                 req_has_disagg_prefill_dp_rank: bool = False):
        self._init_outcome(mgr, bootstrap_addr, bootstrap_room)
        self._early_send_wait_event = None  # prefill.py sets it before an early send under overlap
        self._serial = _Serial(mgr._pool)
        self._wake = threading.Event()
        # Guarded by _lock:
        self.num_kv_indices: Optional[int] = None
        self.aux_index: Optional[int] = None
        self.sent_pages = 0
        self.tokens = 0
        self.attempt: Optional[Room] = None
        # The serial worker's own:
        self._last_key: Optional[bytes] = None
        self._keys: List[bytes] = []
        self._first_send = 0.0
        self._latency: Optional[float] = None
        self._bytes = 0

    # -- SGLang's calls (the scheduler thread) --

    def init(self, num_kv_indices: int, aux_index: Optional[int] = None) -> None:
        with self._lock:
            self.num_kv_indices, self.aux_index = int(num_kv_indices), aux_index
        self._serial.submit(self._open)

    def should_send_kv_chunk(self, num_pages: int, last_chunk: bool) -> bool:
        return num_pages > 0 or last_chunk  # the last chunk carries the aux row even without pages

    def send(self, kv_indices: Any, state_indices: Optional[List] = None, num_kv_tokens: Optional[int] = None) -> None:
        mgr = self.kv_mgr
        with self._lock:
            if self.conclude_state is not None:
                return
            if self.num_kv_indices is None:
                self._conclude_locked(KVPoll.Failed, "send before init")
                return
            first = self.sent_pages
            self.sent_pages += len(kv_indices)
            self.tokens += int(num_kv_tokens if num_kv_tokens is not None else len(kv_indices) * int(mgr.kv_args.page_size))
            last = self.sent_pages >= self.num_kv_indices
            aux_index = self.aux_index
            if not self._first_send:
                self._first_send = time.monotonic()
        if state_indices and any(s is not None for s in state_indices):
            self._fail(_Failure("unsupported", "state pages (mamba, SWA, ...) are not transferred by strata"))
            return
        ev, self._early_send_wait_event = self._early_send_wait_event, None
        try:
            pages, ready = mgr.kv.gather(kv_indices, ev)
            aux = None
            if last:
                row = mgr.aux.gather([aux_index])[0].reshape(-1) if aux_index is not None else None
                aux = mgr.kv.staging(mgr.aux_pages)
                aux.zero_()
                if row is not None:
                    aux.view(-1)[:len(row)].copy_(row)
        except Exception as e:
            self._fail(_Failure("copy", f"copying pages out of the KV pool: {type(e).__name__}: {e}"))
            return
        self._serial.submit(lambda: self._put(first, pages, ready, aux))

    def poll(self) -> int:
        with self._lock:
            if self.conclude_state is not None:
                return self.conclude_state
            if self.num_kv_indices is None or not self.sent_pages:
                return KVPoll.WaitingForInput
            return KVPoll.Transferring

    def poll_pp_consensus(self) -> int:
        return self.poll()

    def get_transfer_metric(self) -> KVTransferMetric:
        return KVTransferMetric(transfer_latency_s=self._latency, transfer_total_bytes=self._bytes or None)

    def abort(self) -> None:
        """SGLang aborts the request (its KV may be released and reused at
        once): nothing of it is read after this, and poll says Failed. The
        attempt is aborted in the store: one not yet published publishes
        nothing; one a consumer took drains until its ack."""
        room = self._aborting("sends_aborted")
        self._wake.set()
        if room is not None:
            self.kv_mgr._pool.submit(self.kv_mgr.abort_room, room, USER_CANCEL, "SGLang aborted the request")

    def clear(self) -> None:
        with self._lock:
            self._keys = []

    # -- the worker --

    def _attempt_locked(self) -> Optional[Room]:
        return self.attempt

    def _fail(self, f: _Failure) -> None:
        with self._lock:
            if self.conclude_state is None:
                self._conclude_locked(KVPoll.Failed, f"{f.reason}: {f.detail}")
                counted = True
            else:
                counted = False
            room = self._take_abort_locked()
        if counted:
            self.kv_mgr.failed("prefill", f)
        if room is not None:
            self.kv_mgr._pool.submit(self.kv_mgr.abort_room, room, f.abort or PRODUCER_FAILURE, f.detail)

    def _open(self) -> None:
        mgr = self.kv_mgr
        deadline = time.monotonic() + mgr.open_wait
        delay = 0.02
        try:
            mgr._ensure()
            while True:
                if self._aborted:
                    return
                try:
                    room = mgr._client.open_room(self.room_name)
                    break
                except E.RoomBusyError as e:
                    mgr._count(room_busy_retries=1)
                    if time.monotonic() + delay > deadline:
                        raise _Failure("room_busy", f"room {self.room_name} stayed busy for {mgr.open_wait:g}s: {e}")
                    self._wake.wait(delay)
                    delay = min(delay * 2, 0.5)
            mgr._count(rooms_opened=1)
            with self._lock:
                self.attempt = room
                abort = self._take_abort_locked() if self._aborted else None
            if abort is not None:
                mgr.abort_room(abort, USER_CANCEL, "SGLang aborted the request")
        except Exception as e:
            self._fail(_failure(e, "prefill"))

    def _put(self, first: int, pages: Any, ready: Any, aux: Any) -> None:
        mgr = self.kv_mgr
        try:
            if ready is not None:
                ready.synchronize()
            with self._lock:
                if self.conclude_state is not None or self.attempt is None:
                    return
                room = self.attempt
            ns = mgr._ensure()
            keys = mgr.page_keys(ns, room, first, len(pages))
            mgr.put(ns, keys, pages, first, self._last_key)
            self._keys += keys
            self._last_key = keys[-1] if keys else self._last_key
            if aux is None:
                return
            akeys = mgr.page_keys(ns, room, 0, len(aux), "aux")
            mgr.put(ns, akeys, aux, len(self._keys), self._last_key)
            with self._lock:
                if self.conclude_state is not None:
                    return
                tokens = self.tokens
            mgr._client.publish_room(room, ns, self._keys + akeys, tokens)
            self._keys += akeys
            with self._lock:
                if self.conclude_state is None:
                    self._latency = time.monotonic() - self._first_send
                    self._bytes = len(self._keys) * mgr.page_bytes
                    self._conclude_locked(KVPoll.Success)
            mgr._count(published=1)
        except Exception as e:
            self._fail(_failure(e, "prefill"))


# ---- decode -------------------------------------------------------------------


class StrataKVReceiver(_Outcome, BaseKVReceiver):
    """The decode side of one request: awaits the room, gets every page
    into staging memory of its own, then writes them at decode's page ids,
    the aux row last, and acknowledges."""

    def __init__(self, mgr: StrataKVManager, bootstrap_addr: str, bootstrap_room: Optional[int] = None):
        self._init_outcome(mgr, bootstrap_addr, bootstrap_room)
        # Duck-typed members decode.py reads (see BaseKVReceiver's users).
        self.abort_notified = False
        self.require_staging = False
        self.bootstrap_infos: List[Any] = []
        self._told = threading.Event()  # the store was told of the abort
        # Guarded by _lock, which a write into the KV pool holds too:
        self._inited = False
        self._started = False
        self._grant: Optional[Grant] = None

    def init(self, prefill_dp_rank: int) -> None:
        with self._lock:
            self._inited = True

    def send_metadata(self, kv_indices: Any, aux_index: Optional[int] = None, state_indices: Optional[List] = None,
                      decode_prefix_len: Optional[int] = None,
                      destination: KVTransferDestination = KVTransferDestination.DEVICE) -> None:
        ps = int(self.kv_mgr.kv_args.page_size)
        skip = int(decode_prefix_len or 0)
        why = ""
        if destination != KVTransferDestination.DEVICE:
            why = f"destination {getattr(destination, 'value', destination)}: strata writes the device KV pool only"
        elif state_indices and any(s is not None for s in state_indices):
            why = "state pages (mamba, SWA, ...) are not transferred by strata"
        elif skip % ps:
            why = f"a decode prefix of {skip} tokens is not whole pages of {ps}"
        elif aux_index is None:
            why = "no metadata (aux) slot"
        with self._lock:
            if self.conclude_state is not None or self._started:
                return
            self._started = True
        if why:
            self._fail(_Failure("unsupported", why))
            return
        idx = np.asarray(kv_indices, dtype=np.int64).reshape(-1).copy()
        self.kv_mgr._pool.submit(self._load, idx, int(aux_index), skip // ps)

    def poll(self) -> int:
        with self._lock:
            if self.conclude_state is not None:
                return self.conclude_state
            if not self._inited:
                return KVPoll.Bootstrapping
            if not self._started:
                return KVPoll.WaitingForInput
            return KVPoll.Transferring

    def abort(self) -> None:
        """SGLang aborts the request and releases its pages at the next
        poll: a write into them in progress is waited out (the lock), none
        starts after. The store is told at once (the attempt drains, its
        pin held); the worker acknowledges once it stopped reading."""
        room = self._aborting("receives_aborted")
        if room is not None:
            self.kv_mgr._pool.submit(self._tell, room, USER_CANCEL, "SGLang aborted the request")

    def ensure_abort_notified(self, *, force_arm: bool = False) -> None:
        """No remote writer holds decode's pages: nothing to arm."""

    def clear(self) -> None:
        """SGLang is done with the request. A worker still finishing an
        aborted or failed load keeps what it needs to acknowledge."""

    # -- the worker --

    def _attempt_locked(self) -> Optional[Room]:
        return self._grant.room if self._grant is not None else None

    def _tell(self, room: Room, reason: str, detail: str) -> None:
        try:
            self.kv_mgr.abort_room(room, reason, detail)
        finally:
            self._told.set()

    def _fail(self, f: _Failure) -> None:
        with self._lock:
            counted = self.conclude_state is None
            if counted:
                self._conclude_locked(KVPoll.Failed, f"{f.reason}: {f.detail}")
            room = self._take_abort_locked()
        if counted:
            self.kv_mgr.failed("decode", f)
        if room is not None:
            self._tell(room, f.abort or CONSUMER_FAILURE, f.detail)

    def _await(self, ns: Namespace) -> Optional[Grant]:
        """The room's published attempt, or None once aborted."""
        mgr = self.kv_mgr
        deadline = time.monotonic() + mgr.await_timeout
        mgr._count(awaits=1)
        while not self._aborted:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Failure("timeout", f"nothing published in room {self.room_name} within {mgr.await_timeout:g}s")
            try:
                return mgr._client.await_room(self.room_name, ns, timeout=min(_AWAIT_SLICE, left))
            except E.DeadlineError:
                continue
        return None

    def _load(self, idx: Any, aux_index: int, skip: int) -> None:
        mgr = self.kv_mgr
        acked = False
        try:
            ns = mgr._ensure()
            g = self._await(ns)
            if g is None:
                return
            with self._lock:
                self._grant = g
                room = self._take_abort_locked() if self._aborted else None
            if room is not None:
                self._tell(room, USER_CANCEL, "SGLang aborted the request")
                return
            kv_pages = len(g.keys) - mgr.aux_pages
            if kv_pages != skip + len(idx):
                raise _Failure("page_count", f"room {self.room_name} attempt {g.room.attempt} holds {kv_pages} KV "
                               f"pages; decode has {skip} and allocated {len(idx)}", CONSUMER_FAILURE)
            keys = g.keys[skip:kv_pages] + g.keys[kv_pages:]
            staging = mgr.kv.staging(len(keys))
            mgr.get(ns, keys, staging)
            row = staging[len(idx):].reshape(-1)[:mgr.aux.page_bytes].reshape(1, -1)
            with self._lock:
                if self._aborted:
                    return
                mgr.kv.scatter(idx, staging[:len(idx)])
                mgr.aux.scatter([aux_index], row)  # the aux row (its bootstrap_room) lands last
            try:
                mgr._client.ack_room(g.room)
            except Exception as e:  # the pages are loaded; the pin ends at its TTL
                mgr._count(acks_failed=1)
                mgr._fail("ack room", e)
            acked = True
            with self._lock:
                if self.conclude_state is None:
                    self._conclude_locked(KVPoll.Success)
            mgr._count(received=1)
        except Exception as e:
            self._fail(_failure(e, "decode"))
        finally:
            if not acked:
                self._ack_after_abort()

    def _ack_after_abort(self) -> None:
        """The worker stopped reading an attempt it took and did not load:
        once the store was told why, the ack ends the draining attempt
        and releases its pin."""
        with self._lock:
            g = self._grant
            room = self._take_abort_locked()
        if g is None:
            return
        if room is not None:  # aborted between the grant and here, not told yet
            self._tell(room, USER_CANCEL, "SGLang aborted the request")
        self._told.wait(4 * self.kv_mgr.node_timeout)
        try:
            self.kv_mgr._client.ack_room(g.room)
        except (E.StaleAttemptError, E.TransferStateError, E.TransferAbortedError, E.TransferExpiredError) as e:
            self.kv_mgr._log.info("%s: ack of %s attempt %d after its abort: %s", self.kv_mgr._what, g.room.name,
                                  g.room.attempt, e)
        except Exception as e:
            self.kv_mgr._count(acks_failed=1)
            self.kv_mgr._fail("ack room", e)
