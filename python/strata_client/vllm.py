"""strata as a vLLM KV connector (``KVConnectorBase_V1``), loaded from
configuration only::

    vllm serve Qwen/Qwen3-8B --kv-transfer-config '{
      "kv_connector": "StrataConnector",
      "kv_connector_module_path": "strata_client.vllm",
      "kv_role": "kv_both",
      "kv_load_failure_policy": "recompute",
      "kv_connector_extra_config": {"strata_addr": "10.0.0.5:7070,10.0.0.6:7070",
                                    "strata_tenant": "acme"}}'

vLLM's ``KVConnectorFactory`` imports this module, takes ``StrataConnector``
and builds one instance per role: one in the scheduler process
(``KVConnectorRole.SCHEDULER``: ``strata_client.vllm_scheduler``) and one in
every worker process (``WORKER``: ``strata_client.vllm_worker``). The two
halves talk through ``StrataConnectorMetadata``, which vLLM hands from the
scheduler to the workers every step.

- Keys are vLLM's own block hashes (``Request.block_hashes``: the
  configured ``prefix_caching_hash_algo``, default ``sha256``, chained from
  NONE_HASH), scoped to the worker's namespace with ``key_from_engine_hash``;
  a KV block of ``block_size`` tokens is keyed by the hash that ends it.
- One namespace per worker shard (``engines.vllm_connector_descriptor``):
  model, revision, dtypes, tokens per block, layers, per-rank heads and head
  size, TP/PP size and rank, page bytes.
- Scheduler side: ``get_num_new_matched_tokens`` never blocks and never
  raises: it answers from a lookup it started on a thread (``None``, "ask
  again", while it runs), leases the hit prefix on every TP shard, renews
  the lease when asked again close to its expiry, and releases it when the
  request finishes, is preempted, or does not load.
- Worker side: loads are asynchronous (between steps) verified reads
  straight into the engine's KV blocks (CPU) or through one pinned staging
  buffer (GPU); saves gather each block's layers into one buffer and publish
  it with the client's checksummed put (nothing is visible before the node
  verified it). Completions go back through ``get_finished`` and failed
  blocks through ``get_block_ids_with_load_errors``, so vLLM recomputes
  them (with ``kv_load_failure_policy: recompute``; vLLM's default ``fail``
  fails the request instead). Nothing raises into vLLM.

Prefill–decode disaggregation (``kv_role``; docs/design.md §14): vLLM's
P/D convention, as its NIXL and Mooncake connectors follow it. A proxy
sends the prompt to the prefill engine with ``max_tokens: 1`` and
``kv_transfer_params: {"do_remote_decode": true}``, takes the
``kv_transfer_params`` of its answer and sends the request to the decode
engine with them (``strata_client.pd_proxy`` is such a proxy).

- ``kv_producer`` (or ``kv_both``), for a request with
  ``do_remote_decode``: the scheduler opens one room per TP shard
  (``shard_room``; the room is ``kv_transfer_params["strata_room"]`` when
  the proxy sets one, else the request id) while the request waits;
  every full prompt block is saved; ``request_finished`` holds the
  blocks (``delay_free``) and answers the proxy's parameters
  (``do_remote_prefill``, ``strata_room``, ``strata_attempts``,
  ``strata_tokens``, ``strata_addr``); each worker publishes its shard's
  pages once its puts are verified and reports the request in
  ``get_finished``'s sending set: vLLM frees the blocks then, not when the
  decode is done. A publish that fails aborts the room
  (``producer_failure``) so that the decode hears it at once.
- ``kv_consumer`` (or ``kv_both``), for a request with
  ``do_remote_prefill`` and those parameters: ``get_num_new_matched_tokens``
  answers the published tokens beyond the local prefix, loaded
  asynchronously (``WAITING_FOR_REMOTE_KVS``); the worker awaits its
  shard's room, checks that the producer's keys are the keys of its own
  blocks, reads them into its blocks and acknowledges. Any failure (the
  room aborted or expired, nothing published in time, a namespace that is
  not the producer's -- another dtype, model revision, TP layout --, keys
  that differ, a page missing) is logged with its reason, counted by
  reason (``pd_error_*``) and its blocks go to
  ``get_block_ids_with_load_errors``: vLLM recomputes them. A mismatch is
  never a hit.

Only one KV cache group is handled (no ``SupportsHMA``: vLLM then turns its
hybrid KV cache manager off, as it logs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

__all__ = ["StrataConnector", "StrataConnectorMetadata", "LoadSpec", "SaveSpec", "PublishSpec", "RoomSpec",
           "ConnectorSettings", "shard_room"]


# ---- settings ----------------------------------------------------------------------


@dataclass
class ConnectorSettings:
    """``kv_connector_extra_config`` keys (environment fallbacks in brackets)."""

    addr: str = ""  # strata_addr [STRATA_ADDR]: comma-separated node addresses (required)
    tenant: str = "default"  # strata_tenant [STRATA_TENANT]
    token: Optional[str] = None  # strata_token [STRATA_TOKEN]
    model: Optional[str] = None  # strata_model [STRATA_MODEL]: model name override
    model_revision: Optional[str] = None  # strata_model_revision [STRATA_MODEL_REVISION]
    node_timeout: float = 2.0  # strata_node_timeout [STRATA_NODE_TIMEOUT]: seconds per node per call
    lookup_timeout: float = 2.0  # strata_lookup_timeout: a lookup not answered by then is a miss
    lease_ttl_ms: int = 0  # strata_lease_ttl_ms: 0 = the nodes' default (10 s)
    renew_margin_ms: int = 0  # strata_renew_margin_ms: renew when less is left (0 = half the TTL seen)
    save_decode: bool = False  # strata_save_decode: also save blocks of generated tokens
    io_threads: int = 4  # strata_io_threads: client calls in flight per process
    connect_retry: float = 5.0  # seconds between connection attempts while strata is unreachable
    role: str = "kv_both"  # vLLM's kv_role: kv_producer, kv_consumer or kv_both (P/D, above)
    pd_await_timeout: float = 10.0  # strata_pd_await_timeout: a consumer's wait for the producer's room

    @classmethod
    def from_extra(cls, extra: Dict[str, Any]) -> "ConnectorSettings":
        g = lambda k, env=None, d=None: extra.get(k, os.environ.get(env, d) if env else d)  # noqa: E731
        s = cls(
            addr=str(g("strata_addr", "STRATA_ADDR", "") or ""),
            tenant=str(g("strata_tenant", "STRATA_TENANT", "default") or "default"),
            token=g("strata_token", "STRATA_TOKEN"),
            model=g("strata_model", "STRATA_MODEL"),
            model_revision=g("strata_model_revision", "STRATA_MODEL_REVISION"),
            node_timeout=float(g("strata_node_timeout", "STRATA_NODE_TIMEOUT", 2.0)),
            lookup_timeout=float(g("strata_lookup_timeout", None, 2.0)),
            lease_ttl_ms=int(g("strata_lease_ttl_ms", None, 0)),
            renew_margin_ms=int(g("strata_renew_margin_ms", None, 0)),
            save_decode=_bool(g("strata_save_decode", None, False)),
            io_threads=int(g("strata_io_threads", None, 4)),
            connect_retry=float(g("strata_connect_retry", None, 5.0)),
            pd_await_timeout=float(g("strata_pd_await_timeout", None, 10.0)),
        )
        if not s.addr:
            raise ValueError("StrataConnector: kv_connector_extra_config.strata_addr (or STRATA_ADDR) is required")
        if s.node_timeout <= 0 or s.lookup_timeout <= 0 or s.io_threads <= 0 or s.pd_await_timeout <= 0:
            raise ValueError("StrataConnector: strata_node_timeout, strata_lookup_timeout, strata_io_threads and "
                             "strata_pd_await_timeout must be > 0")
        return s

    @property
    def produces(self) -> bool:
        """Whether this engine publishes requests that ask do_remote_decode."""
        return self.role in ("kv_producer", "kv_both")

    @property
    def consumes(self) -> bool:
        """Whether this engine loads requests that ask do_remote_prefill."""
        return self.role in ("kv_consumer", "kv_both")


def _bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


# ---- scheduler -> worker metadata -----------------------------------------------------


@dataclass
class RoomSpec:
    """The producer's room a P/D load reads: its name (``strata_room``),
    the attempt of each shard (``strata_attempts``) and the tokens
    published."""

    room: str
    attempts: Dict[str, int]
    tokens: int


@dataclass
class LoadSpec:
    """Blocks of one request to read from strata into the engine."""

    req_id: str
    block_ids: List[int]  # engine block ids, one per page
    hashes: List[bytes]  # vLLM block hash ending each page
    first_depth: int  # page index of the first block in the request
    # per shard "tp_rank/pp_rank": (pages, {node id: [(lease id, expires unix ms)]})
    leases: Dict[str, Tuple[int, Dict[str, List[Tuple[int, int]]]]] = field(default_factory=dict)
    room: Optional[RoomSpec] = None  # a P/D load: await the room, not a lease


@dataclass
class SaveSpec:
    """Full blocks of one request computed this step, to publish, with what
    vLLM's own BlockStored says of each (for the nodes' KV event stream):
    the blocks' token ids, block_tokens a block, the request's LoRA name,
    and each block's extra keys (msgpack, as vLLM's event carries them;
    None: none)."""

    req_id: str
    block_ids: List[int]
    hashes: List[bytes]
    first_depth: int
    parent: Optional[bytes]  # vLLM hash of the block before the first, None at depth 0
    tokens: List[int] = field(default_factory=list)
    lora_name: str = ""
    extra_keys: List[Optional[bytes]] = field(default_factory=list)


@dataclass
class PublishSpec:
    """A finished P/D request of the producer: once its saves are done,
    each worker publishes the first ``len(hashes)`` blocks in its shard's
    room."""

    req_id: str
    room: RoomSpec
    hashes: List[bytes]  # vLLM block hash ending each page, from the first block


@dataclass
class StrataConnectorMetadata(KVConnectorMetadata):
    loads: List[LoadSpec] = field(default_factory=list)
    saves: List[SaveSpec] = field(default_factory=list)
    publishes: List[PublishSpec] = field(default_factory=list)
    # requests whose blocks the scheduler keeps until the workers report
    # their saves finished (request_finished returned True)
    deferred: Set[str] = field(default_factory=set)
    preempted: Set[str] = field(default_factory=set)


def shard_name(tp_rank: int, pp_rank: int) -> str:
    return f"{tp_rank}/{pp_rank}"


def shard_room(room: str, shard: str) -> str:
    """The transfer room of one shard's pages: each TP shard has its own
    namespace, so its own room and attempt."""
    return f"{room}#{shard}"


# ---- the connector --------------------------------------------------------------------


class StrataConnector(KVConnectorBase_V1):
    """The vLLM connector: delegates to the scheduler or worker half."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        super().__init__(vllm_config, role, kv_cache_config)
        settings = ConnectorSettings.from_extra(dict(self._kv_transfer_config.kv_connector_extra_config or {}))
        settings.role = str(self._kv_transfer_config.kv_role or "kv_both")
        self._sched = None
        self._worker = None
        if role == KVConnectorRole.SCHEDULER:
            from .vllm_scheduler import SchedulerSide

            self._sched = SchedulerSide(vllm_config, kv_cache_config, settings)
        else:
            from .vllm_worker import WorkerSide

            self._worker = WorkerSide(vllm_config, kv_cache_config, settings)

    @property
    def requires_kv_delivery(self) -> bool:
        return False  # a best-effort cache: a dropped save is a future miss

    # ---- scheduler side ----

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        return self._sched.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        self._sched.update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        return self._sched.build_connector_meta(scheduler_output)

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        return self._sched.request_finished(request, block_ids)

    def update_connector_output(self, connector_output: Any) -> None:
        return None

    # ---- worker side ----

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        self._worker.register_kv_caches(kv_caches)

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata) -> None:
        self._worker.handle_preemptions(kv_connector_metadata)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self._worker.start_load_kv(self._get_connector_metadata())

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None  # loads are asynchronous: the request waits in WAITING_FOR_REMOTE_KVS

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        return None  # a page holds every layer: saved whole in wait_for_save

    def wait_for_save(self) -> None:
        self._worker.wait_for_save(self._get_connector_metadata())

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        return self._worker.get_finished(finished_req_ids)

    def get_block_ids_with_load_errors(self) -> Set[int]:
        return self._worker.get_block_ids_with_load_errors()

    def shutdown(self) -> None:
        if self._sched is not None:
            self._sched.close()
        if self._worker is not None:
            self._worker.close()

    # ---- for operators and tests ----

    def counters(self) -> Dict[str, int]:
        """Lookups, hits, loads, load failures, saves, failures: this half's."""
        side = self._sched if self._sched is not None else self._worker
        return side.counters()
