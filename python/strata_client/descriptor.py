"""Namespace descriptors, namespace IDs, page geometry and page keys.

A byte-exact Python implementation of namespace/README.md (the Go package
``github.com/stratakv/strata/namespace``): normalization, the canonical JSON
encoding and the namespace ID, fork keys, page sizes, native page keys,
engine-hash keys, SGLang's chained page hash and vLLM's ``sha256_cbor`` block
hash, and page formats (``parse_page_format``, ``page_format_string``). ``tests/test_descriptor.py`` checks every value in
``namespace/testdata/vectors.json`` against this module.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import operator
import re
import struct
import sys
from array import array
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = [
    "ComputeProfile",
    "Descriptor",
    "DescriptorError",
    "CANONICAL_VERSION",
    "KEY_SIZE",
    "MAX_PAGE_BYTES",
    "MAX_PAGE_FORMAT_LEN",
    "MAX_PAGE_FORMAT_SEGMENTS",
    "MAX_PAGE_FORMAT_AXES",
    "PageFormat",
    "PageSegment",
    "parse_page_format",
    "page_format_string",
    "dtype_bytes",
    "normalize_dtype",
    "canonical_json",
    "page_keys",
    "next_key",
    "key_from_engine_hash",
    "sglang_page_hash",
    "sglang_page_hashes",
    "vllm_none_hash",
    "VLLM_DEFAULT_NONE_HASH_SEED",
    "vllm_block_hash",
    "vllm_block_hashes",
    "sha256_cbor",
    "cbor_encode",
]

CANONICAL_VERSION = 1
KEY_SIZE = 32
ID_SIZE = 32

MAX_STRING_LEN = 256
MAX_EXTRA_ENTRIES = 32
MAX_EXTRA_KEY_LEN = 64
MAX_EXTRA_VALUE_LEN = 256
MAX_PAGE_TOKENS = 1 << 16
MAX_PAGE_BYTES = 1 << 30
MAX_PAGE_FORMAT_LEN = 1024
MAX_PAGE_FORMAT_SEGMENTS = 64
MAX_PAGE_FORMAT_AXES = 8

_WS = " \t\n\v\f\r"

_DTYPE_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2fnuz": "fp8_e5m2fnuz",
}

_DTYPE_BYTES = {
    "fp64": 8,
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_e4m3fnuz": 1,
    "fp8_e5m2fnuz": 1,
    "fp8_e8m0": 1,  # MX block scales (torch.float8_e8m0fnu)
    "int64": 8,
    "int32": 4,
    "int8": 1,
    "uint8": 1,
}
# For error messages, as namespace.knownDTypes spells it.
_KNOWN_DTYPES = ", ".join(_DTYPE_BYTES)

_CHECKSUMS = ("crc32c", "sha256")
KEY_FORMATS = ("sha256-chain", "sha256-blocks")
# A sha256-blocks page is whole SHA-256 blocks: 16 tokens of 4 bytes each.
KEY_BLOCK_TOKENS = 16


class DescriptorError(ValueError):
    """A descriptor breaks a rule of namespace.Validate (one rule per line)."""


def _ascii_lower(s: str) -> str:
    # Only A-Z, so every language agrees (Unicode case mapping differs).
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def normalize_dtype(s: str) -> str:
    """Trim, ASCII-lower-case, drop a ``torch.`` prefix, resolve aliases."""
    s = _ascii_lower(str(s).strip(_WS))
    if s.startswith("torch."):
        s = s[len("torch."):]
    return _DTYPE_ALIASES.get(s, s)


def dtype_bytes(dtype: str) -> Optional[int]:
    """Element width of a (normalized or not) dtype; None when unknown."""
    return _DTYPE_BYTES.get(normalize_dtype(dtype))


def canonical_json(obj: Any) -> bytes:
    """The canonical JSON encoding (namespace/README.md)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass
class ComputeProfile:
    """Prices recomputation of a page (prefill FLOPs); zero means unknown."""

    params: int = 0
    attention_heads: int = 0
    attention_head_dim: int = 0


_STRING_FIELDS = (
    "tenant",
    "model",
    "model_revision",
    "adapter",
    "adapter_revision",
    "tokenizer_revision",
    "engine",
    "dtype",
    "kv_dtype",
    "layout",
    "quantization",
)
_UINT32_FIELDS = (
    "kv_format_version",
    "page_tokens",
    "num_layers",
    "num_kv_heads",
    "head_dim",
    "mla_latent_dim",
    "tp_size",
    "tp_rank",
    "pp_size",
    "pp_rank",
    "cp_size",
    "cp_rank",
)


@dataclass
class Descriptor:
    """Everything that decides whether two KV-cache pages are interchangeable.

    Field names are the canonical names of namespace/README.md (and of
    ``strata.v1.Descriptor``). ``checksum`` is ``"crc32c"``, ``"sha256"`` or
    ``""`` (unset: crc32c). ``key_format`` is ``"sha256-chain"``,
    ``"sha256-blocks"`` or ``""`` (unset: sha256-chain). ``compute`` may be a ComputeProfile or a dict.
    ``page_format`` is how one page's bytes are laid out (``page_format_string``
    builds it; namespace/README.md, "Page format"), ``""`` when not stated.
    """

    tenant: str = ""
    model: str = ""
    model_revision: str = ""
    adapter: str = ""
    adapter_revision: str = ""
    tokenizer_revision: str = ""
    engine: str = ""
    kv_format_version: int = 0
    dtype: str = ""
    kv_dtype: str = ""
    layout: str = ""
    page_tokens: int = 0
    num_layers: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    mla_latent_dim: int = 0
    tp_size: int = 0
    tp_rank: int = 0
    pp_size: int = 0
    pp_rank: int = 0
    cp_size: int = 0
    cp_rank: int = 0
    quantization: str = ""
    extra: Dict[str, str] = field(default_factory=dict)
    page_bytes: int = 0
    checksum: str = ""
    key_format: str = ""
    compute: ComputeProfile = field(default_factory=ComputeProfile)
    page_format: str = ""

    # ---- construction -------------------------------------------------

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Descriptor":
        """Build from canonical names (unknown names are an error; ``v`` is ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw: Dict[str, Any] = {}
        for k, v in d.items():
            if k == "v":
                continue
            if k not in names:
                raise DescriptorError(f"{k}: unknown descriptor field")
            kw[k] = v
        if isinstance(kw.get("compute"), Mapping):
            kw["compute"] = ComputeProfile(**dict(kw["compute"]))
        if "extra" in kw and kw["extra"] is not None:
            kw["extra"] = dict(kw["extra"])
        return cls(**kw)

    def copy(self) -> "Descriptor":
        c = dataclasses.replace(self)
        c.extra = dict(self.extra or {})
        c.compute = self._compute()
        return c

    def _compute(self) -> ComputeProfile:
        c = self.compute
        if c is None:
            return ComputeProfile()
        if isinstance(c, Mapping):
            return ComputeProfile(**dict(c))
        return ComputeProfile(c.params, c.attention_heads, c.attention_head_dim)

    # ---- normalization and encoding -----------------------------------

    def normalize(self) -> "Descriptor":
        """The rules of Descriptor.Normalize, in order; idempotent."""
        d = self.copy()
        for k in ("tenant", "model", "model_revision", "adapter", "adapter_revision", "tokenizer_revision"):
            setattr(d, k, str(getattr(d, k) or "").strip(_WS))
        for k in ("engine", "layout", "quantization"):
            setattr(d, k, _ascii_lower(str(getattr(d, k) or "").strip(_WS)))
        d.page_format = str(d.page_format or "").strip(_WS)  # and nothing else: it must be canonical
        d.dtype = normalize_dtype(d.dtype or "")
        d.kv_dtype = normalize_dtype(d.kv_dtype or "")
        if d.kv_dtype in ("", "auto"):
            d.kv_dtype = d.dtype
        for k in ("tp_size", "pp_size", "cp_size"):
            setattr(d, k, int(getattr(d, k) or 0) or 1)
        d.checksum = (d.checksum or "crc32c")
        if not isinstance(d.checksum, str):
            d.checksum = {1: "crc32c", 2: "sha256"}.get(int(d.checksum), str(d.checksum))
        d.key_format = (d.key_format or "sha256-chain")
        if not isinstance(d.key_format, str):
            d.key_format = {1: "sha256-chain", 2: "sha256-blocks"}.get(int(d.key_format), str(d.key_format))
        for k in _UINT32_FIELDS:
            setattr(d, k, int(getattr(d, k) or 0))
        d.page_bytes = int(d.page_bytes or 0)
        d.extra = {str(k): str(v) for k, v in (d.extra or {}).items()}
        return d

    def to_canonical_dict(self) -> Dict[str, Any]:
        """The normalized descriptor keyed by canonical names, with ``"v": 1``."""
        n = self.normalize()
        c = n.compute
        out: Dict[str, Any] = {k: getattr(n, k) for k in _STRING_FIELDS + _UINT32_FIELDS}
        out.update(
            extra=dict(n.extra),
            page_bytes=n.page_bytes,
            checksum=n.checksum,
            compute={
                "attention_head_dim": int(c.attention_head_dim or 0),
                "attention_heads": int(c.attention_heads or 0),
                "params": int(c.params or 0),
            },
            v=CANONICAL_VERSION,
        )
        # Written only when it is not the default, so that namespaces from
        # before key_format keep their IDs.
        if n.key_format != "sha256-chain":
            out["key_format"] = n.key_format
        if n.page_format:
            out["page_format"] = n.page_format
        return out

    def canonical(self) -> bytes:
        """The canonical encoding: the bytes the namespace ID hashes."""
        return canonical_json(self.to_canonical_dict())

    @property
    def id(self) -> bytes:
        """The namespace ID: SHA-256 of the canonical encoding (32 bytes)."""
        return hashlib.sha256(self.canonical()).digest()

    def id_hex(self) -> str:
        return self.id.hex()

    def fork_key(self) -> str:
        """Lower-case hex SHA-256 of the identity fields (forks share it)."""
        n = self.normalize()
        ident = {k: getattr(n, k) for k in ("adapter", "adapter_revision", "model", "model_revision", "tenant", "tokenizer_revision")}
        ident["v"] = CANONICAL_VERSION
        return hashlib.sha256(canonical_json(ident)).hexdigest()

    def is_mla(self) -> bool:
        return int(self.mla_latent_dim or 0) > 0

    # ---- geometry -------------------------------------------------------

    def page_size(self) -> int:
        """Exact bytes of one page of this shard; 0 when the geometry gives none."""
        n = self.normalize()
        if n.page_bytes > 0:
            return n.page_bytes
        try:
            return n._derived_page_size()
        except DescriptorError:
            return 0

    def _derived_page_size(self) -> int:
        w = _DTYPE_BYTES.get(self.kv_dtype)
        if w is None:
            raise DescriptorError(f"kv_dtype: {self.kv_dtype!r} has no known width; declare page_bytes for other dtypes")
        if self.num_layers == 0:
            raise DescriptorError("num_layers: must be > 0 unless page_bytes is set")
        if self.num_layers % self.pp_size:
            raise DescriptorError(f"num_layers: {self.num_layers} does not split evenly over pp_size {self.pp_size}")
        if self.page_tokens % self.cp_size:
            raise DescriptorError(f"page_tokens: {self.page_tokens} does not split evenly over cp_size {self.cp_size}")
        layers, tokens = self.num_layers // self.pp_size, self.page_tokens // self.cp_size
        if self.is_mla():
            n = layers * self.mla_latent_dim * w * tokens
        else:
            h, tp = self.num_kv_heads, self.tp_size
            if h == 0 or self.head_dim == 0:
                raise DescriptorError("num_kv_heads: num_kv_heads and head_dim must be > 0 (or mla_latent_dim set, or page_bytes declared)")
            if h >= tp:
                if h % tp:
                    raise DescriptorError(f"num_kv_heads: {h} heads do not split evenly over tp_size {tp}")
                per = h // tp
            else:
                if tp % h:
                    raise DescriptorError(f"num_kv_heads: {h} heads cannot be replicated evenly over tp_size {tp}")
                per = 1
            n = 2 * layers * per * self.head_dim * w * tokens
        if n > MAX_PAGE_BYTES:
            raise DescriptorError(f"page_bytes: geometry gives more than {MAX_PAGE_BYTES} bytes per page")
        if n == 0:
            raise DescriptorError("page_bytes: geometry gives an empty page")
        return n

    # ---- validation -----------------------------------------------------

    def validate(self) -> None:
        """Raise DescriptorError naming every broken rule of namespace.Validate."""
        n = self.normalize()
        errs: List[str] = []
        if not n.tenant:
            errs.append("tenant: required")
        if not n.model:
            errs.append("model: required")
        for k in _STRING_FIELDS:
            errs.extend(_check_string(k, getattr(n, k), MAX_STRING_LEN))
        if len(n.extra) > MAX_EXTRA_ENTRIES:
            errs.append(f"extra: {len(n.extra)} entries; at most {MAX_EXTRA_ENTRIES} allowed")
        else:
            for k in sorted(n.extra):
                if k == "":
                    errs.append("extra: empty key")
                    continue
                errs.extend(_check_string("extra", k, MAX_EXTRA_KEY_LEN))
                errs.extend(_check_string("extra", n.extra[k], MAX_EXTRA_VALUE_LEN))
        for k in _UINT32_FIELDS:
            v = getattr(n, k)
            if v < 0 or v > 0xFFFFFFFF:
                errs.append(f"{k}: {v} is not a uint32")
        if not (1 <= n.page_tokens <= MAX_PAGE_TOKENS):
            errs.append(f"page_tokens: {n.page_tokens}; must be in [1, {MAX_PAGE_TOKENS}]")
        for rank, size in (("tp_rank", "tp_size"), ("pp_rank", "pp_size"), ("cp_rank", "cp_size")):
            if getattr(n, rank) >= getattr(n, size):
                errs.append(f"{rank}: {getattr(n, rank)} must be < {size} {getattr(n, size)}")
        if n.is_mla():
            if n.tp_size != 1 or n.tp_rank != 0:
                errs.append(f"tp_size: MLA omits TP (the latent is replicated on every TP rank): want tp_size 1 and tp_rank 0, got {n.tp_size} and {n.tp_rank}")
            if n.num_kv_heads or n.head_dim:
                errs.append("mla_latent_dim: set together with num_kv_heads/head_dim; an MLA descriptor gives only mla_latent_dim")
        if n.checksum not in _CHECKSUMS:
            errs.append(f"checksum: unknown algorithm {n.checksum!r}; want crc32c or sha256")
        if n.key_format not in KEY_FORMATS:
            errs.append(f"key_format: unknown format {n.key_format!r}; want sha256-chain or sha256-blocks")
        elif n.key_format == "sha256-blocks" and n.page_tokens % KEY_BLOCK_TOKENS:
            errs.append(f"key_format: sha256-blocks needs page_tokens a multiple of {KEY_BLOCK_TOKENS} "
                        f"(whole SHA-256 blocks a page), got {n.page_tokens}")
        if n.page_bytes > 0:
            if n.page_bytes > MAX_PAGE_BYTES:
                errs.append(f"page_bytes: {n.page_bytes}; at most {MAX_PAGE_BYTES} allowed")
        elif n.dtype not in _DTYPE_BYTES:
            errs.append(f"dtype: {n.dtype!r} is not a known dtype; declare page_bytes for other dtypes")
        elif 1 <= n.page_tokens <= MAX_PAGE_TOKENS:
            try:
                n._derived_page_size()
            except DescriptorError as e:
                errs.append(str(e))
        errs.extend(n._page_format_errors())
        if errs:
            raise DescriptorError("\n".join(errs))

    def _page_format_errors(self) -> List[str]:
        """Validate's page_format rule on the normalized descriptor: the
        format parses and describes the page size. A page whose size the
        geometry does not give is reported by its own rule, not here."""
        if not self.page_format:
            return []
        try:
            pf = parse_page_format(self.page_format)
        except DescriptorError as e:
            return [str(e)]
        page = self.page_bytes
        if page == 0 and 1 <= self.page_tokens <= MAX_PAGE_TOKENS:
            try:
                page = self._derived_page_size()
            except DescriptorError:
                page = 0
        if 0 < page <= MAX_PAGE_BYTES and pf.nbytes != page:
            return [f"page_format: describes {pf.nbytes} bytes, the page is {page} bytes"]
        return []

    # ---- wire ------------------------------------------------------------

    def to_proto(self):
        """The normalized descriptor as a ``strata.v1.Descriptor`` message."""
        from ._proto import strata_pb2 as pb

        n = self.normalize()
        m = pb.Descriptor(**{k: getattr(n, k) for k in _STRING_FIELDS + _UINT32_FIELDS})
        m.page_bytes = n.page_bytes
        m.page_format = n.page_format
        m.checksum = {"crc32c": pb.CHECKSUM_ALGORITHM_CRC32C, "sha256": pb.CHECKSUM_ALGORITHM_SHA256}.get(
            n.checksum, pb.CHECKSUM_ALGORITHM_UNSPECIFIED
        )
        m.key_format = {"sha256-chain": pb.KEY_FORMAT_SHA256_CHAIN, "sha256-blocks": pb.KEY_FORMAT_SHA256_BLOCKS}.get(
            n.key_format, pb.KEY_FORMAT_UNSPECIFIED
        )
        m.compute.params = int(n.compute.params or 0)
        m.compute.attention_heads = int(n.compute.attention_heads or 0)
        m.compute.attention_head_dim = int(n.compute.attention_head_dim or 0)
        for k, v in n.extra.items():
            m.extra[k] = v
        return m

    def page_keys(self, tokens: Any) -> List[bytes]:
        """Native keys of the full pages of ``tokens`` in this namespace."""
        n = self.normalize()
        return page_keys(self.id, tokens, n.page_tokens, key_format=n.key_format)


# ---- page formats ------------------------------------------------------------


@dataclass(frozen=True)
class PageSegment:
    """One tensor of a page: its role (``"kv"``, ``"scale"``, ...), its axes
    outermost first as (name, extent) pairs, and its element dtype."""

    role: str
    axes: Tuple[Tuple[str, int], ...]
    elem: str

    @property
    def nbytes(self) -> int:
        """Bytes the segment describes: the extents' product times the element width."""
        n = _DTYPE_BYTES.get(normalize_dtype(self.elem), 0)
        for _, extent in self.axes:
            n *= extent
        return n

    def __str__(self) -> str:
        return f"{self.role}:{'.'.join(f'{name}{extent}' for name, extent in self.axes)}:{self.elem}"


@dataclass(frozen=True)
class PageFormat:
    """A parsed page format (``parse_page_format``); ``str()`` gives it back."""

    segments: Tuple[PageSegment, ...]

    @property
    def nbytes(self) -> int:
        """Bytes the format describes: the sum of its segments'."""
        return sum(s.nbytes for s in self.segments)

    def __str__(self) -> str:
        return ";".join(str(s) for s in self.segments)


_PAGE_ROLE = re.compile(r"[a-z][a-z0-9_]*\Z")
_PAGE_AXIS_NAME = re.compile(r"[A-Z][a-z]*")
_DIGITS = frozenset("0123456789")


def _goquote(s: str) -> str:
    """s quoted as Go's %q quotes it, so that errors read as the Go package's."""
    out = ['"']
    for c in s:
        o = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif c in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(c)])
        elif c.isprintable():
            out.append(c)
        elif o < 0x80:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def parse_page_format(s: str) -> PageFormat:
    """Parse a page format exactly as written (namespace.ParsePageFormat):
    nothing is trimmed and only the canonical form is accepted, so
    ``str(parse_page_format(s)) == s``. Raises DescriptorError, its message
    starting ``page_format:`` and saying what is wrong and where, as Go's."""
    if s == "":
        raise DescriptorError("page_format: empty")
    size = len(s.encode("utf-8"))
    if size > MAX_PAGE_FORMAT_LEN:
        raise DescriptorError(f"page_format: {size} bytes; at most {MAX_PAGE_FORMAT_LEN} allowed")
    parts = s.split(";")
    if len(parts) > MAX_PAGE_FORMAT_SEGMENTS:
        raise DescriptorError(f"page_format: {len(parts)} segments; at most {MAX_PAGE_FORMAT_SEGMENTS} allowed")
    segs: List[PageSegment] = []
    total = 0
    for i, seg in _numbered(parts, _parse_page_segment, "page_format: segment", DescriptorError):
        segs.append(seg)
        total += seg.nbytes
        if total > MAX_PAGE_BYTES:
            raise DescriptorError(f"page_format: describes more than {MAX_PAGE_BYTES} bytes (at segment {i})")
    return PageFormat(tuple(segs))


def _numbered(items, parse, what, error=ValueError):
    """Yield ``(n, parse(item))`` for each of items, n counting from 1, one
    at a time; a ValueError from parse is raised again as error, its
    message naming the item after what (``axis 2 "Hx": ...``)."""
    for n, item in enumerate(items, 1):
        try:
            v = parse(item)
        except ValueError as e:
            raise error(f"{what} {n} {_goquote(item)}: {e}") from None
        yield n, v


def _parse_page_segment(s: str) -> PageSegment:
    if s == "":
        raise ValueError("empty")
    fields = s.split(":")
    if len(fields) != 3:
        raise ValueError(f"want role:axes:elem (3 parts separated by ':'), got {len(fields)}")
    role, axes, elem = fields
    if not _PAGE_ROLE.match(role):
        raise ValueError(f"role {_goquote(role)}: want [a-z][a-z0-9_]*")
    canon = normalize_dtype(elem)
    w = _DTYPE_BYTES.get(canon)
    if w is None:
        raise ValueError(f"element {_goquote(elem)} has no known width (known: {_KNOWN_DTYPES})")
    if canon != elem:
        raise ValueError(f"element {_goquote(elem)} is not canonical: write {_goquote(canon)}")
    names = axes.split(".")
    if len(names) > MAX_PAGE_FORMAT_AXES:
        raise ValueError(f"{len(names)} axes; at most {MAX_PAGE_FORMAT_AXES} allowed")
    out = []
    n = w
    for _, ax in _numbered(names, _parse_page_axis, "axis"):
        out.append(ax)
        n *= ax[1]
        if n > MAX_PAGE_BYTES:
            raise ValueError(f"describes more than {MAX_PAGE_BYTES} bytes")
    return PageSegment(role, tuple(out), elem)


def _parse_page_axis(s: str) -> Tuple[str, int]:
    m = _PAGE_AXIS_NAME.match(s)
    if not m:
        raise ValueError("want a name [A-Z][a-z]* and an extent")
    name, digits = m.group(), s[m.end():]
    if digits == "":
        raise ValueError(f"no extent after the name {_goquote(name)}")
    if not set(digits) <= _DIGITS:
        raise ValueError(f"extent {_goquote(digits)} is not a decimal number")
    if digits[0] == "0":
        raise ValueError(f"extent {_goquote(digits)}: want an integer >= 1 without leading zeros")
    n = int(digits)
    if n > MAX_PAGE_BYTES:
        raise ValueError(f"extent {digits}: describes more than {MAX_PAGE_BYTES} bytes")
    return name, n


# PyTorch's names of element types that normalize_dtype leaves alone
# (descriptor dtypes keep their spelling, so namespace IDs hold), spelled
# as page formats spell them.
_PAGE_ELEM_ALIASES = {"float64": "fp64", "float8_e8m0fnu": "fp8_e8m0"}


def page_format_string(segments: Iterable[Any]) -> str:
    """The canonical page format of ``segments``, each a PageSegment or a
    ``(role, axes, elem)`` tuple with ``axes`` (name, extent) pairs outermost
    first, in the order the page's bytes are serialised::

        page_format_string([("kv", [("L", 32), ("S", 2), ("T", 64), ("H", 8), ("D", 128)], "fp8_e4m3")])
        # 'kv:L32.S2.T64.H8.D128:fp8_e4m3'

    ``elem`` may be any spelling normalize_dtype resolves, or a torch dtype
    (``torch.float8_e4m3fn`` gives ``fp8_e4m3``, ``torch.float64`` ``fp64``,
    ``torch.float8_e8m0fnu`` ``fp8_e8m0``). Extents must be integers. Nothing
    is dropped or reordered; the result is checked with parse_page_format,
    whose DescriptorError says what is wrong.
    """
    parts = []
    for seg in segments:
        if isinstance(seg, PageSegment):
            role, axes, elem = seg.role, seg.axes, seg.elem
        else:
            role, axes, elem = seg
        e = normalize_dtype(elem)
        e = _PAGE_ELEM_ALIASES.get(e, e)
        dims = ".".join(f"{name}{operator.index(extent)}" for name, extent in axes)
        parts.append(f"{role}:{dims}:{e}")
    s = ";".join(parts)
    parse_page_format(s)
    return s


def _check_string(name: str, s: str, max_len: int) -> List[str]:
    try:
        b = s.encode("utf-8")
    except UnicodeEncodeError:
        return [f"{name}: not valid UTF-8"]
    if len(b) > max_len:
        return [f"{name}: {len(b)} bytes; at most {max_len} allowed"]
    return []


# ---- page keys ------------------------------------------------------------

_LITTLE = sys.byteorder == "little"


def _le_tokens(tokens: Any) -> bytes:
    """Tokens as consecutive little-endian uint32."""
    if isinstance(tokens, (bytes, bytearray, memoryview)):
        return bytes(tokens)
    tobytes = getattr(tokens, "astype", None)
    if tobytes is not None and hasattr(tokens, "dtype"):  # numpy array
        return tokens.astype("<u4", copy=False).tobytes()
    a = array("I", tokens)
    if a.itemsize != 4:  # pragma: no cover - exotic platforms
        return struct.pack("<%dI" % len(tokens), *tokens)
    if not _LITTLE:  # pragma: no cover
        a.byteswap()
    return a.tobytes()


def next_key(prev: bytes, page_tokens: Any) -> bytes:
    """key_i = SHA-256(key_{i-1} || LE-uint32 tokens of page i)."""
    return hashlib.sha256(bytes(prev) + _le_tokens(page_tokens)).digest()


def page_keys(namespace_id: bytes, tokens: Any, page_tokens: int, prev: Optional[bytes] = None,
              key_format: str = "sha256-chain") -> List[bytes]:
    """Native page keys of every full page of ``tokens``, chained from the
    namespace ID (or from ``prev``, the key of the page before ``tokens``)
    in the namespace's ``key_format`` (``Descriptor.page_keys`` passes it).

    A trailing partial page gets no key.
    """
    if page_tokens <= 0:
        raise ValueError("page_tokens must be > 0")
    raw = _le_tokens(tokens)
    step = 4 * page_tokens
    pages = len(raw) // step
    cur = bytes(prev if prev is not None else namespace_id)
    if len(cur) != KEY_SIZE:
        raise ValueError(f"namespace id / prev key is {len(cur)} bytes, want {KEY_SIZE}")
    if key_format in ("", "sha256-chain"):
        return _chain_keys(cur, raw, step, pages)
    if key_format == "sha256-blocks":
        if page_tokens % KEY_BLOCK_TOKENS:
            raise ValueError(f"sha256-blocks keys need page_tokens a multiple of {KEY_BLOCK_TOKENS}, not {page_tokens}")
        return _block_keys(cur, raw, step, pages)
    raise ValueError(f"unknown key format {key_format!r}; want sha256-chain or sha256-blocks")


def _chain_keys(cur: bytes, raw: bytes, step: int, pages: int) -> List[bytes]:
    """sha256-chain: key_i = SHA-256(key_{i-1} || tokens of page i)."""
    # One hashlib call per page over the 32 + 4*page_tokens bytes: the loop
    # runs at the interpreter's speed, not SHA-256's (a 1M-token prompt of
    # 16-token pages: ~29 ms of CPU, against ~33 ms with a hash object and
    # update per page), so it makes as few calls as it can.
    out: List[bytes] = []
    sha = hashlib.sha256
    append = out.append
    for i in range(0, pages * step, step):
        cur = sha(cur + raw[i:i + step]).digest()
        append(cur)
    return out


def _block_keys(cur: bytes, raw: bytes, step: int, pages: int) -> List[bytes]:
    """sha256-blocks: the SHA-256 compression function over each page's
    token bytes, 64 at a time, from the parent key's hash value; the key is
    the hash value after the page (namespace/README.md, "Page keys").

    hashlib has no way to start from a given hash value, so this runs
    OpenSSL's SHA256_Update (the library hashlib itself uses) on a
    SHA256_CTX whose hash value it sets: fed whole blocks, SHA256_Update
    runs the compression function on each and buffers nothing. Where that
    library cannot be loaded, or fails a known-answer check, it falls back
    to the compression function in Python (tens of microseconds a block).
    """
    if pages == 0:
        return []
    lib = _openssl_sha256()
    if lib is None:
        return _block_keys_python(cur, raw, step, pages)
    update, ctx_type = lib
    ctx = ctx_type()
    ctx.h[:] = struct.unpack(">8I", cur)
    buf = ctypes.create_string_buffer(raw, len(raw))
    base, pctx, addr = ctypes.addressof(buf), ctypes.byref(ctx), ctypes.addressof(ctx)
    string_at = ctypes.string_at
    states = []
    append = states.append
    for off in range(0, pages * step, step):
        update(pctx, base + off, step)
        append(string_at(addr, KEY_SIZE))
    words = array("I", b"".join(states))  # the hash values, native-endian words
    if _LITTLE:
        words.byteswap()
    flat = words.tobytes()
    return [flat[i:i + KEY_SIZE] for i in range(0, len(flat), KEY_SIZE)]


_SHA_M32 = 0xFFFFFFFF
# FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube
# roots of the first 64 primes.
_SHA_K = (
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
)


def _sha256_compress(h: Sequence[int], block: bytes) -> List[int]:
    """FIPS 180-4 §6.2.2: the hash value after one 64-byte block."""
    m = _SHA_M32
    w = list(struct.unpack(">16I", block))
    for t in range(16, 64):
        x, y = w[t - 15], w[t - 2]
        s0 = ((x >> 7 | x << 25) ^ (x >> 18 | x << 14) ^ (x >> 3)) & m
        s1 = ((y >> 17 | y << 15) ^ (y >> 19 | y << 13) ^ (y >> 10)) & m
        w.append((w[t - 16] + s0 + w[t - 7] + s1) & m)
    a, b, c, d, e, f, g, hh = h
    for t in range(64):
        s1 = ((e >> 6 | e << 26) ^ (e >> 11 | e << 21) ^ (e >> 25 | e << 7)) & m
        t1 = (hh + s1 + ((e & f) ^ (~e & g)) + _SHA_K[t] + w[t]) & m
        s0 = ((a >> 2 | a << 30) ^ (a >> 13 | a << 19) ^ (a >> 22 | a << 10)) & m
        t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) & m
        a, b, c, d, e, f, g, hh = (t1 + t2) & m, a, b, c, (d + t1) & m, e, f, g
    return [(x + y) & m for x, y in zip(h, (a, b, c, d, e, f, g, hh))]


def _block_keys_python(cur: bytes, raw: bytes, step: int, pages: int) -> List[bytes]:
    """_block_keys with the compression function in Python."""
    h: Sequence[int] = struct.unpack(">8I", cur)
    out: List[bytes] = []
    for off in range(0, pages * step, step):
        for blk in range(off, off + step, 64):
            h = _sha256_compress(h, raw[blk:blk + 64])
        out.append(struct.pack(">8I", *h))
    return out


_OPENSSL: Any = False  # not loaded yet; None when unusable


def _openssl_sha256() -> Any:
    """OpenSSL's SHA256_Update and its SHA256_CTX type, or None."""
    global _OPENSSL
    if _OPENSSL is False:
        _OPENSSL = _load_openssl_sha256()
    return _OPENSSL


def _load_openssl_sha256() -> Any:
    try:
        import ctypes.util

        import _hashlib  # noqa: F401  (loads the interpreter's libcrypto first)

        name = ctypes.util.find_library("crypto")
        if not name:
            return None
        lib = ctypes.CDLL(name)

        class Ctx(ctypes.Structure):  # SHA256_CTX (openssl/sha.h)
            _fields_ = [("h", ctypes.c_uint32 * 8), ("Nl", ctypes.c_uint32), ("Nh", ctypes.c_uint32),
                        ("data", ctypes.c_uint32 * 16), ("num", ctypes.c_uint), ("md_len", ctypes.c_uint)]

        init, update = lib.SHA256_Init, lib.SHA256_Update
        init.argtypes, init.restype = [ctypes.POINTER(Ctx)], ctypes.c_int
        update.argtypes, update.restype = [ctypes.POINTER(Ctx), ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int
        # Known answer: from SHA-256's initial value, one padded block of
        # "abc" leaves hashlib's digest as the hash value.
        ctx = Ctx()
        if init(ctypes.byref(ctx)) != 1:
            return None
        block = b"abc\x80" + bytes(52) + struct.pack(">Q", 24)
        update(ctypes.byref(ctx), block, 64)
        if ctx.num != 0 or struct.pack(">8I", *ctx.h) != hashlib.sha256(b"abc").digest():
            return None
        return update, Ctx
    except (OSError, AttributeError, ImportError):
        return None


_ENGINE_KEY_DOMAIN = b"strata/engine-hash/v1\x00"


def key_from_engine_hash(namespace_id: bytes, engine_hash: Union[bytes, str]) -> bytes:
    """SHA-256("strata/engine-hash/v1" || 0x00 || namespace ID || engine hash).

    ``engine_hash`` is the raw digest (SGLang: ``bytes.fromhex(hash_str)``;
    a hex string is accepted and decoded).
    """
    if isinstance(engine_hash, str):
        engine_hash = bytes.fromhex(engine_hash)
    return hashlib.sha256(_ENGINE_KEY_DOMAIN + bytes(namespace_id) + bytes(engine_hash)).digest()


# ---- SGLang ---------------------------------------------------------------


def sglang_page_hash(tokens: Any, prior_hash: Optional[str] = None) -> str:
    """SGLang's ``get_hash_str(token_ids, prior_hash)``: hex SHA-256 of the
    prior's raw bytes (skipped when empty) and the LE-uint32 tokens."""
    h = hashlib.sha256()
    if prior_hash:
        h.update(bytes.fromhex(prior_hash))
    flat: List[int] = []
    for t in tokens:
        if isinstance(t, tuple):  # EAGLE bigram mode: hash both elements
            flat.extend(t)
        else:
            flat.append(t)
    h.update(_le_tokens(flat))
    return h.hexdigest()


def sglang_page_hashes(tokens: Sequence[int], page_tokens: int, prior_hash: Optional[str] = None) -> List[str]:
    """The SGLang hash chain over full pages (HiCache's storage keys)."""
    if page_tokens <= 0:
        raise ValueError("page_tokens must be > 0")
    out: List[str] = []
    prior = prior_hash
    for i in range(len(tokens) // page_tokens):
        prior = sglang_page_hash(tokens[i * page_tokens:(i + 1) * page_tokens], prior)
        out.append(prior)
    return out


# ---- vLLM sha256_cbor -----------------------------------------------------


def _cbor_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, n)
    raise ValueError("integer too large for CBOR")


def cbor_encode(x: Any) -> bytes:
    """Canonical CBOR of None, bool, int, str, bytes and tuples/lists, as
    cbor2.dumps(x, canonical=True) writes them (the types vLLM hashes)."""
    if x is None:
        return b"\xf6"
    if isinstance(x, bool):
        return b"\xf5" if x else b"\xf4"
    if isinstance(x, int):
        return _cbor_head(0, x) if x >= 0 else _cbor_head(1, -1 - x)
    if isinstance(x, (bytes, bytearray, memoryview)):
        b = bytes(x)
        return _cbor_head(2, len(b)) + b
    if isinstance(x, str):
        b = x.encode("utf-8")
        return _cbor_head(3, len(b)) + b
    if isinstance(x, (list, tuple)):
        return _cbor_head(4, len(x)) + b"".join(cbor_encode(i) for i in x)
    raise TypeError(f"cbor_encode: unsupported type {type(x).__name__}")


def sha256_cbor(x: Any) -> bytes:
    return hashlib.sha256(cbor_encode(x)).digest()


#: The seed vLLM 0.33 derives NONE_HASH from when PYTHONHASHSEED is unset
#: and the hash is cryptographic (sha256, sha256_cbor): fixed, so that
#: processes share hashes (vllm/v1/core/kv_cache_utils.py
#: DEFAULT_NONE_HASH_SEED). xxhash/xxhash_cbor draw a random per-process
#: seed instead: their hashes cannot be reproduced.
VLLM_DEFAULT_NONE_HASH_SEED = "vllm-none-hash"

_VLLM_ALGOS = ("sha256", "sha256_cbor")


def _vllm_hash(algo: str, x: Any) -> bytes:
    if algo == "sha256_cbor":
        return sha256_cbor(x)
    if algo == "sha256":  # vLLM's default: SHA-256 of pickle.dumps(x, HIGHEST_PROTOCOL)
        import pickle

        return hashlib.sha256(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)).digest()
    raise ValueError(f"vLLM hash {algo!r} is not reproducible here; want one of {_VLLM_ALGOS}")


def vllm_none_hash(python_hash_seed: Optional[str] = None, algo: str = "sha256_cbor") -> bytes:
    """vLLM's NONE_HASH for ``PYTHONHASHSEED=python_hash_seed`` (None: unset,
    vLLM's fixed default seed) under ``algo`` (``prefix_caching_hash_algo``)."""
    seed = VLLM_DEFAULT_NONE_HASH_SEED if python_hash_seed is None else python_hash_seed
    return _vllm_hash(algo, seed)


def vllm_block_hash(parent: bytes, tokens: Sequence[int], extra_keys: Any = None, algo: str = "sha256_cbor") -> bytes:
    """hash_fn((parent, tuple(tokens), extra_keys)) (vLLM's hash_block_tokens)."""
    return _vllm_hash(algo, (bytes(parent), tuple(int(t) for t in tokens), extra_keys))


def vllm_block_hashes(none_hash: bytes, tokens: Sequence[int], block_size: int, algo: str = "sha256_cbor") -> List[bytes]:
    """Block hashes of every full block (vLLM's hash block size), extra keys
    None, chained from NONE_HASH."""
    if block_size <= 0:
        raise ValueError("block_size must be > 0")
    out: List[bytes] = []
    parent = bytes(none_hash)
    for i in range(len(tokens) // block_size):
        parent = vllm_block_hash(parent, tokens[i * block_size:(i + 1) * block_size], None, algo)
        out.append(parent)
    return out
