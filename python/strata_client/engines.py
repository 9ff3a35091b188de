"""Namespace descriptors from an inference engine's settings.

Every engine process that should share pages must build the same
descriptor; these helpers derive it from what the engine already knows
(model path and revision, dtypes, page size, parallel ranks, attention
geometry) so that ranks, replicas and restarts agree. Fields an engine does
not know stay zero, which is part of the identity too.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Dict, Mapping, Optional

from .descriptor import ComputeProfile, Descriptor, dtype_bytes, normalize_dtype, page_format_string

_log = logging.getLogger(__name__)

__all__ = [
    "model_geometry",
    "engine_descriptor",
    "sglang_descriptor",
    "vllm_descriptor",
    "vllm_connector_descriptor",
    "lmcache_descriptor",
    "load_hf_config",
    "vllm_kv_elem",
    "vllm_page_format",
]


def load_hf_config(model_path: str) -> Optional[Dict[str, Any]]:
    """The model's config.json when ``model_path`` is a local directory."""
    p = os.path.join(model_path, "config.json")
    try:
        with open(p, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def model_geometry(hf_config: Optional[Mapping[str, Any]]) -> Dict[str, int]:
    """Attention geometry of a Hugging Face config: num_layers,
    num_kv_heads, head_dim, or mla_latent_dim for MLA models (DeepSeek:
    kv_lora_rank + qk_rope_head_dim), plus the query heads for pricing."""
    if not hf_config:
        return {}
    cfg = dict(hf_config)
    if "text_config" in cfg and isinstance(cfg["text_config"], Mapping):  # multimodal wrappers
        inner = dict(cfg["text_config"])
        inner.update({k: v for k, v in cfg.items() if k not in inner and k != "text_config"})
        cfg = inner
    layers = int(cfg.get("num_hidden_layers") or cfg.get("n_layer") or cfg.get("num_layers") or 0)
    heads = int(cfg.get("num_attention_heads") or cfg.get("n_head") or 0)
    out: Dict[str, int] = {"num_layers": layers, "attention_heads": heads}
    if cfg.get("kv_lora_rank"):
        out["mla_latent_dim"] = int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 0)
        out["attention_head_dim"] = int(cfg.get("qk_nope_head_dim") or 0) + int(cfg.get("qk_rope_head_dim") or 0)
        return out
    kv_heads = int(cfg.get("num_key_value_heads") or cfg.get("num_kv_heads") or heads or 0)
    head_dim = int(cfg.get("head_dim") or 0)
    if not head_dim and heads:
        head_dim = int(cfg.get("hidden_size") or 0) // heads
    out.update(num_kv_heads=kv_heads, head_dim=head_dim, attention_head_dim=head_dim)
    return out


def engine_descriptor(
    *,
    tenant: str,
    model: str,
    engine: str,
    page_tokens: int,
    model_revision: str = "",
    tokenizer_revision: str = "",
    adapter: str = "",
    adapter_revision: str = "",
    kv_format_version: int = 0,
    dtype: str = "",
    kv_dtype: str = "",
    layout: str = "",
    tp_size: int = 1,
    tp_rank: int = 0,
    pp_size: int = 1,
    pp_rank: int = 0,
    cp_size: int = 1,
    cp_rank: int = 0,
    mla: Optional[bool] = None,
    num_layers: int = 0,
    num_kv_heads: int = 0,
    head_dim: int = 0,
    mla_latent_dim: int = 0,
    hf_config: Optional[Mapping[str, Any]] = None,
    quantization: str = "",
    page_bytes: int = 0,
    page_format: str = "",
    checksum: str = "",
    params: int = 0,
    extra: Optional[Mapping[str, Any]] = None,
) -> Descriptor:
    """A descriptor from engine settings. Geometry not given explicitly is
    taken from ``hf_config`` (a Hugging Face config dict). MLA (given, or
    detected from the config) omits TP: the latent is replicated on every TP
    rank, so all TP ranks share one namespace."""
    geo = model_geometry(hf_config)
    num_layers = num_layers or geo.get("num_layers", 0)
    if mla is None:
        mla = bool(mla_latent_dim or geo.get("mla_latent_dim"))
    if mla:
        mla_latent_dim = mla_latent_dim or geo.get("mla_latent_dim", 0)
        num_kv_heads = head_dim = 0
        tp_size, tp_rank = 1, 0
    else:
        num_kv_heads = num_kv_heads or geo.get("num_kv_heads", 0)
        head_dim = head_dim or geo.get("head_dim", 0)
        mla_latent_dim = 0
    d = Descriptor(
        tenant=tenant,
        model=model,
        model_revision=model_revision,
        adapter=adapter,
        adapter_revision=adapter_revision,
        tokenizer_revision=tokenizer_revision,
        engine=engine,
        kv_format_version=int(kv_format_version),
        dtype=_dtype_name(dtype),
        kv_dtype=_dtype_name(kv_dtype),
        layout=layout,
        page_tokens=int(page_tokens),
        num_layers=int(num_layers),
        num_kv_heads=int(num_kv_heads),
        head_dim=int(head_dim),
        mla_latent_dim=int(mla_latent_dim),
        tp_size=int(tp_size),
        tp_rank=int(tp_rank),
        pp_size=int(pp_size),
        pp_rank=int(pp_rank),
        cp_size=int(cp_size),
        cp_rank=int(cp_rank),
        quantization=quantization or "",
        extra={str(k): str(v) for k, v in (extra or {}).items()},
        page_bytes=int(page_bytes),
        page_format=page_format,
        checksum=checksum,
        compute=ComputeProfile(
            params=int(params),
            attention_heads=int(geo.get("attention_heads", 0)),
            attention_head_dim=int(geo.get("attention_head_dim", 0)),
        ),
    )
    return d.normalize()


def _dtype_name(dt: Any) -> str:
    """A dtype name from a string or a torch/numpy dtype ("torch.bfloat16")."""
    if dt is None:
        return ""
    return normalize_dtype(str(dt))


def _model_name(model_path: str) -> str:
    """A stable model name: the Hugging Face repo id, or the last two path
    components of a local checkout (``/models/meta-llama/Llama-3-8B`` ->
    ``meta-llama/Llama-3-8B``), so mount points do not fork the cache."""
    p = (model_path or "").rstrip("/")
    if os.path.isabs(p):
        parts = [x for x in p.split("/") if x]
        return "/".join(parts[-2:])
    return p


def sglang_descriptor(
    storage_config: Any = None,
    mem_pool_host: Any = None,
    *,
    tenant: str,
    model: Optional[str] = None,
    model_revision: str = "",
    page_bytes: int = 0,
    page_tokens: Optional[int] = None,
    dtype: Any = None,
    layout: Optional[str] = None,
    extra: Optional[Mapping[str, Any]] = None,
    keep_tp: bool = False,
    **kw: Any,
) -> Descriptor:
    """The namespace of one SGLang HiCache storage shard.

    From ``HiCacheStorageConfig`` (model name, TP/PP/attention-CP ranks, MLA)
    and the host pool (page size in tokens, KV dtype, memory layout and the
    exact bytes of one page). The page is the engine's opaque host-pool
    page, so the descriptor declares ``page_bytes`` and records the pool's
    shape in ``extra``.

    ``is_mla_model`` (SGLang's "rank replicated") drops TP: every TP rank
    holds the same latent, so all ranks share one namespace. ``keep_tp`` is
    for a pool that is split across TP ranks even then (SGLang 0.5.23's
    mamba state: its file backend keys it by TP rank and every rank backs
    it up): TP stays in that pool's namespace, or rank 1 would read rank 0's
    shard.
    """
    sc = storage_config
    g = lambda o, a, d=None: getattr(o, a, d) if o is not None else d  # noqa: E731
    is_mla = bool(g(sc, "is_mla_model", False)) and not keep_tp
    pool_extra: Dict[str, Any] = {}
    if mem_pool_host is not None:
        for a in ("layer_num", "head_num", "head_dim"):
            v = getattr(mem_pool_host, a, None)
            if isinstance(v, int):
                pool_extra["host_" + a] = v
    dcp = int(g(sc, "dcp_size", 1) or 1)
    if dcp > 1:
        # Decode context parallelism splits an MLA page's tokens over the
        # DCP ranks: each rank's page is its own slice. SGLang's file backend
        # keys it the same way (hicache_storage.py: _tp{tp}_dcp{rank}_{size}
        # _page{logical page}); equivalent shards of other DCP groups share.
        pool_extra["sglang_dcp"] = (f"{int(g(sc, 'dcp_rank', 0) or 0)}/{dcp}/tp{int(g(sc, 'tp_size', 1) or 1)}"
                                    f"/page{int(g(sc, 'logical_page_size', 0) or 0)}")
    if extra:
        pool_extra.update(extra)
    return engine_descriptor(
        tenant=tenant,
        model=model or _model_name(g(sc, "model_name", "") or ""),
        model_revision=model_revision,
        engine="sglang",
        page_tokens=int(page_tokens or g(mem_pool_host, "page_size", 0) or 0),
        dtype=dtype if dtype is not None else g(mem_pool_host, "dtype", ""),
        layout=layout if layout is not None else str(g(mem_pool_host, "layout", "") or ""),
        tp_size=int(g(sc, "tp_size", 1) or 1),
        tp_rank=int(g(sc, "tp_rank", 0) or 0),
        pp_size=int(g(sc, "pp_size", 1) or 1),
        pp_rank=int(g(sc, "pp_rank", 0) or 0),
        cp_size=int(g(sc, "attn_cp_size", 1) or 1),
        cp_rank=int(g(sc, "attn_cp_rank", 0) or 0),
        mla=is_mla,
        page_bytes=page_bytes,
        extra=pool_extra,
        **kw,
    )


def vllm_descriptor(
    *,
    tenant: str,
    model: str,
    block_size: int,
    dtype: Any,
    kv_cache_dtype: Any = "auto",
    tp_size: int = 1,
    tp_rank: int = 0,
    pp_size: int = 1,
    pp_rank: int = 0,
    model_revision: str = "",
    hf_config: Optional[Mapping[str, Any]] = None,
    layout: str = "nhd",
    **kw: Any,
) -> Descriptor:
    """The namespace of one vLLM KV shard (``block_size`` tokens a page:
    ``cache_config.block_size`` times the decode-context-parallel size;
    ``kv_cache_dtype`` "auto" means the model dtype). The connector uses
    ``vllm_connector_descriptor``, which derives all of it from vLLM's own
    config objects."""
    return engine_descriptor(
        tenant=tenant,
        model=_model_name(model),
        model_revision=model_revision,
        engine="vllm",
        page_tokens=block_size,
        dtype=dtype,
        kv_dtype=kv_cache_dtype,
        layout=layout,
        tp_size=tp_size,
        tp_rank=tp_rank,
        pp_size=pp_size,
        pp_rank=pp_rank,
        hf_config=hf_config,
        **kw,
    )


def vllm_connector_descriptor(
    vllm_config: Any,
    kv_cache_config: Any,
    *,
    tenant: str,
    tp_rank: int,
    pp_rank: int = 0,
    model: Optional[str] = None,
    model_revision: Optional[str] = None,
    extra: Optional[Mapping[str, Any]] = None,
) -> Descriptor:
    """The namespace of one vLLM worker's pages, from ``VllmConfig`` and the
    ``KVCacheConfig`` vLLM gives the connector (the scheduler and every
    worker compute the same one for a shard, so they agree on its ID).

    A page is one vLLM KV block of every layer of the worker's single KV
    cache group: for each layer in ``layer_names`` order, the layer view's
    block in logical ``[H, N, C]`` order (heads, tokens, per-token bytes of
    K and V: vLLM 0.33's RFC #42082 views), so the bytes do not depend on
    the physical ``KVCacheLayout`` (LBHNC, BLHNC, ...). Carried: the model
    and weight revision, model dtype and KV-cache dtype, tokens per block
    (block size x DCP), the layer count, per-rank KV heads, head size and
    the spec's exact page bytes, the attention backend when one is forced,
    TP/PP sizes and ranks (TP dropped for MLA: its latent is the same on
    every rank) and the page size, declared as ``page_bytes``. The decode
    context-parallel size is recorded in ``extra`` (DCP ranks are TP ranks,
    so ``tp_rank`` already tells their slices apart)."""
    mc = getattr(vllm_config, "model_config", None)
    cc = vllm_config.cache_config
    pc = vllm_config.parallel_config
    groups = list(kv_cache_config.kv_cache_groups)
    if len(groups) != 1:
        raise ValueError(f"strata's vLLM connector handles one KV cache group, this model has {len(groups)}")
    group = groups[0]
    spec = group.kv_cache_spec
    specs = getattr(spec, "kv_cache_specs", None)  # UniformTypeKVCacheSpecs
    if specs:
        spec = next(iter(specs.values()))
    layers = len(group.layer_names)
    layer_bytes = int(getattr(spec, "unpadded_page_size_bytes", 0) or spec.page_size_bytes)
    dcp = int(getattr(pc, "decode_context_parallel_size", 1) or 1)
    tokens = int(spec.block_size) * (dcp if getattr(spec, "dcp_sharded", False) else 1)
    is_mla = "MLA" in type(spec).__name__
    ex: Dict[str, Any] = {
        "vllm_spec": type(spec).__name__,
        "vllm_block_heads": int(getattr(spec, "num_kv_heads", 0) or 0),
        "vllm_head_size": int(getattr(spec, "head_size", 0) or 0),
        "vllm_layer_page_bytes": layer_bytes,
    }
    if getattr(spec, "head_size_v", None) not in (None, getattr(spec, "head_size", None)):
        ex["vllm_head_size_v"] = int(spec.head_size_v)
    ac = getattr(vllm_config, "attention_config", None)
    backend = getattr(ac, "backend", None)
    if backend is not None:
        ex["vllm_attention_backend"] = str(getattr(backend, "name", backend))
    if extra:
        ex.update(extra)
    if dcp > 1:
        ex["vllm_dcp"] = dcp
    hf = None
    if mc is not None:
        try:
            hf = mc.hf_text_config.to_dict()
        except Exception as e:  # no Hugging Face config: no compute profile (pricing only, not identity)
            _log.warning("strata: vLLM's model config gave no Hugging Face config (%s): pages priced as unknown", e)
            hf = None
    geo = model_geometry(hf)
    name = model or _model_name(str(getattr(mc, "model", "") or ""))
    rev = model_revision if model_revision is not None else str(getattr(mc, "revision", "") or "")
    kv_dtype = str(cc.cache_dtype)
    if kv_dtype == "auto":
        kv_dtype = str(getattr(spec, "dtype", ""))
    d = engine_descriptor(
        tenant=tenant,
        model=name,
        model_revision=rev,
        tokenizer_revision=str(getattr(mc, "tokenizer_revision", "") or ""),
        engine="vllm",
        page_tokens=tokens,
        dtype=getattr(mc, "dtype", None) or getattr(spec, "dtype", ""),
        kv_dtype=kv_dtype,
        layout="vllm-bhnc",
        tp_size=1 if is_mla else int(pc.tensor_parallel_size),
        tp_rank=0 if is_mla else int(tp_rank),
        pp_size=int(pc.pipeline_parallel_size),
        pp_rank=int(pp_rank),
        mla=False,
        num_layers=layers,
        page_bytes=layers * layer_bytes,
        page_format=vllm_page_format(spec, str(cc.cache_dtype), layers=layers, heads=int(spec.num_kv_heads),
                                     tokens=int(spec.block_size), cell_bytes=int(spec.state_content_size_bytes)),
        extra=ex,
    )
    d.compute = ComputeProfile(params=0, attention_heads=int(geo.get("attention_heads", 0)),
                               attention_head_dim=int(geo.get("attention_head_dim", 0)))
    return d.normalize()


def vllm_kv_elem(spec: Any, cache_dtype: str) -> str:
    """The numeric format of a vLLM KV cache's elements. vLLM keeps fp8 KV
    in uint8 tensors (vllm/utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE:
    "fp8", "fp8_e4m3" and "fp8_e5m2" are all torch.uint8), so the spec's
    dtype says nothing there: the format is --kv-cache-dtype
    (cache_config.cache_dtype), "fp8" and "fp8_e4m3" being the platform's
    fp8_dtype() (float8_e4m3fn on CUDA, float8_e4m3fnuz on ROCm MI300).
    The engine's packed formats (fp8_ds_mla, turboquant_*, int4/fp8
    per-token-head, ...) are uint8 cells of the format their name says:
    ``vllm_page_format`` names them by it."""
    import torch  # type: ignore

    dt = getattr(spec, "dtype", None)
    if dt is not None and dt != torch.uint8:
        return normalize_dtype(str(dt))
    if cache_dtype in ("fp8", "fp8_e4m3"):
        from vllm.platforms import current_platform  # type: ignore

        return normalize_dtype(str(current_platform.fp8_dtype()))
    if cache_dtype == "fp8_e5m2":
        return "fp8_e5m2"
    return "uint8"


def vllm_page_format(spec: Any, cache_dtype: str, *, layers: int, heads: int, tokens: int, cell_bytes: int) -> str:
    """A vLLM page's format (namespace/README.md, "Page format"): the
    worker serialises, for each layer of the group in ``layer_names`` order,
    the block's logical ``[H, N, C]`` view (RFC #42082: heads, tokens, one
    cell of K then V per head and token), kernel-block splits included,
    whatever the physical KVCacheLayout. The scheduler calls this with the
    KV cache spec's geometry, the worker with its tensors' (so a worker
    whose caches do not match refuses, loudly)."""
    elem = vllm_kv_elem(spec, cache_dtype)
    hs = int(getattr(spec, "head_size", 0) or 0)
    hsv = getattr(spec, "head_size_v", None)
    hsv = hs if hsv is None else int(hsv)
    mla = "MLA" in type(spec).__name__
    width = dtype_bytes(elem) or 0
    plain = getattr(spec, "state_content_bytes", None) is None and width and (hs + hsv) * width == cell_bytes
    if elem == "uint8" or not plain:
        # A packed cell (scales inside it): its bytes, named by the format.
        role = "".join(c if c.isalnum() or c == "_" else "_" for c in normalize_dtype(cache_dtype))
        role = role if role[:1].isalpha() else "kvq" + role
        return page_format_string([(role, [("L", layers), ("H", heads), ("T", tokens), ("B", cell_bytes)], "uint8")])
    if mla or not hsv:
        cell = [("C", hs + hsv)]
    elif hsv == hs:
        cell = [("S", 2), ("D", hs)]
    else:
        cell = [("D", hs + hsv)]
    axes = [("L", layers), ("H", heads), ("T", tokens)] + cell
    return page_format_string([("latent" if mla else "kv", [a for a in axes if a[1] > 1 or a[0] == "T"], elem)])


def lmcache_descriptor(metadata: Any, *, tenant: str, page_bytes: int, model_revision: str = "",
                       save_chunk_meta: bool = True, extra: Optional[Mapping[str, Any]] = None,
                       page_format: str = "", kv_dtype: Any = None) -> Descriptor:
    """The namespace of one LMCache worker's remote chunks, from
    ``LMCacheEngineMetadata``/``LMCacheMetadata`` (model name, world size,
    worker id, KV dtype and shape, chunk size, MLA). A chunk is stored as an
    opaque page of ``page_bytes`` (the connector's framing), so the
    descriptor declares it."""
    g = lambda a, d=None: getattr(metadata, a, d)  # noqa: E731
    use_mla = bool(g("use_mla", False))
    kv_shape = tuple(g("kv_shape", ()) or ())
    chunk = int(g("chunk_size", 0) or (kv_shape[2] if len(kv_shape) > 2 else 0) or 0)
    ex: Dict[str, Any] = {"lmcache_fmt": str(g("fmt", "") or "")}
    if kv_shape:
        ex["lmcache_kv_shape"] = "x".join(str(int(x)) for x in kv_shape)
    if extra:
        ex.update(extra)
    return engine_descriptor(
        tenant=tenant,
        model=str(g("model_name", "") or ""),
        model_revision=model_revision,
        engine="lmcache",
        page_tokens=chunk,
        dtype=kv_dtype if kv_dtype is not None else g("kv_dtype", ""),
        layout=("lmcache_kv_mla" if use_mla else "lmcache_kv_2ltd") + ("+meta" if save_chunk_meta else ""),
        tp_size=int(g("world_size", 1) or 1),
        tp_rank=int(g("worker_id", 0) or 0),
        mla=use_mla,
        page_bytes=page_bytes,
        page_format=page_format,
        extra=ex,
    )
