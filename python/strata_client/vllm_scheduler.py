"""The scheduler half of strata's vLLM connector (``strata_client.vllm``).

It answers vLLM's "how many more tokens can be loaded" for a waiting
request and plans each step's loads and saves. Invariants:

- ``get_num_new_matched_tokens`` is called again and again for a request
  that cannot be scheduled yet; it never blocks and never raises. The first
  call for a (request, computed prefix, known blocks) starts one lookup on
  the I/O pool, on every TP shard's namespace with a lease, and answers
  ``None`` (vLLM asks again next step); later calls answer from the result
  (the same answer each time), and renew the leases on the pool when less
  than the renew margin is left. A lookup that is not answered within
  ``strata_lookup_timeout`` is a miss (its leases are released when it
  ends); a lease that expired, or whose renewal failed, is dropped and the
  lookup starts again.
- The hit is the smallest hit prefix over the shards: a block is loadable
  only if every worker can read its shard. Loads are asynchronous (vLLM
  holds the request in WAITING_FOR_REMOTE_KVS until every worker reported
  it in ``get_finished``).
- Leases pass to the workers with the load (each releases its shard's after
  reading); leases of a request that will not load (no external tokens
  allocated, preempted, finished) are released here.
- A request whose saves went to the workers is held at ``request_finished``
  (its blocks stay allocated) until every worker reports its saves done.
- Loads go to the workers in the step they are planned in, whether or not
  vLLM schedules the request in it: an asynchronously loading request
  waits (WAITING_FOR_REMOTE_KVS) and is in no scheduled list until it
  loaded.
- P/D (strata_client.vllm's doc): a producer's rooms are opened on the
  pool when the request is first asked about, and every full prompt block
  of the request is saved (a local prefix-cache hit too: the room needs
  every page committed); ``request_finished`` waits for the opening at most
  ``strata_node_timeout``, hands the publication to the workers and holds
  the blocks until they published. A consumer's answer comes from the
  proxy's parameters alone (no lookup); a room it will not load is aborted
  (``consumer_failure``), so its pin goes before its TTL.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from .client import Lease
from .engines import vllm_connector_descriptor
from .transfer import CONSUMER_FAILURE, PRODUCER_FAILURE, USER_CANCEL, Room
from .vllm import LoadSpec, PublishSpec, RoomSpec, SaveSpec, StrataConnectorMetadata, shard_name, shard_room
from .vllm_link import Counters, Link

log = logging.getLogger("strata_client.vllm")


@dataclass
class _Lookup:
    start: int  # first block asked (the computed prefix, in blocks)
    end: int  # one past the last block asked
    fut: Future  # -> (hit blocks from start, {shard: Lease})
    began: float
    given_up: bool = False
    applied: bool = False  # the result is in the _Req (set by the done callback, under the lock)


@dataclass
class _Req:
    request: Any
    lookup: Optional[_Lookup] = None
    renewing: Optional[Future] = None
    leases: Dict[str, Lease] = field(default_factory=dict)
    expires_ms: int = 0
    hit_end: int = 0  # blocks [start, hit_end) are loadable, from the lookup
    load: Optional[LoadSpec] = None
    block_ids: List[int] = field(default_factory=list)
    saved: int = 0  # blocks below this are stored, loaded or local hits: not saved again
    sent_saves: bool = False
    pd_room: Optional[str] = None  # producer: the room its pages are published in
    pd_open: Optional[Future] = None  # producer: -> {shard: attempt}
    pd_load: Optional[RoomSpec] = None  # consumer: the producer's room to load
    pd_start: int = 0  # consumer: the first block to load (the local prefix, in blocks)
    # Event info (_event_info): blocks below mm_block had their extra
    # keys made; mm_idx is vLLM's multi-modal index at mm_block.
    mm_block: int = 0
    mm_idx: int = 0


class SchedulerSide:
    def __init__(self, vllm_config: Any, kv_cache_config: Any, settings: Any):
        self.s = settings
        self._cfg = vllm_config
        self._kvc = kv_cache_config
        pc = vllm_config.parallel_config
        cc = vllm_config.cache_config
        dcp = int(getattr(pc, "decode_context_parallel_size", 1) or 1)
        spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec if kv_cache_config is not None else None
        self.block_tokens = int(cc.block_size) * (dcp if getattr(spec, "dcp_sharded", False) else 1)
        hbs = getattr(kv_cache_config, "hash_block_size", None) or getattr(cc, "hash_block_size", None)
        hbs = int(hbs or self.block_tokens)
        if self.block_tokens % hbs:
            raise ValueError(f"StrataConnector: block of {self.block_tokens} tokens is not a multiple of "
                             f"vLLM's hash block size {hbs}")
        self.hashes_per_block = self.block_tokens // hbs
        self.tp_size = int(pc.tensor_parallel_size)
        self._lock = threading.Lock()  # guards _reqs, _deferred and lookup results (the pool's callbacks set them)
        self._reqs: Dict[str, _Req] = {}
        self._deferred: Set[str] = set()
        self._publishes: List[PublishSpec] = []
        self.stats = Counters("lookups", "lookup_hits", "hit_blocks", "lookup_timeouts", "lookup_errors", "renewals",
                              "renew_failures", "plan_errors", "loads_planned", "saves_planned", "not_connected",
                              "pd_rooms_opened", "pd_open_failures", "pd_publishes_planned", "pd_not_published",
                              "pd_remote_prefills", "pd_loads_planned", "pd_bad_params", "pd_rooms_released")
        self.link = Link(settings, self._descriptors, "sched")
        self.link.start()

    def _descriptors(self):
        # Every TP rank of the first pipeline stage: the scheduler's
        # KVCacheConfig is the first stage's (vLLM builds it from worker 0's).
        out = {}
        for r in range(self.tp_size):
            d = vllm_connector_descriptor(self._cfg, self._kvc, tenant=self.s.tenant, tp_rank=r, pp_rank=0,
                                          model=self.s.model, model_revision=self.s.model_revision)
            out[shard_name(d.tp_rank, 0)] = d
        return out

    def counters(self) -> Dict[str, int]:
        return self.stats.snapshot()

    # ---- keys ----

    def block_hash(self, request: Any, i: int) -> bytes:
        """vLLM's hash that ends block i (the chained hash covers the whole prefix)."""
        return bytes(request.block_hashes[(i + 1) * self.hashes_per_block - 1])

    def _loadable_blocks(self, request: Any) -> int:
        # Full blocks with hashes, leaving at least one prompt token to compute.
        n = len(request.block_hashes) // self.hashes_per_block
        return max(0, min(n, (request.num_tokens - 1) // self.block_tokens))

    # ---- get_num_new_matched_tokens ----

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        try:
            return self._matched(request, int(num_computed_tokens))
        except Exception:  # never into the engine
            log.exception("strata: lookup for %s failed", getattr(request, "request_id", "?"))
            self.stats.add("lookup_errors")
            return 0, False

    def _matched(self, request: Any, num_computed: int) -> Tuple[Optional[int], bool]:
        rid = request.request_id
        with self._lock:
            st = self._reqs.get(rid)
            if st is None:
                st = self._reqs[rid] = _Req(request)
        start = num_computed // self.block_tokens
        params = getattr(request, "kv_transfer_params", None) or {}
        if self.s.consumes and params.get("do_remote_prefill") and params.get("strata_room"):
            return self._remote_prefill(st, params, start)
        if self.s.produces and params.get("do_remote_decode"):
            self._open_rooms(st, params)
        if st.pd_room is None:
            st.saved = max(st.saved, start)  # local prefix-cache hits were saved by whoever computed them
        if not self.link.ready():
            self.stats.add("not_connected")
            return 0, False
        end = self._loadable_blocks(request)
        if end <= start:
            self._drop_lookup(st)
            return 0, False
        lk = st.lookup
        if lk is None or lk.start != start or lk.end != end:
            self._drop_lookup(st)
            self._begin_lookup(st, start, end)
            return None, False
        if not lk.fut.done():
            if time.monotonic() - lk.began > self.s.lookup_timeout:
                self.stats.add("lookup_timeouts")
                lk.given_up = True  # its leases are released when it ends
                st.lookup = _Lookup(start, end, _done((0, {})), time.monotonic(), given_up=True, applied=True)
                return 0, False
            return None, False
        with self._lock:
            applied = lk.applied
        if not applied:  # done, but its callback has not run yet
            return None, False
        if lk.given_up:
            return 0, False
        if not st.leases and st.hit_end <= start:
            return 0, False
        now_ms = int(time.time() * 1000)
        if st.expires_ms and now_ms >= st.expires_ms:
            # Expired before vLLM could load it: ask again.
            self._drop_lookup(st)
            self._begin_lookup(st, start, end)
            return None, False
        if st.renewing is not None and st.renewing.done():
            ok = st.renewing.result()
            st.renewing = None
            if not ok:
                self._drop_lookup(st)
                self._begin_lookup(st, start, end)
                return None, False
        self._maybe_renew(st, now_ms)
        return (st.hit_end - start) * self.block_tokens, True

    # ---- P/D ----

    def _remote_prefill(self, st: _Req, params: Dict[str, Any], start: int) -> Tuple[int, bool]:
        """A consumer's answer for a request the producer prefilled: the
        published tokens beyond the local prefix, loaded asynchronously."""
        if st.pd_load is None:
            try:
                st.pd_load = RoomSpec(str(params["strata_room"]),
                                      {str(k): int(v) for k, v in dict(params.get("strata_attempts") or {}).items()},
                                      int(params.get("strata_tokens") or 0))
            except (TypeError, ValueError) as e:
                log.warning("strata: P/D: request %s has kv_transfer_params %r that name no room (%s): it is "
                            "computed here", st.request.request_id, params, e)
                self.stats.add("pd_bad_params")
                return 0, False
            self.stats.add("pd_remote_prefills")
        if not self.link.ready():
            self.stats.add("not_connected")
            return 0, False
        tokens = min(st.pd_load.tokens, st.request.num_prompt_tokens) // self.block_tokens * self.block_tokens
        st.pd_start = start
        st.saved = max(st.saved, start)
        count = tokens - start * self.block_tokens
        return (count, True) if count > 0 else (0, False)

    def _open_rooms(self, st: _Req, params: Dict[str, Any]) -> None:
        """Open the producer's room of every shard, on the pool, once."""
        req = st.request
        if st.pd_room is not None or req.num_prompt_tokens < self.block_tokens or not self.link.ready():
            return
        room = str(params.get("strata_room") or req.request_id)
        shards, c = list(self.link.shards()), self.link.client()

        def job() -> Dict[str, int]:
            out: Dict[str, int] = {}
            try:
                for shard in shards:
                    out[shard] = c.open_room(shard_room(room, shard)).attempt
            except Exception:
                _abort_rooms(c, RoomSpec(room, out, 0), PRODUCER_FAILURE, "opening the other shards' rooms failed")
                raise
            self.stats.add("pd_rooms_opened", len(out))
            return out

        st.pd_room, st.pd_open = room, self.link.pool.submit(job)

    def _opened(self, st: _Req) -> Optional[Dict[str, int]]:
        """The attempts of the producer's rooms, waiting for the opening at
        most strata_node_timeout; None (logged, counted) when it failed."""
        try:
            return st.pd_open.result(timeout=self.s.node_timeout)
        except Exception as e:
            if not st.pd_open.done():  # rooms opened after this give up are aborted
                c, room = self.link.client(), st.pd_room
                st.pd_open.add_done_callback(lambda f: f.exception() is None and _abort_rooms(
                    c, RoomSpec(room, f.result(), 0), PRODUCER_FAILURE, "opened after the prefill gave up"))
            log.warning("strata: P/D: opening the rooms of %s failed (%s): the decode computes its prompt",
                        st.request.request_id, e or type(e).__name__)
            self.stats.add("pd_open_failures")
            return None

    def _finish_producer(self, st: _Req, request: Any) -> Optional[Dict[str, Any]]:
        """request_finished for a request to publish: plans the publication
        and returns the proxy's kv_transfer_params (None: nothing
        published, the decode computes the prompt)."""
        from vllm.v1.request import RequestStatus

        attempts = self._opened(st)
        if attempts is None:
            return None
        spec = RoomSpec(st.pd_room, attempts, 0)
        if request.status not in (RequestStatus.FINISHED_LENGTH_CAPPED, RequestStatus.FINISHED_STOPPED):
            self._release(spec, USER_CANCEL, f"the prefill ended {request.status.name}")
            return None
        n = min(st.saved, request.num_prompt_tokens // self.block_tokens,
                len(request.block_hashes) // self.hashes_per_block)
        if n <= 0:
            self.stats.add("pd_not_published")
            self._release(spec, PRODUCER_FAILURE, "no block of the prompt was saved")
            return None
        spec.tokens = n * self.block_tokens
        with self._lock:
            self._publishes.append(PublishSpec(request.request_id, spec, [self.block_hash(request, i) for i in range(n)]))
        self.stats.add("pd_publishes_planned")
        return {"do_remote_prefill": True, "do_remote_decode": False, "strata_room": spec.room,
                "strata_attempts": dict(attempts), "strata_tokens": spec.tokens, "strata_addr": self.s.addr}

    def _plan_remote_load(self, st: _Req, request: Any, blocks: Any, num_external_tokens: int) -> None:
        params = request.kv_transfer_params
        if not params.get("do_remote_prefill"):
            return  # the second call, after the load
        params["do_remote_prefill"] = False  # one transfer per request, as vLLM's own P/D connectors
        if num_external_tokens <= 0:
            self._release(st.pd_load, CONSUMER_FAILURE, "the decode did not load the room (prompt computed here)")
            return
        start, count = st.pd_start, num_external_tokens // self.block_tokens
        block_ids = list(blocks.get_block_ids()[0])
        st.load = LoadSpec(req_id=request.request_id, block_ids=block_ids[start:start + count],
                           hashes=[self.block_hash(request, i) for i in range(start, start + count)],
                           first_depth=start, room=st.pd_load)
        st.saved = max(st.saved, start + count)
        self.stats.add("pd_loads_planned")

    def _release(self, spec: RoomSpec, reason: str, detail: str) -> None:
        """Abort a room's attempts on the pool (its pins go now, not at their TTL)."""
        if spec.attempts and self.link.ready():
            self.stats.add("pd_rooms_released")
            self.link.pool.submit(_abort_rooms, self.link.client(), spec, reason, detail)

    def _begin_lookup(self, st: _Req, start: int, end: int) -> None:
        hashes = [self.block_hash(st.request, i) for i in range(start, end)]
        shards = self.link.shards()
        self.stats.add("lookups")
        fut = self.link.pool.submit(self._lookup_job, shards, hashes)
        lk = _Lookup(start, end, fut, time.monotonic())
        st.lookup = lk

        def done(f: Future, st=st, lk=lk) -> None:
            try:
                hit, leases = f.result()
            except Exception as e:  # _lookup_job counts its own failures; this is anything else
                log.error("strata: lookup job failed: %s", e)
                self.stats.add("lookup_errors")
                hit, leases = 0, {}
            with self._lock:
                current = st.lookup is lk and not lk.given_up
                if current:
                    st.hit_end = lk.start + hit
                    st.leases = leases
                    st.expires_ms = min((ls.expires_unix_ms for ls in leases.values()), default=0)
                lk.applied = True
            if current and hit:
                self.stats.add("lookup_hits")
                self.stats.add("hit_blocks", hit)
            if not current:
                _release_all(leases)

        fut.add_done_callback(done)

    def _lookup_job(self, shards, hashes: List[bytes]):
        hit = len(hashes)
        leases: Dict[str, Lease] = {}
        try:
            for shard, ns in shards.items():
                keys = [ns.key_from_engine_hash(h) for h in hashes]
                r = ns.lookup(keys, lease=True, ttl_ms=self.s.lease_ttl_ms, timeout=self.s.lookup_timeout)
                if r.lease is not None:
                    leases[shard] = r.lease
                hit = min(hit, r.hit_prefix)
                if hit == 0:
                    break
        except Exception as e:  # a node failure is a miss; anything else too, logged
            log.warning("strata: lookup failed: %s", e)
            self.stats.add("lookup_errors")
            hit = 0
        if hit == 0 or len(leases) < len(shards):
            _release_all(leases)
            return 0, {}
        return hit, leases

    def _maybe_renew(self, st: _Req, now_ms: int) -> None:
        if st.renewing is not None or not st.leases:
            return
        margin = self.s.renew_margin_ms or max(1, (self.s.lease_ttl_ms or 10_000) // 2)
        if st.expires_ms - now_ms > margin:
            return
        leases = dict(st.leases)
        self.stats.add("renewals")

        def renew() -> bool:
            try:
                for ls in leases.values():
                    ls.renew(self.s.lease_ttl_ms, timeout=self.s.lookup_timeout)
            except Exception as e:
                log.info("strata: lease renewal failed (%s): the lookup starts again", e)
                self.stats.add("renew_failures")
                return False
            with self._lock:
                st.expires_ms = min(ls.expires_unix_ms for ls in leases.values())
            return True

        st.renewing = self.link.pool.submit(renew)

    def _drop_lookup(self, st: _Req) -> None:
        """Forget a lookup and release its leases (on the pool)."""
        lk, st.lookup = st.lookup, None
        if lk is not None:
            lk.given_up = True  # a lookup still running releases its leases when it ends
        with self._lock:
            leases, st.leases = st.leases, {}
            st.hit_end, st.expires_ms = 0, 0
        if leases:
            self.link.pool.submit(_release_all, leases)

    # ---- allocation, metadata ----

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        try:
            self._after_alloc(request, blocks, int(num_external_tokens))
        except Exception:
            log.exception("strata: planning the load of %s failed", getattr(request, "request_id", "?"))
            self.stats.add("plan_errors")

    def _after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        st = self._reqs.get(request.request_id)
        if st is None:
            return
        if st.pd_load is not None:
            self._plan_remote_load(st, request, blocks, num_external_tokens)
            return
        if num_external_tokens <= 0:
            if st.load is None:
                self._drop_lookup(st)
            return
        lk = st.lookup
        if lk is None or not st.leases:
            return
        start = lk.start
        count = num_external_tokens // self.block_tokens
        block_ids = list(blocks.get_block_ids()[0])
        with self._lock:
            leases, st.leases = st.leases, {}
        st.load = LoadSpec(
            req_id=request.request_id,
            block_ids=block_ids[start:start + count],
            hashes=[self.block_hash(request, i) for i in range(start, start + count)],
            first_depth=start,
            leases={shard: ls.export() for shard, ls in leases.items()},
        )
        st.lookup, st.hit_end, st.expires_ms = None, 0, 0
        st.saved = max(st.saved, start + count)
        self.stats.add("loads_planned")

    def build_connector_meta(self, scheduler_output: Any) -> StrataConnectorMetadata:
        meta = StrataConnectorMetadata()
        try:
            self._build(scheduler_output, meta)
        except Exception:
            log.exception("strata: building the step's metadata failed; this step saves and loads what was planned")
            self.stats.add("plan_errors")
        return meta

    def _build(self, so: Any, meta: StrataConnectorMetadata) -> None:
        from vllm.distributed.kv_transfer.kv_connector.utils import yield_req_data

        with self._lock:
            meta.deferred, self._deferred = self._deferred, set()
            meta.publishes, self._publishes = self._publishes, []
            reqs = list(self._reqs.values())
        for st in reqs:  # a request loading asynchronously is not scheduled until it loaded
            if st.load is not None:
                meta.loads.append(st.load)
                st.load = None
        for rid in getattr(so, "preempted_req_ids", None) or ():
            st = self._reqs.get(rid)
            if st is not None:
                self._drop_lookup(st)
                st.load, st.block_ids = None, []
            meta.preempted.add(rid)
        for rid, new_ids, full in yield_req_data(so):
            st = self._reqs.get(rid)
            if st is None:
                continue
            if new_ids is not None:
                ids = list(new_ids[0])
                st.block_ids = ids if full else st.block_ids + ids
            self._plan_saves(st, so.num_scheduled_tokens.get(rid, 0), meta)

    def _plan_saves(self, st: _Req, scheduled: int, meta: StrataConnectorMetadata) -> None:
        req = st.request
        done = req.num_computed_tokens + scheduled  # computed once this step ran
        limit = req.num_tokens if self.s.save_decode else req.num_prompt_tokens
        end = min(done, limit) // self.block_tokens
        end = min(end, len(req.block_hashes) // self.hashes_per_block, len(st.block_ids))
        if end <= st.saved or not self.link.ready():
            return
        first = st.saved
        tokens, lora, extra = self._event_info(st, first, end)
        meta.saves.append(SaveSpec(
            req_id=req.request_id,
            block_ids=st.block_ids[first:end],
            hashes=[self.block_hash(req, i) for i in range(first, end)],
            first_depth=first,
            parent=self.block_hash(req, first - 1) if first > 0 else None,
            tokens=tokens, lora_name=lora, extra_keys=extra,
        ))
        st.saved = end
        st.sent_saves = True
        self.stats.add("saves_planned", end - first)

    def _event_info(self, st: _Req, first: int, end: int) -> Tuple[List[int], str, List[Optional[bytes]]]:
        """What vLLM's own BlockStored says of blocks [first, end) of a
        request, for the nodes' KV event stream: the blocks' token ids, the
        LoRA adapter's name, and each block's extra keys as vLLM makes and
        publishes them (generate_block_hash_extra_keys, to_event_extra_keys),
        msgpack-encoded. Helpers of the engine that fail are logged and
        counted (event_info_errors) and the blocks go with tokens alone."""
        req, bt = st.request, self.block_tokens
        tokens = [int(t) for t in req.all_token_ids[first * bt:end * bt]]
        lora = getattr(req, "lora_request", None)
        extra: List[Optional[bytes]] = [None] * (end - first)
        try:
            import msgspec
            from vllm.v1.core.kv_cache_utils import generate_block_hash_extra_keys, to_event_extra_keys

            if st.mm_block > first:  # a block before the last made (a preemption): from the start
                st.mm_block, st.mm_idx = 0, 0
            for i in range(st.mm_block, end):
                keys, st.mm_idx = generate_block_hash_extra_keys(req, i * bt, (i + 1) * bt, st.mm_idx)
                if i >= first and keys is not None:
                    (ev,) = to_event_extra_keys([keys])
                    extra[i - first] = msgspec.msgpack.encode(ev)
            st.mm_block = end
        except Exception:
            log.exception("strata: vLLM's extra keys of request %s failed; its blocks are announced without them",
                          req.request_id)
            self.stats.add("event_info_errors")
            extra = [None] * (end - first)
        return tokens, (lora.name if lora else ""), extra

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        try:
            with self._lock:
                st = self._reqs.pop(request.request_id, None)
            if st is None:
                return False, None
            self._drop_lookup(st)
            if st.pd_load is not None and (request.kv_transfer_params or {}).get("do_remote_prefill"):
                self._release(st.pd_load, CONSUMER_FAILURE, f"the decode ended {request.status.name} before it loaded")
            params = self._finish_producer(st, request) if st.pd_room is not None else None
            if st.sent_saves or params is not None:
                with self._lock:
                    self._deferred.add(request.request_id)
                return True, params
        except Exception:
            log.exception("strata: request_finished failed")
            self.stats.add("plan_errors")
        return False, None

    def close(self) -> None:
        with self._lock:
            reqs, self._reqs = list(self._reqs.values()), {}
        for st in reqs:
            try:
                self._drop_lookup(st)
            except Exception:
                pass
        self.link.close()


def _done(v: Any) -> Future:
    f: Future = Future()
    f.set_result(v)
    return f



def _abort_rooms(c: Any, spec: RoomSpec, reason: str, detail: str) -> None:
    for shard, attempt in spec.attempts.items():
        try:
            c.abort_room(Room(shard_room(spec.room, shard), attempt), reason, detail)
        except Exception as e:  # the pin's TTL ends it
            log.info("strata: P/D: aborting room %r attempt %d: %s", shard_room(spec.room, shard), attempt, e)


def _release_all(leases: Dict[str, Lease]) -> None:
    for ls in leases.values():
        try:
            ls.release(timeout=2.0)
        except Exception:
            pass
