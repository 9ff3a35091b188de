"""The native plane: the Go client as a shared library (``libstrata.so``,
built from ``cmd/libstrata``), called through ctypes with whole batches.

Why: a batch in Python pays the interpreter per page and per received
chunk, and every time it gives the GIL back it waits for it again (an
engine's scheduler thread is always busy: each wait is up to the switch
interval). Here a batch is one foreign call; ctypes releases the GIL around
it, once, and the Go client moves every page on its best plane (same-host
shared memory, raw tcp, gRPC), reading straight into the engine's buffers
and writing straight from them. One implementation of the protocol serves
Go and Python (ARCHITECTURE.md, "The Python client's native plane").

Finding the library: ``$STRATA_NATIVE_LIB`` when set, else
``strata_client/_native/libstrata.so`` (``pip install ./python`` builds it
there; ``scripts/buildnative.sh`` does in a checkout). ``STRATA_NATIVE=0``
keeps every client on the Python planes.

Fork: the Go runtime's threads do not survive fork(), so a call into the
library from a forked child could hang. Every call checks the process id
first: a client used in a process other than the one that made it raises
``ForkedClientError``. The library is loaded by the first Client, so a
process that forks before making one (vLLM's executor forks its workers
before any connector exists) gives each child a native plane of its own.
A child forked after its parent made a Client cannot make one either
(gRPC does not survive fork: client.py raises ``ForkedClientError``),
unless gRPC's fork support is on (``GRPC_ENABLE_FORK_SUPPORT=1``); its
clients then run on the Python planes, and ``native_status()`` says so.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
from typing import Any, List, Optional, Sequence, Tuple

from . import errors as E
from .buffers import ScatterBuffer, _tensor_bytes, readable_bytes

__all__ = ["load", "native_status", "NativeClient", "NativeNamespace", "ForkedClientError", "ABI"]

ABI = 4  # cmd/libstrata's abiVersion
_ERR_LEN = 4096
_log = logging.getLogger("strata_client.native")


ForkedClientError = E.ForkedClientError


class _Seg(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", ctypes.c_uint64)]


_u64p = ctypes.POINTER(ctypes.c_uint64)


class _Lib:
    def __init__(self, path: str):
        self.path = path
        self.pid = os.getpid()
        lib = ctypes.CDLL(path)  # CDLL: the GIL is released around every call
        lib.strata_abi.restype = ctypes.c_int
        abi = lib.strata_abi()
        if abi != ABI:
            raise OSError(f"{path}: native ABI {abi}, this strata_client speaks {ABI} (rebuild: scripts/buildnative.sh)")
        c = ctypes
        lib.strata_dial.argtypes = [c.c_char_p, _u64p, c.c_char_p, c.c_size_t]
        lib.strata_dial.restype = c.c_int
        lib.strata_close.argtypes = [c.c_uint64]
        lib.strata_close.restype = None
        lib.strata_open.argtypes = [c.c_uint64, c.c_char_p, c.c_size_t, c.c_int64, _u64p, c.c_char_p, c.c_size_t]
        lib.strata_open.restype = c.c_int
        lib.strata_ns_free.argtypes = [c.c_uint64]
        lib.strata_ns_free.restype = None
        lib.strata_get.argtypes = [c.c_uint64, c.c_int, c.c_char_p, c.POINTER(c.c_int32), c.POINTER(_Seg), c.c_char_p,
                                   c.c_int64, c.POINTER(c.c_uint8), c.POINTER(c.c_int), c.c_char_p, c.c_size_t]
        lib.strata_get.restype = c.c_int
        lib.strata_put.argtypes = [c.c_uint64, c.c_int, c.c_char_p, c.c_char_p, c.POINTER(c.c_uint8),
                                   c.POINTER(c.c_uint32), c.POINTER(c.c_uint32), c.POINTER(c.c_double),
                                   c.c_char_p, c.POINTER(c.c_uint32), c.POINTER(c.c_int32), c.POINTER(_Seg), c.c_int64, c.c_int,
                                   c.POINTER(c.c_int32), c.c_char_p, c.c_size_t, c.c_char_p, c.c_size_t]
        lib.strata_put.restype = c.c_int
        lib.strata_lookup.argtypes = [c.c_uint64, c.c_int, c.c_char_p, c.c_int64, c.POINTER(c.c_uint8),
                                      c.POINTER(c.c_int), c.c_char_p, c.c_size_t]
        lib.strata_lookup.restype = c.c_int
        lib.strata_stats.argtypes = [c.c_uint64, c.c_char_p, c.c_size_t]
        lib.strata_stats.restype = None
        self.lib = lib



_lock = threading.Lock()
_loaded: Optional[_Lib] = None
_status = "not loaded yet"


def _default_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "libstrata.so")


def load() -> Optional[_Lib]:
    """The native library, loaded once per process; None (with the reason
    in native_status() and logged once) when it is off, missing, of
    another ABI, or was loaded before this process forked."""
    global _loaded, _status
    with _lock:
        if _loaded is not None:
            if _loaded.pid != os.getpid():
                if not _status.startswith("inherited"):
                    _status = (f"inherited across fork from process {_loaded.pid}: this process uses the Python planes "
                               "(start workers with spawn, or make no Client before forking, for the native plane)")
                    _log.warning("strata: native plane off: %s", _status)
                return None
            return _loaded
        if _status != "not loaded yet" and not _status.startswith("missing"):
            return None
        if os.environ.get("STRATA_NATIVE", "1") == "0":
            _status = "off (STRATA_NATIVE=0)"
            return None
        path = os.environ.get("STRATA_NATIVE_LIB") or _default_path()
        if not os.path.exists(path):
            missing = f"missing: {path} (pip install ./python builds it; in a checkout, scripts/buildnative.sh)"
            if _status != missing:
                _log.warning("strata: native plane off, batches run in Python: %s", missing)
            _status = missing
            return None  # looked for again by the next Client
        try:
            _loaded = _Lib(path)
        except OSError as e:
            _status = f"unusable: {e}"
            _log.error("strata: native plane off, batches run in Python: %s", _status)
            return None
        _status = f"loaded: {path}"
        return _loaded


def native_status() -> str:
    """What load() found: "loaded: <path>", or why the native plane is off."""
    return _status


def _reason(err: Any) -> Tuple[str, str]:
    """(reason, message) of a failed call's err buffer ("REASON\tmessage")."""
    text = err.raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    reason, _, msg = text.partition("\t")
    return reason, msg


def _error(op: str, err: Any) -> E.StrataError:
    """The exception of a failed call's err buffer."""
    return error_for(op, *_reason(err))


def error_for(op: str, reason: str, msg: str) -> E.StrataError:
    """The exception of a native call's error: by its reason, as a node's
    refusal of that reason raises on the Python planes."""
    cls = E.exception_for_reason(reason)
    if reason == "DEADLINE":
        cls = E.DeadlineError
    elif reason == "CLOSED":
        cls = E.ClosedError
    elif reason == "PROTOCOL":
        cls = E.ProtocolError
    return cls(f"{op}: native: {msg}", reason=reason)


class _Buffers:
    """Per page, its pieces as (pointer, length) for the library, and the
    objects that must stay alive while it runs."""

    def __init__(self, bufs: Sequence[Any], writable: bool):
        import numpy as np

        n = len(bufs)
        self.counts = (ctypes.c_int32 * n)()
        segs: List[Tuple[int, int]] = []
        self.keep: List[Any] = []
        self.sizes: List[int] = []
        for i, b in enumerate(bufs):
            pieces = _pieces(b, writable, i)
            total = 0
            for p in pieces:
                a = np.frombuffer(p, dtype=np.uint8) if not isinstance(p, np.ndarray) else p.reshape(-1).view(np.uint8)
                if writable and not a.flags.writeable:
                    raise E.InvalidArgumentError(f"get: buffer {i} is read-only")
                if not a.flags.c_contiguous:
                    raise E.InvalidArgumentError(f"buffer {i} is not contiguous")
                self.keep.append(a)
                segs.append((a.__array_interface__["data"][0], a.nbytes))
                total += a.nbytes
            self.counts[i] = len(pieces)
            self.sizes.append(total)
        self.segs = (_Seg * max(1, len(segs)))(*segs)


def _pieces(b: Any, writable: bool, i: int) -> List[Any]:
    """Buffer b's pieces, in place. A destination (writable) that is not
    contiguous is refused: a contiguous copy would be filled instead of
    it. Page data may be copied to make it contiguous (as readable_bytes
    does for the Python planes)."""
    if isinstance(b, ScatterBuffer):
        return list(b.segments)
    if hasattr(b, "numpy") and hasattr(b, "element_size"):  # torch.Tensor: its bytes, any dtype
        if b.is_contiguous() and getattr(b.device, "type", "cpu") == "cpu":
            return [_tensor_bytes(b.detach())]
        if writable:
            raise E.InvalidArgumentError(f"get: buffer {i} must be a contiguous CPU tensor")
        return [readable_bytes(b)]
    mv = memoryview(b)
    if not mv.contiguous:
        if writable:
            raise E.InvalidArgumentError(f"get: buffer {i} is not contiguous")
        return [memoryview(mv.tobytes())]
    return [mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv]





def _keys(keys: Sequence[bytes]) -> bytes:
    return b"".join(keys)


class NativeClient:
    """The Go client of one Client: dialed with its addresses, token and
    TLS files."""

    def __init__(self, lib: _Lib, opts: dict):
        self._lib = lib
        self._h = ctypes.c_uint64(0)
        err = ctypes.create_string_buffer(_ERR_LEN)
        if lib.lib.strata_dial(json.dumps(opts).encode(), ctypes.byref(self._h), err, _ERR_LEN):
            raise _error("dial", err)
        self._pid = os.getpid()
        self._closed = False

    def _check(self) -> None:
        if os.getpid() != self._pid:
            raise ForkedClientError(
                f"strata client made in process {self._pid} used in forked process {os.getpid()}: make a new Client "
                "in the child")
        if self._closed:
            raise E.ClosedError("strata: client closed")

    def open(self, canonical: bytes, timeout: Optional[float]) -> "NativeNamespace":
        self._check()
        h = ctypes.c_uint64(0)
        err = ctypes.create_string_buffer(_ERR_LEN)
        if self._lib.lib.strata_open(self._h, canonical, len(canonical), _ms(timeout), ctypes.byref(h), err, _ERR_LEN):
            raise _error("open", err)
        return NativeNamespace(self, h)

    def stats(self) -> dict:
        self._check()
        buf = ctypes.create_string_buffer(1024)
        self._lib.lib.strata_stats(self._h, buf, 1024)
        return json.loads(buf.value.decode())

    def close(self) -> None:
        if self._closed or os.getpid() != self._pid:
            return  # a forked child's copy: the parent closes it
        self._closed = True
        self._lib.lib.strata_close(self._h)


def _ms(timeout: Optional[float]) -> int:
    return 0 if timeout is None else max(1, int(timeout * 1000))


class NativeNamespace:
    """A namespace opened through the native client."""

    def __init__(self, c: NativeClient, h: ctypes.c_uint64):
        self._c = c
        self._h = h

    def get(self, keys: Sequence[bytes], bufs: Sequence[Any], lease: Optional[Tuple[int, dict]],
            timeout: Optional[float], page_bytes: int) -> Tuple[List[bool], Optional[E.StrataError], int]:
        """Reads keys into bufs in one call. Returns (found per key, the
        call's error or None, how many pages failed their checksum)."""
        self._c._check()
        n = len(keys)
        b = _Buffers(bufs, writable=True)
        for i, size in enumerate(b.sizes):
            if size < page_bytes:
                raise E.InvalidArgumentError(f"get: buffer {i} has {size} bytes, pages are {page_bytes}")
        found = (ctypes.c_uint8 * n)()
        err = ctypes.create_string_buffer(_ERR_LEN)
        spec = None
        if lease is not None:
            pages, by_node = lease
            spec = json.dumps({"pages": pages, "leases": [{"node": node, "id": ls[0][0], "expires_ms": ls[0][1]}
                                                          for node, ls in by_node.items() if ls]}).encode()
        bad = ctypes.c_int(0)
        rc = self._c._lib.lib.strata_get(self._h, n, _keys(keys), b.counts, b.segs, spec, _ms(timeout), found,
                                         ctypes.byref(bad), err, _ERR_LEN)
        out = [bool(x) for x in found]
        if not rc:
            return out, None, 0
        reason, msg = _reason(err)
        if reason == "CHECKSUM":  # pages that did not verify: misses, counted
            return out, None, bad.value
        return out, error_for("get", reason, msg), bad.value

    def lookup(self, keys: Sequence[bytes], timeout: Optional[float]) -> Tuple[int, List[bool], Optional[E.StrataError]]:
        """Which keys are present, without a lease, in one call: (hit
        prefix, present per key, the call's error or None)."""
        self._c._check()
        n = len(keys)
        present = (ctypes.c_uint8 * n)()
        hit = ctypes.c_int(0)
        err = ctypes.create_string_buffer(_ERR_LEN)
        rc = self._c._lib.lib.strata_lookup(self._h, n, _keys(keys), _ms(timeout), present, ctypes.byref(hit), err,
                                            _ERR_LEN)
        out = [bool(x) for x in present]
        return hit.value, out, _error("lookup", err) if rc else None

    def put(self, keys: Sequence[bytes], parents: Sequence[Optional[bytes]], depths: Sequence[int],
            chain_depths: Sequence[int], costs: Sequence[float], datas: Sequence[Any],
            timeout: Optional[float], page_bytes: int,
            events: Optional[Sequence[bytes]] = None,
            skip_present: bool = False) -> Tuple[List[Tuple[int, str]], Optional[E.StrataError]]:
        """Publishes pages in one call: per page (status, reason), and the
        call's error or None. events, when given, is each page's event info
        in the frame encoding (frame.event_info; b"": none). skip_present:
        the call looks the pages up first and answers EXISTS for those
        present, neither read nor sent."""
        self._c._check()
        n = len(keys)
        b = _Buffers(datas, writable=False)
        for i, size in enumerate(b.sizes):
            if size != page_bytes:
                raise E.InvalidArgumentError(f"put page {i}: {size} bytes, namespace pages are {page_bytes}")
        zero = bytes(32)
        par = b"".join(p if p else zero for p in parents)
        has = (ctypes.c_uint8 * n)(*[1 if p else 0 for p in parents])
        d = (ctypes.c_uint32 * n)(*depths)
        cd = (ctypes.c_uint32 * n)(*chain_depths)
        cs = (ctypes.c_double * n)(*costs)
        st = (ctypes.c_int32 * n)()
        rlen = 256 * n + 64
        reasons = ctypes.create_string_buffer(rlen)
        err = ctypes.create_string_buffer(_ERR_LEN)
        evs, evlens = None, None
        if events is not None:
            evs, evlens = b"".join(events), (ctypes.c_uint32 * n)(*[len(e) for e in events])
        rc = self._c._lib.lib.strata_put(self._h, n, _keys(keys), par, has, d, cd, cs, evs, evlens, b.counts, b.segs,
                                         _ms(timeout), 1 if skip_present else 0, st, reasons, rlen, err, _ERR_LEN)
        why = reasons.value.decode("utf-8", "replace").split("\n")
        out = [(int(st[i]), why[i] if i < len(why) else "") for i in range(n)]
        return out, _error("put", err) if rc else None

    def close(self) -> None:
        if os.getpid() == self._c._pid and not self._c._closed:
            self._c._lib.lib.strata_ns_free(self._h)
