#!/usr/bin/env python3
"""Check namespace/testdata/vectors.json with Python's standard library only.

This is an independent implementation of the formats documented in
namespace/README.md: the canonical descriptor encoding and its
normalization rules, namespace IDs, fork keys, page sizes, page formats
(their grammar and size, and the descriptors Validate rejects for a bad
one), native page
keys in both key formats (with the SHA-256 compression function written
out from FIPS 180-4 for sha256-blocks, which hashlib does not expose), engine-hash keys, SGLang page hashes and vLLM sha256_cbor block
hashes. For vLLM it carries a minimal canonical-CBOR encoder for the types
vLLM hashes (None, int, str, bytes, tuples) because cbor2 is not part of
the standard library; it is not cbor2.

Usage: check_vectors.py [path/to/vectors.json]
"""

import hashlib
import json
import re
import struct
import sys

WS = " \t\n\v\f\r"


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


DTYPE_ALIASES = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16",
    "bfloat16": "bf16", "fp8_e4m3fn": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2fnuz": "fp8_e5m2fnuz",
}
DTYPE_BYTES = {
    "fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
    "fp8_e4m3fnuz": 1, "fp8_e5m2fnuz": 1, "fp8_e8m0": 1, "int64": 8, "int32": 4,
    "int8": 1, "uint8": 1,
}
MAX_PAGE_BYTES = 1 << 30


def norm_dtype(s: str) -> str:
    s = ascii_lower(s.strip(WS))
    if s.startswith("torch."):
        s = s[len("torch."):]
    return DTYPE_ALIASES.get(s, s)


def normalize(d: dict) -> dict:
    """The rules of Descriptor.Normalize, on the canonical field names."""
    d = dict(d)
    for k in ("tenant", "model", "model_revision", "adapter", "adapter_revision", "tokenizer_revision"):
        d[k] = d[k].strip(WS)
    for k in ("engine", "layout", "quantization"):
        d[k] = ascii_lower(d[k].strip(WS))
    d["dtype"] = norm_dtype(d["dtype"])
    d["kv_dtype"] = norm_dtype(d["kv_dtype"])
    if d["kv_dtype"] in ("", "auto"):
        d["kv_dtype"] = d["dtype"]
    for k in ("tp_size", "pp_size", "cp_size"):
        d[k] = d[k] or 1
    d["checksum"] = d["checksum"] or "crc32c"
    # key_format is written only when it is not the default, page_format
    # only when it is not empty.
    if d.get("key_format", "") in ("", "sha256-chain"):
        d.pop("key_format", None)
    d["page_format"] = d.get("page_format", "").strip(WS)
    if not d["page_format"]:
        del d["page_format"]
    return d


def page_format_bytes(s: str) -> int:
    """The bytes a page format describes (README.md "Page format"); raises
    ValueError("page_format: ...") where it breaks the grammar or a limit."""
    def bad(what):
        raise ValueError("page_format: " + what)

    if len(s) > 1024:
        bad(f"{len(s)} bytes; at most 1024 allowed")
    segments = s.split(";")
    if len(segments) > 64:
        bad(f"{len(segments)} segments; at most 64 allowed")
    total = 0
    for i, seg in enumerate(segments, 1):
        parts = seg.split(":")
        if len(parts) != 3:
            bad(f"segment {i}: want role:axes:elem")
        role, axes, elem = parts
        if not re.fullmatch(r"[a-z][a-z0-9_]*", role):
            bad(f"segment {i}: role {role!r}")
        if norm_dtype(elem) != elem or elem not in DTYPE_BYTES:
            bad(f"segment {i}: element {elem!r}")
        names = axes.split(".")
        if len(names) > 8:
            bad(f"segment {i}: {len(names)} axes; at most 8 allowed")
        n = DTYPE_BYTES[elem]
        for a in names:
            m = re.fullmatch(r"([A-Z][a-z]*)([1-9][0-9]*)", a)
            if not m:
                bad(f"segment {i}: axis {a!r}")
            n *= int(m.group(2))
        total += n
        if total > MAX_PAGE_BYTES:
            bad(f"describes more than {MAX_PAGE_BYTES} bytes")
    return total


def page_format_error(d: dict):
    """Validate's page_format rule on a normalized descriptor: None, or the
    error. A page whose size the geometry does not give is not its concern."""
    pf = d.get("page_format", "")
    if not pf:
        return None
    try:
        n = page_format_bytes(pf)
    except ValueError as e:
        return str(e)
    page = page_size(d)
    if n != page:
        return f"page_format: describes {n} bytes, the page is {page} bytes"
    return None


def page_size(d: dict) -> int:
    if d["page_bytes"]:
        return d["page_bytes"]
    w = DTYPE_BYTES[d["kv_dtype"]]
    layers = d["num_layers"] // d["pp_size"]
    tokens = d["page_tokens"] // d["cp_size"]
    if d["mla_latent_dim"]:
        return layers * d["mla_latent_dim"] * w * tokens
    heads, tp = d["num_kv_heads"], d["tp_size"]
    per_rank = heads // tp if heads >= tp else 1
    return 2 * layers * per_rank * d["head_dim"] * w * tokens


def fork_key(d: dict) -> str:
    ident = {k: d[k] for k in ("adapter", "adapter_revision", "model", "model_revision", "tenant", "tokenizer_revision")}
    ident["v"] = 1
    return hashlib.sha256(canonical_json(ident)).hexdigest()


def le_tokens(tokens) -> bytes:
    return struct.pack("<%dI" % len(tokens), *tokens)


def page_keys(namespace_id: bytes, tokens, page_tokens: int):
    prev, out = namespace_id, []
    for i in range(len(tokens) // page_tokens):
        prev = hashlib.sha256(prev + le_tokens(tokens[i * page_tokens:(i + 1) * page_tokens])).digest()
        out.append(prev.hex())
    return out


def _primes(n):
    ps, k = [], 2
    while len(ps) < n:
        if all(k % p for p in ps):
            ps.append(k)
        k += 1
    return ps


def _icbrt(n: int) -> int:
    lo, hi = 0, 1 << (n.bit_length() // 3 + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid ** 3 <= n:
            lo = mid
        else:
            hi = mid
    return lo


# FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube
# roots of the first 64 primes.
SHA_K = [_icbrt(p << 96) & 0xFFFFFFFF for p in _primes(64)]
M32 = 0xFFFFFFFF


def _rotr(x, n):
    return (x >> n | x << (32 - n)) & M32


def sha256_compress(h, block: bytes):
    """FIPS 180-4 §6.2.2: the hash value after one 64-byte block."""
    w = list(struct.unpack(">16I", block))
    for t in range(16, 64):
        s0 = _rotr(w[t - 15], 7) ^ _rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
        s1 = _rotr(w[t - 2], 17) ^ _rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
        w.append((w[t - 16] + s0 + w[t - 7] + s1) & M32)
    a, b, c, d, e, f, g, hh = h
    for t in range(64):
        t1 = (hh + (_rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[t] + w[t]) & M32
        t2 = ((_rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) & M32
        a, b, c, d, e, f, g, hh = (t1 + t2) & M32, a, b, c, (d + t1) & M32, e, f, g
    return [(x + y) & M32 for x, y in zip(h, (a, b, c, d, e, f, g, hh))]


def block_page_keys(namespace_id: bytes, tokens, page_tokens: int):
    """sha256-blocks: the compression function over each page's token
    bytes, 64 at a time, from the parent key's hash value."""
    h, out = list(struct.unpack(">8I", namespace_id)), []
    for i in range(len(tokens) // page_tokens):
        msg = le_tokens(tokens[i * page_tokens:(i + 1) * page_tokens])
        for off in range(0, len(msg), 64):
            h = sha256_compress(h, msg[off:off + 64])
        out.append(struct.pack(">8I", *h).hex())
    return out


def sglang_get_hash_str(token_ids, prior_hash=None) -> str:
    h = hashlib.sha256()
    if prior_hash:
        h.update(bytes.fromhex(prior_hash))
    for t in token_ids:
        h.update(t.to_bytes(4, byteorder="little", signed=False))
    return h.hexdigest()


def cbor_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, n)
    raise ValueError("integer too large for this minimal encoder")


def cbor(x) -> bytes:
    """Canonical CBOR of None, int, str, bytes and tuples/lists."""
    if x is None:
        return b"\xf6"
    if isinstance(x, bool):
        return b"\xf5" if x else b"\xf4"
    if isinstance(x, int):
        return cbor_head(0, x) if x >= 0 else cbor_head(1, -1 - x)
    if isinstance(x, bytes):
        return cbor_head(2, len(x)) + x
    if isinstance(x, str):
        b = x.encode("utf-8")
        return cbor_head(3, len(b)) + b
    if isinstance(x, (list, tuple)):
        return cbor_head(4, len(x)) + b"".join(cbor(i) for i in x)
    raise TypeError(type(x))


def sha256_cbor(x) -> bytes:
    return hashlib.sha256(cbor(x)).digest()


def as_tuple(x):
    """JSON lists in the vectors stand for Python tuples."""
    return tuple(as_tuple(i) for i in x) if isinstance(x, list) else x


def check(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        v = json.load(f)
    n = 0

    def expect(cond, what):
        nonlocal n
        if not cond:
            raise AssertionError(what)
        n += 1

    for dv in v["descriptors"]:
        name, canon = dv["name"], dv["canonical"].encode("utf-8")
        obj = json.loads(canon)
        expect(canonical_json(obj) == canon, f"{name}: json.dumps does not reproduce the canonical bytes")
        expect(hashlib.sha256(canon).hexdigest() == dv["id"], f"{name}: id")
        expect(fork_key(obj) == dv["fork_key"], f"{name}: fork_key")
        expect(page_size(obj) == dv["page_size"], f"{name}: page_size")
        expect(canonical_json(normalize(dv["input"])) == canon, f"{name}: normalize(input) does not give the canonical encoding")
        expect(page_format_error(obj) is None, f"{name}: page_format")

    # Descriptors Validate rejects, each for its page format: rejected
    # here too, for the page format (the exact wording is Go's and the
    # Python client's; this transcription checks the size message only).
    for iv in v["invalid_descriptors"]:
        name, err = iv["name"], page_format_error(normalize(iv["input"]))
        expect(err is not None and err.startswith("page_format: "), f"{name}: accepted, want {iv['error']!r}")
        if "describes" in iv["error"] and "the page is" in iv["error"]:
            expect(err == iv["error"], f"{name}: {err!r}, want {iv['error']!r}")

    # The compression function, checked on its own: from SHA-256's initial
    # value over a padded one-block message it gives hashlib's digest.
    iv = [int((p ** 0.5 % 1) * 2 ** 32) for p in _primes(8)]
    for msg in (b"", b"abc", bytes(range(55))):
        pad = msg + b"\x80" + bytes(55 - len(msg)) + struct.pack(">Q", 8 * len(msg))
        expect(struct.pack(">8I", *sha256_compress(iv, pad)) == hashlib.sha256(msg).digest(), "sha256_compress")

    key_formats = {"sha256-chain": page_keys, "sha256-blocks": block_page_keys}
    for kv in v["native_keys"]:
        got = key_formats[kv["key_format"]](bytes.fromhex(kv["namespace_id"]), kv["tokens"], kv["page_tokens"])
        expect(got == kv["keys"], f"native keys {kv['name']}")

    for ek in v["engine_keys"]:
        msg = b"strata/engine-hash/v1\x00" + bytes.fromhex(ek["namespace_id"]) + bytes.fromhex(ek["engine_hash"])
        expect(hashlib.sha256(msg).hexdigest() == ek["key"], "engine key")

    for sv in v["sglang"]:
        prior, got, pt, toks = None, [], sv["page_tokens"], sv["tokens"]
        for i in range(len(toks) // pt):
            prior = sglang_get_hash_str(toks[i * pt:(i + 1) * pt], prior)
            got.append(prior)
        expect(got == sv["hashes"], f"sglang {sv['name']}")

    for vv in v["vllm"]:
        none_hash = sha256_cbor(vv["python_hash_seed"])
        expect(none_hash.hex() == vv["none_hash"], f"vllm {vv['name']}: NONE_HASH")
        parent, got, bs, toks = none_hash, [], vv["block_size"], vv["tokens"]
        for i in range(len(toks) // bs):
            parent = sha256_cbor((parent, tuple(toks[i * bs:(i + 1) * bs]), None))
            got.append(parent.hex())
        expect(got == vv["hashes"], f"vllm {vv['name']}: block hashes")

    for xv in v["vllm_extra_keys"]:
        extra = as_tuple(xv["extra_keys"])
        expect(cbor(extra).hex() == xv["extra_keys_cbor"], f"vllm extra {xv['name']}: CBOR of extra keys")
        h = sha256_cbor((bytes.fromhex(xv["parent"]), tuple(xv["tokens"]), extra))
        expect(h.hex() == xv["hash"], f"vllm extra {xv['name']}: hash")

    return n


if __name__ == "__main__":
    count = check(sys.argv[1] if len(sys.argv) > 1 else "vectors.json")
    print(f"vectors.json: {count} checks passed")
