"""The worker half of strata's vLLM connector (``strata_client.vllm``).

One per vLLM worker (TP/PP rank); it reads and writes that rank's shard
namespace. A page is one KV block of every layer of the rank's KV cache
group: for each layer (``layer_names`` order) the layer view's block in
logical ``[H, N, C]`` order, as vLLM 0.33 registers its caches
(``kv_caches[layer]`` is a ``[B, H, N, C]`` view whose physical strides
follow the resolved ``KVCacheLayout``). A block of a layer is cut into the
fewest contiguous runs of that view (one for block-compact layouts, one
per head for head-outer ones), and the page is those runs in order.

- Loads (``start_load_kv``) run on the I/O pool: a verified get under the
  scheduler's lease, received straight into the runs of the engine's
  blocks when the cache is in host memory (``ScatterBuffer``: no copy
  besides the socket's), or into one pinned staging page then copied to
  the device (one copy). A page that is missing, fails its checksum, or
  whose get fails (node down, lease expired) marks that block and every
  later block of the request failed: ``get_block_ids_with_load_errors``
  reports them, and the request is reported in ``get_finished``'s
  receiving set either way, so vLLM recomputes (never an exception).
- Saves (``wait_for_save``) run on the pool too: the block's runs are
  gathered into one page buffer (the one copy; from the device after an
  event recorded on the compute stream) and put with the client's
  checksummed put (a page becomes visible only after the node verified it).
  A request vLLM holds for its saves (``deferred`` in the metadata) is
  reported in ``get_finished``'s sending set once its saves ended.
- ``handle_preemptions`` waits for the saves of preempted requests before
  vLLM reuses their blocks.
- P/D producer: a ``PublishSpec`` is published in the shard's room once
  every save of its request ended (the pages verified by the node), and
  the request is reported in the sending set only then; a publish that
  fails aborts the room (``producer_failure``).
- P/D consumer: a load naming a room awaits the shard's attempt (at most
  ``strata_pd_await_timeout``), checks that the producer's keys are the
  keys of its own blocks, reads them under the room's pin and acknowledges
  (after an abort too: the ack is its word that it stopped reading). A
  failure is logged with its reason and counted as ``pd_error_<reason>``;
  its blocks are load errors, never a hit.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, wait
from typing import Any, Dict, List, Optional, Set, Tuple

from . import errors as E
from .buffers import ScatterBuffer
from .client import EventInfo, Page
from .engines import vllm_connector_descriptor, vllm_page_format
from .transfer import CONSUMER_FAILURE, PRODUCER_FAILURE, TIMEOUT, Room
from .vllm import LoadSpec, PublishSpec, SaveSpec, StrataConnectorMetadata, shard_name, shard_room
from .vllm_link import Counters, Link

log = logging.getLogger("strata_client.vllm")


class WorkerSide:
    def __init__(self, vllm_config: Any, kv_cache_config: Any, settings: Any):
        self.s, self._cfg, self._kvc = settings, vllm_config, kv_cache_config
        self.tp_rank, self.pp_rank = _ranks(vllm_config.parallel_config)
        self.shard = ""
        self._layers: List[Any] = []  # per layer: the [B, H, N, C] view (or [B*r, ...] kernel blocks)
        self._ratio = 1
        self._page_bytes = 0
        self._device = None
        self._lock = threading.Lock()
        # guarded by _lock
        self._recving_done: Set[str] = set()
        self._failed_blocks: Set[int] = set()
        self._saves: Dict[str, List[Future]] = {}
        self._deferred: Set[str] = set()
        self.stats = Counters("loads", "loaded_pages", "load_failures", "failed_pages", "saves", "saved_pages",
                              "save_failures", "saves_skipped", "errors", "pd_published", "pd_published_pages",
                              "pd_publish_failures", "pd_loads", "pd_loaded_pages", "pd_load_errors",
                              *(f"pd_error_{r}" for r in _PD_ERRORS))
        self.link: Optional[Link] = None
        self.disabled = ""

    def counters(self) -> Dict[str, int]:
        return self.stats.snapshot()

    # ---- registration ----

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        try:
            self._register(kv_caches)
        except Exception as e:
            self.disabled = f"{type(e).__name__}: {e}"
            log.error("strata: KV caches not usable (%s): the connector is off on this worker", self.disabled)
            return
        # The scheduler's function and inputs (vllm_scheduler.py
        # _descriptors): the namespace does not depend on what only the
        # worker sees. The page format is then derived again from the
        # tensors: a worker whose caches serialise otherwise is off, loudly.
        d = vllm_connector_descriptor(self._cfg, self._kvc, tenant=self.s.tenant, tp_rank=self.tp_rank,
                                      pp_rank=self.pp_rank, model=self.s.model, model_revision=self.s.model_revision)
        v = self._layers[0]
        spec = self._kvc.kv_cache_groups[0].kv_cache_spec
        spec = next(iter(spec.kv_cache_specs.values())) if getattr(spec, "kv_cache_specs", None) else spec
        got = vllm_page_format(spec, str(self._cfg.cache_config.cache_dtype), layers=len(self._layers),
                               heads=int(v.shape[1]), tokens=self._ratio * int(v.shape[2]),
                               cell_bytes=int(v.shape[3]) * int(v.element_size()))
        if d.page_bytes != self._page_bytes or d.page_format != got:
            self.disabled = (f"pages of {self._page_bytes} bytes, format {got}, in the caches; "
                             f"{d.page_bytes} bytes, format {d.page_format}, from the KV cache spec")
            log.error("strata: %s: the connector is off on this worker", self.disabled)
            return
        self.shard = shard_name(d.tp_rank, d.pp_rank)
        self.link = Link(self.s, lambda: {self.shard: d}, f"w{self.tp_rank}")
        self.link.start()

    def _register(self, kv_caches: Dict[str, Any]) -> None:
        group = self._kvc.kv_cache_groups[0]
        names = [n for n in group.layer_names if n in kv_caches]
        if not names:
            raise ValueError("no KV cache of the group's layers was registered")
        nb = int(self._kvc.num_blocks)
        views = []
        ratio = None
        for n in names:
            t = kv_caches[n]
            if t.dim() < 2 or t.shape[0] % nb:
                raise ValueError(f"layer {n}: cache of shape {tuple(t.shape)} has no leading block dimension of {nb}")
            r = t.shape[0] // nb
            if ratio is None:
                ratio = r
            elif r != ratio:
                raise ValueError(f"layer {n}: {r} kernel blocks a block, other layers {ratio}")
            views.append(t)
        self._layers = views
        self._ratio = ratio or 1
        self._device = views[0].device
        self._page_bytes = sum(_nbytes(self._block_view(v, 0)) for v in views)

    def _block_view(self, t: Any, b: int) -> Any:
        """Block b of a layer in logical [H, N, C] order: with kernel blocks
        (r a block), its r [H, n, C] pieces as [H, r, n, C], so a page's
        bytes do not depend on the attention backend's kernel block size."""
        r = self._ratio
        return t[b] if r == 1 else t[b * r:(b + 1) * r].permute(1, 0, 2, 3)

    def _runs(self, b: int) -> List[Any]:
        """The contiguous runs of block b over every layer, as uint8 tensors."""
        out: List[Any] = []
        for t in self._layers:
            _contiguous_runs(self._block_view(t, b), out)
        return out

    def _ready(self) -> bool:
        return not self.disabled and self.link is not None and self.link.ready()

    # ---- loads ----

    def start_load_kv(self, meta: StrataConnectorMetadata) -> None:
        try:
            with self._lock:
                for pub in meta.publishes:  # before deferred: a request is reported once it published
                    after = list(self._saves.get(pub.req_id, []))
                    self._saves.setdefault(pub.req_id, []).append(self._after(after, self._publish_job, pub))
                self._deferred |= set(meta.deferred)
            for ld in meta.loads:
                self._start_load(ld)
        except Exception:
            log.exception("strata: starting loads failed")
            self.stats.add("errors")

    def _start_load(self, ld: LoadSpec) -> None:
        self.stats.add("loads")
        if not self._ready():
            self._load_done(ld, 0)
            return
        fut = self.link.pool.submit(self._load_job, ld)
        fut.add_done_callback(lambda f, ld=ld: self._load_done(ld, _int_result(f)))

    def _load_job(self, ld: LoadSpec) -> int:
        """Reads ld's pages; returns how many from the start arrived verified."""
        ns = self.link.ns(self.shard)
        if ld.room is not None:
            return self._room_load(ns, ld)
        lease = None
        exported = ld.leases.get(self.shard)
        if exported is not None:
            lease = ns.adopt_lease(exported)
        try:
            return self._read(ns, [ns.key_from_engine_hash(h) for h in ld.hashes], ld, lease)
        except Exception as e:  # node down, lease expired, ...: the blocks are recomputed
            log.warning("strata: load of %s failed: %s", ld.req_id, e)
            return 0
        finally:
            if lease is not None:
                try:
                    lease.release(timeout=self.s.node_timeout)
                except Exception as e:  # the node lets it expire; the load's answer stands
                    log.info("strata: releasing the lease of %s: %s", ld.req_id, e)

    def _read(self, ns: Any, keys: List[bytes], ld: LoadSpec, lease: Any) -> int:
        """Verified reads of keys into ld's blocks; how many from the start arrived."""
        if self._device is None or self._device.type == "cpu":
            bufs = [ScatterBuffer([_mv(r) for r in self._runs(b)]) for b in ld.block_ids]
            got = ns.get(keys, bufs, lease=lease, timeout=self.s.lookup_timeout + self.s.node_timeout * 2)
            return _prefix(got)
        return self._load_via_staging(ns, keys, ld, lease)

    # ---- P/D ----

    def _room_load(self, ns: Any, ld: LoadSpec) -> int:
        """A consumer's load of the producer's room; how many blocks from
        the start arrived verified (0 on any failure, logged and counted)."""
        self.stats.add("pd_loads")
        attempt = ld.room.attempts.get(self.shard)
        room = shard_room(ld.room.room, self.shard)
        if attempt is None:
            return self._pd_fail(ld, room, "params", f"the producer published no room for shard {self.shard}")
        c = self.link.client()
        try:
            g = c.await_room(room, ns, attempt=attempt, timeout=self.s.pd_await_timeout)
        except E.DeadlineError as e:
            _abort(c, Room(room, attempt), TIMEOUT, f"the decode waited {self.s.pd_await_timeout:g}s")
            return self._pd_fail(ld, room, "timeout", e)
        except Exception as e:  # a refusal, or the room's node down: recomputed
            return self._pd_fail(ld, room, _PD_ERRORS_BY_CLASS.get(type(e), "other"), e)
        n, why = 0, ""
        try:
            keys = [ns.key_from_engine_hash(h) for h in ld.hashes]
            if g.keys[ld.first_depth:ld.first_depth + len(keys)] != keys:
                why = ("keys", f"the producer's keys of blocks {ld.first_depth}..{ld.first_depth + len(keys) - 1} are "
                               "not this prompt's (other tokens or another block hash seed)")
            else:
                n = self._read(ns, keys, ld, None)  # under the room's pin
                if n < len(keys):
                    why = ("pages", f"page {ld.first_depth + n} missing or failing its checksum")
        except Exception as e:
            why = ("other", f"{type(e).__name__}: {e}")
        finally:
            if why:
                _abort(c, g.room, CONSUMER_FAILURE, why[1])
            try:
                c.ack_room(g.room)  # it stopped reading: the pin goes
            except Exception as e:  # the pin's TTL ends it
                log.info("strata: P/D: acknowledging room %r attempt %d: %s", room, g.room.attempt, e)
        if why:
            self._pd_fail(ld, room, *why)
            return 0  # a prefix of another attempt's pages is no hit either
        self.stats.add("pd_loaded_pages", n)
        return n

    def _pd_fail(self, ld: LoadSpec, room: str, reason: str, detail: Any) -> int:
        self.stats.add("pd_load_errors")
        self.stats.add(f"pd_error_{reason}")
        log.warning("strata: P/D load of %s from room %r failed (%s: %s): its %d blocks are recomputed", ld.req_id,
                    room, reason, detail, len(ld.block_ids))
        return 0

    def _publish_job(self, pub: PublishSpec) -> None:
        """Publish the shard's pages of a finished P/D request (its saves ended)."""
        attempt = pub.room.attempts.get(self.shard)
        room = Room(shard_room(pub.room.room, self.shard), attempt or 0)
        c = self.link.client() if self.link is not None else None
        ns = self.link.ns(self.shard) if self.link is not None else None
        try:
            if attempt is None:
                raise ValueError(f"no room was opened for shard {self.shard}")
            if c is None or ns is None:
                raise ConnectionError(f"strata not connected ({self.disabled or 'connecting'})")
            keys = [ns.key_from_engine_hash(h) for h in pub.hashes]
            c.publish_room(room, ns, keys, pub.room.tokens)
            self.stats.add("pd_published")
            self.stats.add("pd_published_pages", len(keys))
        except Exception as e:
            self.stats.add("pd_publish_failures")
            log.warning("strata: P/D: publishing %s in room %r failed (%s): the decode recomputes it", pub.req_id,
                        room.name, e)
            if c is not None and attempt is not None:
                _abort(c, room, PRODUCER_FAILURE, f"publish failed: {e}")

    def _after(self, futs: List[Future], fn: Any, *args: Any) -> Future:
        """A future of fn(*args), run on the pool once every one of futs is done."""
        out: Future = Future()
        pending = [f for f in futs if not f.done()]
        left = [len(pending)]
        lock = threading.Lock()

        def run(_: Any = None) -> None:
            with lock:
                left[0] -= 1
                if left[0] > 0:
                    return
            try:
                if self.link is None:
                    fn(*args)
                    out.set_result(None)
                    return
                self.link.pool.submit(fn, *args).add_done_callback(lambda f: out.set_result(None))
            except Exception as e:  # the pool is shut down: the request is reported, not held forever
                log.warning("strata: P/D: %s not run: %s", getattr(fn, "__name__", fn), e)
                if not out.done():
                    out.set_result(None)

        if not pending:
            left[0] = 1
            run()
        for f in pending:
            f.add_done_callback(run)
        return out

    def _load_via_staging(self, ns: Any, keys: List[bytes], ld: LoadSpec, lease: Any) -> int:
        import torch

        stage = [torch.empty(self._page_bytes, dtype=torch.uint8, pin_memory=True) for _ in keys]
        got = ns.get(keys, stage, lease=lease, timeout=self.s.lookup_timeout + self.s.node_timeout * 2)
        n = _prefix(got)
        stream = torch.cuda.Stream(device=self._device)
        with torch.cuda.stream(stream):
            for j in range(n):
                off = 0
                for r in self._runs(ld.block_ids[j]):
                    r.copy_(stage[j][off:off + r.numel()], non_blocking=True)
                    off += r.numel()
        stream.synchronize()
        return n

    def _load_done(self, ld: LoadSpec, n: int) -> None:
        self.stats.add("loaded_pages", n)
        if n < len(ld.block_ids):
            self.stats.add("load_failures")
            self.stats.add("failed_pages", len(ld.block_ids) - n)
        with self._lock:  # failed blocks are reported no later than the request
            self._failed_blocks.update(ld.block_ids[n:])
            self._recving_done.add(ld.req_id)

    # ---- saves ----

    def wait_for_save(self, meta: StrataConnectorMetadata) -> None:
        try:
            if not meta.saves:
                return
            if not self._ready():
                self.stats.add("saves_skipped", sum(len(s.block_ids) for s in meta.saves))
                return
            event = None
            if self._device is not None and self._device.type == "cuda":
                import torch

                event = torch.cuda.Event()
                event.record()  # the step's KV writes come before the copy out
            for sv in meta.saves:
                fut = self.link.pool.submit(self._save_job, sv, event)
                with self._lock:
                    self._saves.setdefault(sv.req_id, []).append(fut)
        except Exception:
            log.exception("strata: submitting saves failed")
            self.stats.add("errors")

    def _save_job(self, sv: SaveSpec, event: Any) -> None:
        try:
            import torch

            if event is not None:
                event.synchronize()
            ns = self.link.ns(self.shard)
            pin = self._device is not None and self._device.type == "cuda"
            pages = []
            parent = ns.key_from_engine_hash(sv.parent) if sv.parent is not None else None
            on_host = self._device is None or self._device.type == "cpu"
            bt = len(sv.tokens) // len(sv.block_ids) if sv.block_ids else 0
            events = [EventInfo(tokens=sv.tokens[j * bt:(j + 1) * bt], lora_name=sv.lora_name,
                                extra_keys=sv.extra_keys[j] if j < len(sv.extra_keys) else None)
                      for j in range(len(sv.block_ids))]
            for j, b in enumerate(sv.block_ids):
                if on_host:
                    # The block's runs as they lie in the cache: the put
                    # gathers them (on the native plane, off the GIL, in
                    # the call that publishes the batch).
                    buf = ScatterBuffer([_mv(r) for r in self._runs(b)])
                else:
                    buf = torch.empty(self._page_bytes, dtype=torch.uint8, pin_memory=pin)
                    off = 0
                    for r in self._runs(b):
                        buf[off:off + r.numel()].copy_(r)
                        off += r.numel()
                key = ns.key_from_engine_hash(sv.hashes[j])
                pages.append(Page(key=key, data=buf, parent=parent, depth=sv.first_depth + j))
                parent = key
            res = ns.put(pages, timeout=self.s.node_timeout * 4, events=events)
            ok = sum(1 for r in res if r.stored)
            self.stats.add("saves")
            self.stats.add("saved_pages", ok)
            if ok < len(res):
                self.stats.add("save_failures", len(res) - ok)
        except Exception as e:  # a dropped save is a future miss
            log.warning("strata: save of %s failed: %s", sv.req_id, e)
            self.stats.add("save_failures", len(sv.block_ids))

    def handle_preemptions(self, meta: Any) -> None:
        try:
            pre = set(getattr(meta, "preempted", ()) or ())
            with self._lock:
                futs = [f for rid in pre for f in self._saves.get(rid, [])]
            if futs:
                wait(futs, timeout=self.s.node_timeout * 8)
        except Exception:
            log.exception("strata: waiting for the saves of preempted requests failed")
            self.stats.add("errors")

    # ---- completion ----

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        try:
            with self._lock:
                sending = set()
                for rid in list(self._deferred):
                    futs = self._saves.get(rid, [])
                    if all(f.done() for f in futs):
                        sending.add(rid)
                        self._deferred.discard(rid)
                        self._saves.pop(rid, None)
                recving, self._recving_done = self._recving_done, set()
            return (sending or None), (recving or None)
        except Exception:
            log.exception("strata: get_finished failed")
            self.stats.add("errors")
            return None, None

    def get_block_ids_with_load_errors(self) -> Set[int]:
        with self._lock:
            out, self._failed_blocks = self._failed_blocks, set()
        return out

    def close(self) -> None:
        if self.link is not None:
            self.link.close()


# The reasons a P/D load fails, each counted as pd_error_<reason>.
_PD_ERRORS = ("mismatch", "aborted", "expired", "timeout", "unavailable", "refused", "keys", "pages", "params", "other")
_PD_ERRORS_BY_CLASS = {
    E.NamespaceMismatchError: "mismatch",
    E.TransferAbortedError: "aborted",
    E.TransferExpiredError: "expired",
    E.UnavailableError: "unavailable",
    E.StaleAttemptError: "refused",
    E.NoRoomError: "refused",
    E.TransferStateError: "refused",
}


def _abort(c: Any, room: Any, reason: str, detail: str) -> None:
    try:
        c.abort_room(room, reason, detail)
    except Exception as e:  # the pin's TTL ends it
        log.info("strata: P/D: aborting room %r attempt %d: %s", room.name, room.attempt, e)


def _ranks(pc: Any) -> Tuple[int, int]:
    tp = int(pc.tensor_parallel_size)
    pp = int(pc.pipeline_parallel_size)
    if tp == 1 and pp == 1:
        return 0, 0
    from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank

    return int(get_tensor_model_parallel_rank()), int(get_pp_group().rank_in_group)


def _contiguous_runs(v: Any, out: List[Any]) -> None:
    """Append the contiguous pieces of view v, in logical order, as flat uint8 views."""
    if v.is_contiguous():
        out.append(v.reshape(-1).view(_uint8()))
        return
    for i in range(v.shape[0]):
        _contiguous_runs(v[i], out)


def _uint8():
    import torch

    return torch.uint8


def _nbytes(v: Any) -> int:
    return int(v.numel()) * int(v.element_size())


def _mv(t: Any) -> memoryview:
    return memoryview(t.numpy())


def _prefix(got: List[Any]) -> int:
    n = 0
    for g in got:
        if g is None:
            break
        n += 1
    return n


def _int_result(f: Future) -> int:
    try:
        return int(f.result())
    except Exception as e:  # _load_job catches its own; a load that failed otherwise is a failed load, counted
        log.error("strata: load job failed: %s", e)
        return 0
