"""The frame protocol's codec (proto/frame/SPEC.md in the Go tree).

The spec is the reference; this module implements it as one table,
MESSAGES: per op, the message's name and its fields in wire order, each
a name and a type. ``encode`` and ``decode`` walk the table; the golden
frames of proto/frame/testdata/golden are decoded and re-encoded byte for
byte with them (python/tests/test_frame.py), and the table is checked
against the spec's.

A message is a dict of its fields: integers, floats, booleans, ``str``,
bytes (keys, namespace IDs, checksums, data), lists, and dicts for the
nested records (an extent, a page of a Reserve, a Put's page). A field
may name the version it is on the wire since (a page spec's cost hint:
COST_HINT_VERSION): ``encode`` and ``decode`` lay a message out as the
connection's version has it (SPEC.md §7), the newest by default. The raw
data plane's hot paths (raw.py) do not build dicts: they use the
fixed-layout helpers at the end of this module, which the golden frames
check too.

Every number here is the spec's, and python/tests/test_frame.py checks
each table against SPEC.md's (the tables the Go codec is checked against):
nothing of the protocol is typed in the client's other modules.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Sequence, Tuple

from . import errors as E

# Versions (SPEC.md §7): the one this client's Hello carries, the oldest
# a node serves (and a client falls back to, one version at a time), and
# the newest the codec knows. This client speaks the newest but sends no
# SlotPut (version 4: a put into arena slots, which only a client mapping
# the node's shared memory makes); version 5 adds a page spec's cost hint
# (COST_HINT_VERSION), version 6 its event info (EVENT_VERSION: tokens,
# LoRA name and extra keys for the node's KV event stream).
NEWEST_VERSION = 6
PROTOCOL_VERSION = NEWEST_VERSION
MIN_PROTOCOL_VERSION = 2
COST_HINT_VERSION = 5
EVENT_VERSION = 6

# Limits (SPEC.md §8).
HEADER_SIZE = 16
MAX_FRAME = 8 << 20
MAX_WRITE_CHUNK = MAX_FRAME // 2
# ADDR_HEADER is the gRPC response header of OpenNamespace naming the
# node's raw address (host:port).
ADDR_HEADER = "strata-raw-addr"

# Ops (SPEC.md §2).
OP_HELLO, OP_WELCOME, OP_ERROR = 1, 2, 3
OP_GET, OP_GET_OK = 4, 5
OP_RESERVE, OP_RESERVE_OK, OP_COMMIT, OP_COMMIT_OK = 6, 7, 8, 9
OP_ABORT, OP_ABORT_OK, OP_SERVED = 10, 11, 12
OP_READ, OP_PAGE, OP_WRITE = 13, 14, 15
OP_PUT, OP_PUT_OK, OP_LOOKUP, OP_LOOKUP_OK = 16, 17, 18, 19
OP_SLOT_PUT, OP_SLOT_PUT_OK = 20, 21
# SINCE: the version each op is in from (SPEC.md §2's since column); a
# connection of an older version does not send it.
SINCE = {op: 4 if op >= OP_SLOT_PUT else 3 if op >= OP_PUT else MIN_PROTOCOL_VERSION for op in range(1, OP_SLOT_PUT_OK + 1)}

# Statuses (SPEC.md §3), by name.
PAGE_STATUS = {"MISSING": 0, "MAPPED": 1, "ELSE": 2}
RESERVE_STATUS = {"RESERVED": 1, "EXISTS": 2, "REJECTED": 3}
COMMIT_STATUS = {
    "COMMITTED": 1, "EXISTS": 2, "CHECKSUM_MISMATCH": 3, "SIZE_MISMATCH": 4, "INCOMPLETE": 5,
    "UNKNOWN_WRITE": 6, "EXPIRED": 7, "ABORTED": 8, "FAILED": 10,
}
SLOT_RESERVED, SLOT_EXISTS, SLOT_REJECTED = 1, 2, 3

# Field types (SPEC.md §1). A list is ("list", element type), a record a
# list of (name, type) pairs, or (name, type, since) for a field on the
# wire from version since.
U8, U16, U32, U64, I64, N64, F64, BOOL, KEY, STR, BYTES8, BYTES32, DATA = (
    "u8", "u16", "u32", "u64", "i64", "n64", "f64", "bool", "[32]", "str", "bytes8", "bytes32", "data")
EXTENT = [("off", N64), ("len", N64), ("gen", U64), ("gen_index", N64)]
_COST = ("cost_hint", F64, COST_HINT_VERSION)
_EVENT = [("tokens", ("list", U32), EVENT_VERSION), ("lora_name", STR, EVENT_VERSION), ("extra_keys", BYTES32, EVENT_VERSION)]
_PAGE_SPEC = [("key", KEY), ("parent", KEY), ("has_parent", BOOL), ("depth", U32), ("size", N64), ("chain_depth", U32), _COST,
              *_EVENT]
_PUT_PAGE = [("key", KEY), ("parent", KEY), ("has_parent", BOOL), ("depth", U32), ("chain_depth", U32), _COST, *_EVENT]
_KEYS = [("ns", KEY), ("lease", U64), ("keys", ("list", KEY))]


def _list(elem: Any) -> Tuple[str, Any]:
    return ("list", elem)


# MESSAGES: op -> (name, fields in wire order).
MESSAGES: Dict[int, Tuple[str, List[Tuple[str, Any]]]] = {
    OP_HELLO: ("Hello", [("version", U16), ("token", STR)]),
    OP_WELCOME: ("Welcome", [("version", U16), ("node_id", STR), ("arena_id", U64), ("arena_size", N64),
                             ("gen_words", N64), ("max_batch", U32)]),
    OP_ERROR: ("Error", [("code", U16), ("message", STR)]),
    OP_GET: ("Get", _KEYS),
    OP_GET_OK: ("GetOK", [("pages", _list([("status", U8), ("ext", EXTENT), ("checksum", BYTES8)]))]),
    OP_RESERVE: ("Reserve", [("ns", KEY), ("ttl_ms", U32), ("pages", _list(_PAGE_SPEC))]),
    OP_RESERVE_OK: ("ReserveOK", [("slots", _list([("status", U8), ("write_id", U64), ("deadline_ms", I64),
                                                   ("mapped", BOOL), ("ext", EXTENT), ("reason", STR)]))]),
    OP_COMMIT: ("Commit", [("ns", KEY), ("items", _list([("write_id", U64), ("size", N64), ("checksum", BYTES8)]))]),
    OP_COMMIT_OK: ("CommitOK", [("statuses", _list(U8))]),
    OP_ABORT: ("Abort", [("ns", KEY), ("write_ids", _list(U64))]),
    OP_ABORT_OK: ("AbortOK", [("aborted", U32)]),
    OP_SERVED: ("Served", [("ns", KEY), ("pages", U32), ("bytes", N64)]),
    OP_READ: ("Read", _KEYS),
    OP_PAGE: ("Page", [("index", U32), ("found", BOOL), ("checksum", BYTES8), ("data", DATA)]),
    OP_WRITE: ("Write", [("ns", KEY), ("write_id", U64), ("offset", U64), ("data", DATA)]),
    OP_PUT: ("Put", [("ns", KEY), ("ttl_ms", U32), ("page", _PUT_PAGE), ("checksum", BYTES8), ("data", DATA)]),
    OP_PUT_OK: ("PutOK", [("reserve", U8), ("commit", U8), ("reason", STR)]),
    OP_LOOKUP: ("Lookup", [("ns", KEY), ("lease", BOOL), ("lease_ttl_ms", U32), ("keys", _list(KEY))]),
    OP_LOOKUP_OK: ("LookupOK", [("hit_prefix", U32), ("lease_id", U64), ("expires_ms", N64), ("lease_pages", U32),
                                ("present", _list(BOOL))]),
    OP_SLOT_PUT: ("SlotPut", [("ns", KEY), ("want", U32), ("pages", _list([("write_id", U64), ("page", _PAGE_SPEC),
                                                                         ("checksum", BYTES8)]))]),
    OP_SLOT_PUT_OK: ("SlotPutOK", [("results", _list([("reserve", U8), ("commit", U8), ("reason", STR)])),
                                   ("slots", _list([("write_id", U64), ("deadline_ms", I64), ("ext", EXTENT)]))]),
}

_INTS = {U8: struct.Struct("<B"), U16: struct.Struct("<H"), U32: struct.Struct("<I"), U64: struct.Struct("<Q"),
         I64: struct.Struct("<q"), N64: struct.Struct("<Q"), F64: struct.Struct("<d")}
_FIXED = {U8: 1, U16: 2, U32: 4, U64: 8, I64: 8, N64: 8, F64: 8, BOOL: 1, KEY: 32, STR: 2, BYTES8: 1, BYTES32: 4, DATA: 0}
_HDR = struct.Struct("<IBBHQ")  # length, op, 0, 0, request id


def fields_at(t: List[Any], version: int) -> List[Tuple[str, Any]]:
    """A record's (name, type) pairs on the wire at version."""
    return [(f[0], f[1]) for f in t if len(f) < 3 or version >= f[2]]


def _min_size(t: Any, version: int) -> int:
    """The fewest bytes a value of type t takes (a list's count check)."""
    if isinstance(t, list):
        return sum(_min_size(ft, version) for _, ft in fields_at(t, version))
    if isinstance(t, tuple):
        return 4
    return _FIXED[t]


# ---- encoding ---------------------------------------------------------------------


def _append(out: bytearray, t: Any, v: Any, version: int) -> None:
    if isinstance(t, list):
        for name, ft in fields_at(t, version):
            _append(out, ft, v.get(name, _zero(ft)), version)
    elif isinstance(t, tuple):
        out += _INTS[U32].pack(len(v))
        for e in v:
            _append(out, t[1], e, version)
    elif t in _INTS:
        out += _INTS[t].pack(v)
    elif t == BOOL:
        out.append(1 if v else 0)
    elif t == KEY:
        if len(v) != 32:
            raise ValueError(f"a key of {len(v)} bytes")
        out += v
    elif t == STR:
        b = v.encode()[:0xFFFF]
        out += _INTS[U16].pack(len(b)) + b
    elif t == BYTES8:
        b = bytes(v)[:0xFF]
        out.append(len(b))
        out += b
    elif t == BYTES32:
        b = bytes(v)
        out += _INTS[U32].pack(len(b)) + b
    else:  # DATA
        out += v


def _zero(t: Any) -> Any:
    if isinstance(t, list):
        return {}
    if isinstance(t, tuple):
        return []
    return {BOOL: False, KEY: bytes(32), STR: "", BYTES8: b"", BYTES32: b"", DATA: b""}.get(t, 0)


def encode_body(op: int, fields: Dict[str, Any], version: int = NEWEST_VERSION) -> bytes:
    """A message's body as a connection of version lays it out; a
    missing field is zero, one the version does not carry is left out."""
    out = bytearray()
    _append(out, MESSAGES[op][1], fields, version)
    return bytes(out)


def header(op: int, rid: int, body_len: int) -> bytes:
    """A frame's 16-byte header for a body of body_len bytes."""
    return _HDR.pack(HEADER_SIZE - 4 + body_len, op, 0, 0, rid)


def encode(op: int, rid: int, fields: Dict[str, Any], version: int = NEWEST_VERSION) -> bytes:
    """A whole frame carrying the message, at version."""
    body = encode_body(op, fields, version)
    return header(op, rid, len(body)) + body


# ---- decoding ---------------------------------------------------------------------


class Reader:
    """A frame body read front to back; any overrun, trailing byte or bad
    value is a ProtocolError."""

    __slots__ = ("b", "i", "what", "version")

    def __init__(self, b: bytes, what: str, version: int = NEWEST_VERSION):
        self.b, self.i, self.what, self.version = b, 0, what, version

    def fail(self, why: str) -> E.ProtocolError:
        return E.ProtocolError(f"raw {self.what}: {why}")

    def take(self, n: int) -> bytes:
        if self.i + n > len(self.b):
            raise self.fail(f"truncated frame ({len(self.b)} bytes)")
        p = self.b[self.i:self.i + n]
        self.i += n
        return p

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self.take(st.size))

    def str(self) -> str:
        (n,) = self.unpack(_INTS[U16])
        return bytes(self.take(n)).decode("utf-8", "replace")

    def value(self, t: Any) -> Any:
        if isinstance(t, list):
            return {name: self.value(ft) for name, ft in fields_at(t, self.version)}
        if isinstance(t, tuple):
            (n,) = self.unpack(_INTS[U32])
            if n > (len(self.b) - self.i) // max(1, _min_size(t[1], self.version)):
                raise self.fail(f"{n} items in {len(self.b) - self.i} bytes")
            return [self.value(t[1]) for _ in range(n)]
        if t in _INTS:
            (v,) = self.unpack(_INTS[t])
            if t == N64 and v > (1 << 63) - 1:
                raise self.fail(f"value {v} out of range")
            return v
        if t == BOOL:
            v = self.take(1)[0]
            if v > 1:
                raise self.fail(f"boolean {v}")
            return v == 1
        if t == KEY:
            return bytes(self.take(32))
        if t == STR:
            return self.str()
        if t == BYTES8:
            return bytes(self.take(self.take(1)[0]))
        if t == BYTES32:
            (n,) = self.unpack(_INTS[U32])
            return bytes(self.take(n))
        rest = bytes(self.b[self.i:])  # DATA
        self.i = len(self.b)
        return rest

    def done(self) -> None:
        if self.i != len(self.b):
            raise self.fail(f"{len(self.b) - self.i} trailing bytes")


def decode_body(op: int, body: bytes, version: int = NEWEST_VERSION) -> Dict[str, Any]:
    """A message's fields as a connection of version reads them;
    ProtocolError if the body breaks the spec."""
    if op not in MESSAGES:
        raise E.ProtocolError(f"raw frame: op {op}")
    name, fields = MESSAGES[op]
    r = Reader(body, name, version)
    out = r.value(fields)
    r.done()
    if op == OP_PAGE and not out["found"] and out["data"]:
        raise r.fail("data for a missing page")
    if op == OP_PUT:
        out["page"]["size"] = len(out["data"])
    return out


def parse_header(h: bytes) -> Tuple[int, int, int]:
    """(body length, op, request id) of a frame header."""
    if len(h) < HEADER_SIZE:
        raise E.ProtocolError(f"raw frame: header of {len(h)} bytes")
    length, op, pad1, pad2, rid = _HDR.unpack_from(h)
    if length < HEADER_SIZE - 4 or pad1 or pad2:
        raise E.ProtocolError(f"raw frame: bad header {bytes(h[:HEADER_SIZE]).hex()}")
    return length - (HEADER_SIZE - 4), op, rid


def decode(frame: bytes, version: int = NEWEST_VERSION) -> Tuple[int, int, Dict[str, Any]]:
    """(op, request id, fields) of one whole frame, read at version."""
    n, op, rid = parse_header(frame)
    if n != len(frame) - HEADER_SIZE:
        raise E.ProtocolError(f"raw frame: says {n} body bytes, has {len(frame) - HEADER_SIZE}")
    return op, rid, decode_body(op, frame[HEADER_SIZE:], version)


# ---- fixed layouts of the hot paths (raw.py) ----------------------------------------

PAGE_HEAD = struct.Struct("<IBB")  # a Page's index, found, checksum length
WRITE_HEAD = struct.Struct("<QQ")  # a Write's write id, offset (after the namespace)
_READ_HEAD = struct.Struct("<QI")  # lease, n (after the namespace)
_PUT_HEAD = struct.Struct("<I32s32sBII")  # ttl ms, key, parent, has parent, depth, chain depth
_PUT_COST = _INTS[F64]  # then, from COST_HINT_VERSION, the cost hint


def read_body(ns_id: bytes, lease_id: int, keys: List[bytes]) -> bytes:
    """A Read's body."""
    return b"".join([ns_id, _READ_HEAD.pack(lease_id, len(keys))] + list(keys))


def event_info(tokens: Sequence[int] = (), lora_name: str = "", extra_keys: bytes = b"") -> bytes:
    """A page spec's event info (EVENT_VERSION): tokens, LoRA name, extra keys."""
    out = bytearray(_INTS[U32].pack(len(tokens)))
    out += struct.pack(f"<{len(tokens)}I", *tokens)
    _append(out, STR, lora_name, NEWEST_VERSION)
    _append(out, BYTES32, extra_keys, NEWEST_VERSION)
    return bytes(out)


def put_head(ns_id: bytes, ttl_ms: int, key: bytes, parent: bytes, depth: int, chain_depth: int, checksum: bytes,
             cost_hint: float = 0.0, version: int = NEWEST_VERSION, event: bytes = b"") -> bytes:
    """A Put's body up to its data (parent empty: none), at version; event
    is the page's event info (event_info), from EVENT_VERSION."""
    cost = _PUT_COST.pack(cost_hint) if version >= COST_HINT_VERSION else b""
    if version >= EVENT_VERSION:
        cost += event or _NO_EVENT
    return ns_id + _PUT_HEAD.pack(ttl_ms, key, parent or bytes(32), 1 if parent else 0, depth, chain_depth) + cost \
        + bytes((len(checksum),)) + checksum


_NO_EVENT = bytes(4 + 2 + 4)  # no tokens, no LoRA name, no extra keys
