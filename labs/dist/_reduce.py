"""How the last member of a collective combines the members' buffers: numpy views of the
tensors (numpy calls cost about a microsecond, torch calls several), reduced in cache-sized
chunks, with torch ops as the fallback for GPU tensors and dtypes numpy lacks (bfloat16).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._common import ReduceOp, combine

# Large tensors are reduced in pieces that stay in a core's cache (256 KiB).  Not much smaller:
# every numpy call on a piece releases and re-takes the GIL, which the ranks reducing their parts
# side by side then hand back and forth.
CHUNK_BYTES = 1 << 18

_NP_OPS = {
    ReduceOp.SUM: np.add,
    ReduceOp.AVG: np.add,
    ReduceOp.PRODUCT: np.multiply,
    ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum,
    ReduceOp.BAND: np.bitwise_and,
    ReduceOp.BOR: np.bitwise_or,
    ReduceOp.BXOR: np.bitwise_xor,
}


# -- numpy views of tensors -------------------------------------------------------------------
class _Capsule:
    """Hands ``numpy.from_dlpack`` a DLPack capsule made beforehand (it wants an object)."""

    __slots__ = ("capsule",)

    def __init__(self, capsule: Any):
        self.capsule = capsule

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: only CPU tensors get here


def _fast_exporter() -> Callable[[torch.Tensor], Any] | None:
    """``torch.Tensor.__dlpack__`` without its Python-level overhead (about 2 of the 3 us it
    takes): torch's C exporter, after the checks ``__dlpack__`` makes itself.  None unless that
    private function exists here and gives a writable view (other torch versions then take the
    public route)."""
    to_dlpack = getattr(torch._C, "_to_dlpack_versioned", None)
    if to_dlpack is None:
        return None

    def export(t: torch.Tensor) -> Any:
        if t.requires_grad or t.is_conj() or t.is_neg() or t.layout != torch.strided:
            raise BufferError("cannot export this tensor through DLPack")
        return _Capsule(to_dlpack(t, dl_device=None, copy=None))

    try:
        probe = torch.zeros(2)
        np.from_dlpack(export(probe))[1] = 1.0
        return export if probe[1].item() == 1.0 else None
    except Exception:  # noqa: BLE001 - whatever went wrong, the public route works
        return None


_EXPORT = _fast_exporter() or (lambda t: t)  # numpy.from_dlpack(_EXPORT(t)) views t


def numpy_view(t: torch.Tensor) -> np.ndarray | None:
    """A zero-copy numpy view of a CPU tensor (numpy ops cost ~1 us, torch ops several), or None
    on a GPU or for a dtype numpy lacks (bfloat16).

    Made through DLPack rather than ``t.numpy()``, which would mark the tensor's storage as
    not resizable for good: a buffer that went through a collective must stay usable as under
    ``torch.distributed`` (FSDP frees and re-allocates weights with ``untyped_storage().resize_``).
    A view is only ever used while its tensor is alive and unchanged (inside the call that made
    it, or checked by :func:`small_view`).  Older numpy (1.26 to 2.1) imports DLPack buffers read-only;
    there the answer is None too, and the callers reduce with torch ops.
    """
    if not t.is_cpu:
        return None
    try:
        v = np.from_dlpack(_EXPORT(t))
    except (TypeError, ValueError, RuntimeError, BufferError):  # bfloat16, conj bit, ...
        return None
    return v if v.flags.writeable else None


def numpy_views(ts: list[torch.Tensor]) -> list[np.ndarray] | None:
    """Numpy views of all of ``ts``, or None if one has none (see :func:`numpy_view`)."""
    views = []
    for t in ts:
        v = numpy_view(t)
        if v is None:
            return None
        views.append(v)
    return views


def small_view(ctx: Any, t: torch.Tensor) -> np.ndarray | None:
    """:func:`numpy_view` of a small tensor, remembered in ``ctx.np_memo`` (``ctx``: the
    calling rank's ``RankContext``).

    Making a view costs microseconds, more than summing a few floats, and a rank usually
    all-reduces the same small tensor again and again (a loss, a gradient bucket), so each rank
    remembers the view of the tensor it reduced last.  The memo is used only while it still
    describes ``t`` exactly: the same object, at the same address, with the same shape and dtype
    (after ``t.data = ...``, ``t.set_(...)`` or ``t.resize_()`` a new view is made).
    """
    m = ctx.np_memo
    if m is not None and m[0] is t and m[1] == t.data_ptr() and m[2] == t.shape and m[3] is t.dtype:
        return m[4]
    v = numpy_view(t)
    if v is not None:
        ctx.np_memo = (t, t.data_ptr(), t.shape, t.dtype, v)
    return v


# -- combining buffers ------------------------------------------------------------------------
def reduce_small(es: list[tuple[torch.Tensor, np.ndarray | None]], op: ReduceOp) -> None:
    """All-reduce in place the buffers of a group's members, given as (tensor, its numpy view
    or None) per member (see :func:`small_view`); all have one shape.  Runs when the last
    member arrives, while every member that handed in a view is blocked in the call."""
    views = [v for _, v in es]
    for v in views:
        if v is None:  # a member handed in no view: make them all now (or use torch ops)
            ts = [t for t, _ in es]
            reduce_into(ts, ts, op)
            return
    if len(views) > 1:
        reduce_arrays(views, views, op)


def reduce_into(outs: list[torch.Tensor], ins: list[torch.Tensor], op: ReduceOp) -> None:
    """outs[k] <- op over ins, for every k; all have one shape; outs may alias ins.

    Large buffers go in cache-sized chunks (:func:`reduce_chunks`), so memory traffic stays
    close to reading the inputs and writing the outputs once.
    """
    if outs is ins and len(ins) == 1:  # a group of one: the result is the input
        return
    flat_in = numpy_views(ins)
    flat_out = flat_in if outs is ins else numpy_views(outs)
    if flat_in is None or flat_out is None:
        reduce_into_torch(outs, ins, op)
        return
    reduce_arrays(flat_out, flat_in, op)


def reduce_arrays(outs: list[np.ndarray], ins: list[np.ndarray], op: ReduceOp) -> None:
    """:func:`reduce_into` on numpy arrays.  Overflow gives inf (NaN for inf - inf), as in torch,
    without numpy's warnings."""
    with np.errstate(all="ignore"):
        if ins[0].nbytes <= CHUNK_BYTES:
            reduce_whole(outs, ins, op)
        else:
            flat_in = [x.reshape(-1) for x in ins]
            flat_out = flat_in if outs is ins else [x.reshape(-1) for x in outs]
            reduce_chunks(flat_out, flat_in, op)


def reduce_whole(outs: list[np.ndarray], ins: list[np.ndarray], op: ReduceOp) -> None:
    """:func:`reduce_arrays` for buffers that fit in cache: one pass, no chunk loop."""
    ufunc = _NP_OPS[op]
    # a copy, not ins[0] itself: ranks may (wrongly) pass one shared buffer, which must still
    # give p times its value; copy() also keeps 0-d inputs arrays (ufunc(a, b) gives a scalar)
    acc = ins[0].copy()
    for x in ins[1:]:
        ufunc(acc, x, out=acc)
    if op is ReduceOp.AVG:
        np.divide(acc, len(ins), out=acc, casting="unsafe")
    for y in outs:
        np.copyto(y, acc)


def reduce_chunks(flat_out: list[np.ndarray], flat_in: list[np.ndarray], op: ReduceOp) -> None:
    """:func:`reduce_arrays` for large 1-d buffers, chunk by chunk.

    In an all-reduce (the outputs are the inputs, no two of them overlapping) each chunk is
    accumulated in place in the first buffer and then copied to the others; otherwise in a
    scratch buffer, then copied to every output (one numpy pass more per chunk).
    """
    n = flat_in[0].size
    step = max(1, CHUNK_BYTES // max(1, flat_in[0].itemsize))
    ufunc = _NP_OPS[op]
    in_place = flat_out is flat_in and len(flat_in) > 1 and not _overlapping(flat_in)
    acc_buf = None if in_place else np.empty(min(n, step), dtype=flat_in[0].dtype)
    for s in range(0, n, step):
        e = min(n, s + step)
        if in_place:
            acc = flat_in[0][s:e]
            for x in flat_in[1:]:
                ufunc(acc, x[s:e], out=acc)
        else:
            acc = acc_buf[: e - s]
            if len(flat_in) == 1:
                np.copyto(acc, flat_in[0][s:e])
            else:
                ufunc(flat_in[0][s:e], flat_in[1][s:e], out=acc)
            for x in flat_in[2:]:
                ufunc(acc, x[s:e], out=acc)
        if op is ReduceOp.AVG:
            np.divide(acc, len(flat_in), out=acc, casting="unsafe")
        for y in flat_out[1:] if in_place else flat_out:
            np.copyto(y[s:e], acc)


def _overlapping(arrays: list[np.ndarray]) -> bool:
    """True if any two of ``arrays`` may share memory (a bounds check, never a false no)."""
    return any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1 :])


def reduce_into_torch(outs: list[torch.Tensor], ins: list[torch.Tensor], op: ReduceOp) -> None:
    """The same with torch ops, for GPU tensors and dtypes numpy lacks."""
    flat_in = [x.reshape(-1) for x in ins]
    flat_out = [x.reshape(-1) for x in outs]
    n = flat_in[0].numel()
    step = max(1, CHUNK_BYTES * 4 // max(1, ins[0].element_size()))
    for s in range(0, n, step):
        acc = flat_in[0][s : s + step].clone()
        for x in flat_in[1:]:
            combine(acc, x[s : s + step], op)
        if op is ReduceOp.AVG:
            acc.div_(len(ins))
        for y in flat_out:
            y[s : s + step].copy_(acc)
