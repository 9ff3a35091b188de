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
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, wait
from typing import Any, Dict, List, Optional, Set, Tuple

from .buffers import ScatterBuffer
from .client import Page
from .engines import vllm_connector_descriptor, vllm_page_format
from .vllm import LoadSpec, SaveSpec, StrataConnectorMetadata, shard_name
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
                              "save_failures", "saves_skipped", "errors")
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
        lease = None
        exported = ld.leases.get(self.shard)
        if exported is not None:
            lease = ns.adopt_lease(exported)
        try:
            keys = [ns.key_from_engine_hash(h) for h in ld.hashes]
            if self._device is None or self._device.type == "cpu":
                bufs = [ScatterBuffer([_mv(r) for r in self._runs(b)]) for b in ld.block_ids]
                got = ns.get(keys, bufs, lease=lease, timeout=self.s.lookup_timeout + self.s.node_timeout * 2)
                return _prefix(got)
            return self._load_via_staging(ns, keys, ld, lease)
        except Exception as e:  # node down, lease expired, ...: the blocks are recomputed
            log.warning("strata: load of %s failed: %s", ld.req_id, e)
            return 0
        finally:
            if lease is not None:
                try:
                    lease.release(timeout=self.s.node_timeout)
                except Exception as e:  # the node lets it expire; the load's answer stands
                    log.info("strata: releasing the lease of %s: %s", ld.req_id, e)

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
            for j, b in enumerate(sv.block_ids):
                buf = torch.empty(self._page_bytes, dtype=torch.uint8, pin_memory=pin)
                off = 0
                for r in self._runs(b):
                    buf[off:off + r.numel()].copy_(r)
                    off += r.numel()
                key = ns.key_from_engine_hash(sv.hashes[j])
                pages.append(Page(key=key, data=buf, parent=parent, depth=sv.first_depth + j))
                parent = key
            res = ns.put(pages, timeout=self.s.node_timeout * 4)
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
