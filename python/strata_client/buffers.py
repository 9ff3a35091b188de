"""Buffers for page data: caller destinations for reads (bytes-like,
numpy arrays, CPU torch tensors of any dtype, scatter lists of segments) and
read-only views of page data for writes.

Torch tensors are viewed as their bytes (``tensor.view(torch.uint8)``) before
numpy sees them: numpy has no bfloat16 or float8 type, so ``.numpy()`` on a
bf16 or fp8 tensor (the dtypes of SGLang's host KV pools) raises. A view
copies nothing; only a non-contiguous tensor given as write data is copied
(once) into a contiguous one."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["writable_view", "readable_bytes", "ScatterBuffer", "dest"]


def writable_view(buf: Any) -> memoryview:
    """A writable byte view of a caller buffer: bytearray, memoryview, numpy
    array, CPU torch tensor (contiguous), or anything with the buffer
    protocol."""
    if isinstance(buf, memoryview):
        mv = buf
    elif hasattr(buf, "__array_interface__") or isinstance(buf, (bytearray,)):
        mv = memoryview(buf)
    elif hasattr(buf, "numpy") and hasattr(buf, "element_size"):  # torch.Tensor
        t = buf
        if getattr(t, "device", None) is not None and getattr(t.device, "type", "cpu") != "cpu":
            raise TypeError("destination tensor must be on the CPU")
        if not t.is_contiguous():
            raise TypeError("destination tensor must be contiguous")
        mv = memoryview(_tensor_bytes(t.detach()))
    else:
        mv = memoryview(buf)
    if mv.readonly:
        raise TypeError("destination buffer is read-only")
    if not mv.contiguous:
        raise TypeError("destination buffer must be contiguous")
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def readable_bytes(data: Any) -> memoryview:
    """A read-only byte view of page data (bytes-like, numpy, CPU torch; a
    ScatterBuffer's segments joined, a copy)."""
    if isinstance(data, ScatterBuffer):
        return memoryview(b"".join(bytes(s) for s in data.segments))
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
    elif hasattr(data, "numpy") and hasattr(data, "element_size"):  # torch.Tensor
        t = data.detach()
        if getattr(t.device, "type", "cpu") != "cpu":
            t = t.cpu()
        mv = memoryview(_tensor_bytes(t.contiguous()))
    else:
        mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        if not mv.contiguous:
            mv = memoryview(mv.tobytes())
        else:
            mv = mv.cast("B")
    return mv


def _tensor_bytes(t: Any) -> Any:
    """The bytes of a contiguous CPU torch tensor as a 1-D uint8 numpy array
    sharing its memory (any dtype: bf16 and fp8 included)."""
    import torch  # only reached with a torch tensor in hand

    flat = t.reshape(-1)
    if flat.dtype != torch.uint8:
        flat = flat.view(torch.uint8)
    return flat.numpy()


class ScatterBuffer:
    """A page destination made of several segments (e.g. the K and V parts
    of one page in an engine's host pool), filled in order."""

    def __init__(self, segments: Sequence[Any]):
        self.segments = [writable_view(s) for s in segments]
        self._len = sum(len(s) for s in self.segments)

    @classmethod
    def of_data(cls, segments: Sequence[Any]) -> "ScatterBuffer":
        """Page data to put made of segments, read-only ones (bytes)
        allowed: the native plane gathers them in the call that publishes
        the page; the Python planes join them (readable_bytes)."""
        b = cls.__new__(cls)
        b.segments = [readable_bytes(s) for s in segments]
        b._len = sum(len(s) for s in b.segments)
        return b

    def __len__(self) -> int:
        return self._len

    def write(self, off: int, data: Any) -> None:
        data = memoryview(data)
        pos = 0
        base = 0
        for seg in self.segments:
            end = base + len(seg)
            if off + pos < end and pos < len(data):
                start = off + pos - base
                n = min(len(seg) - start, len(data) - pos)
                seg[start:start + n] = data[pos:pos + n]
                pos += n
            base = end
            if pos >= len(data):
                return
        if pos < len(data):
            raise ValueError("write past the end of the scatter buffer")


class _Flat:
    __slots__ = ("mv",)

    def __init__(self, mv: memoryview):
        self.mv = mv

    def __len__(self) -> int:
        return len(self.mv)

    def write(self, off: int, data: Any) -> None:
        self.mv[off:off + len(data)] = data


def dest(buf: Any):
    if isinstance(buf, ScatterBuffer):
        return buf
    return _Flat(writable_view(buf))
