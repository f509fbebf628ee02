"""How the last member of a collective combines the members' buffers: numpy views of the
tensors (numpy calls cost about a microsecond, torch calls several), reduced in cache-sized
blocks, with torch ops as the fallback for GPU tensors and dtypes numpy lacks (bfloat16).

The ranks are combined in the order gloo's ring algorithms combine them (:mod:`._ring`), so
sums, products, minima and maxima are bit for bit what ``torchrun`` with gloo gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._common import ReduceOp
from ._ring import allreduce_chunks, combine, divide, fold, order, reduce_chunks

# Large tensors are reduced in pieces that stay in a core's cache (256 KiB).  Not much smaller:
# every numpy call on a piece releases and re-takes the GIL, which the ranks reducing their parts
# side by side then hand back and forth.
CHUNK_BYTES = 1 << 18


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
def _flat(ts: list[torch.Tensor]) -> list[Any]:
    """1-d numpy views of contiguous tensors (complex ones as pairs of reals), or torch views."""
    ts = [torch.view_as_real(t) if t.is_complex() else t for t in ts]
    views = numpy_views(ts)
    return [v.reshape(-1) for v in views] if views is not None else [t.reshape(-1) for t in ts]


def _step(x: Any) -> int:
    """Elements per cache-sized block."""
    size = x.itemsize if isinstance(x, np.ndarray) else x.element_size()
    return max(1, CHUNK_BYTES // max(1, size))


def _copy(x: Any) -> Any:
    return x.copy() if isinstance(x, np.ndarray) else x.clone()


def _put(dst: Any, src: Any) -> None:
    if isinstance(dst, np.ndarray):
        np.copyto(dst, src)
    else:
        dst.copy_(src)


def _blocks(lo: int, hi: int, step: int):
    for s in range(lo, hi, step):
        yield s, min(hi, s + step)


def reduce_small(es: list[tuple[torch.Tensor, np.ndarray | None]], op: ReduceOp) -> None:
    """All-reduce in place the buffers of a group's members, given as (tensor, its numpy view
    or None) per member (see :func:`small_view`); all have one shape.  Runs when the last
    member arrives, while every member that handed in a view is blocked in the call."""
    views = [v for _, v in es]
    if any(v is None for v in views) or views[0].dtype.kind == "c":
        all_reduce_into([t for t, _ in es], op)  # a member handed in no view: make them now
    elif len(views) > 1:
        all_reduce_arrays([v.reshape(-1) for v in views], op)


def all_reduce_into(ts: list[torch.Tensor], op: ReduceOp, part: int | None = None) -> None:
    """All-reduce the (contiguous) tensors ``ts`` of a group's members in place, in gloo's
    order; ``part``: only that chunk (the members of a large all-reduce each do one)."""
    if len(ts) > 1:
        all_reduce_arrays(_flat(ts), op, part)


def all_reduce_arrays(xs: list[Any], op: ReduceOp, part: int | None = None) -> None:
    """:func:`all_reduce_into` on 1-d numpy arrays or torch tensors.  Overflow gives inf (NaN
    for inf - inf), as in torch, without numpy's warnings."""
    p, n = len(xs), xs[0].shape[0]
    size = xs[0].itemsize if isinstance(xs[0], np.ndarray) else xs[0].element_size()
    chunks = allreduce_chunks(n, size, p)
    shared = not isinstance(xs[0], np.ndarray) or _overlapping(xs)
    with np.errstate(all="ignore"):
        for c in range(p) if part is None else (part,):
            ranks = order(c, p)
            for s, e in _blocks(*chunks[c], _step(xs[0])):
                first = xs[ranks[0]][s:e]
                acc = _copy(first) if shared else first  # in place: its value is used first
                fold(acc, [xs[q][s:e] for q in ranks], op)
                if op is ReduceOp.AVG:
                    divide(acc, p)
                for q in range(p):
                    if shared or q != ranks[0]:
                        _put(xs[q][s:e], acc)


def reduce_to_root(ts: list[torch.Tensor], root: int, op: ReduceOp) -> None:
    """gloo's ``reduce``: member ``root`` gets the result; every other member's tensor is left
    holding the partial fold it made on the ring (gloo reduces in place; see :mod:`._ring`)."""
    p = len(ts)
    if p == 1:
        return
    xs = _flat(ts)
    n = xs[0].shape[0]
    size = xs[0].itemsize if isinstance(xs[0], np.ndarray) else xs[0].element_size()
    chunks, nspr, seg_n = reduce_chunks(n, size, p)
    with np.errstate(all="ignore"):
        for c in range(p):
            ranks = order(c, p)
            lo, hi = chunks[c]
            extra = min(hi, lo + max(0, nspr - 2) * seg_n)  # sent on once more at the end
            for s, e in _blocks(lo, hi, _step(xs[0])):
                acc = _copy(xs[ranks[0]][s:e])

                def keep(i: int, acc: Any, s: int = s, e: int = e, ranks: list = ranks) -> None:
                    if ranks[i] != root:
                        _put(xs[ranks[i]][s:e], acc)

                fold(acc, [xs[q][s:e] for q in ranks], op, keep)
                start = ranks[0]
                if start != root and s < extra:  # the start rank: fn(its value, the result)
                    again = _copy(acc[: min(e, extra) - s])
                    combine(again, xs[start][s : min(e, extra)], op)
                    _put(xs[start][s : min(e, extra)], again)
                _put(xs[root][s:e], acc)
        if op is ReduceOp.AVG:
            for x in xs:
                divide(x, p)


def all_reduce_slice(ins: list[torch.Tensor], op: ReduceOp, lo: int, hi: int,
                     out: torch.Tensor) -> None:  # fmt: skip
    """``out`` <- elements ``[lo, hi)`` of a ring all-reduce of the (flattened) ``ins``, in
    gloo's order; the inputs are not changed (reduce_scatter: :mod:`._ring`)."""
    p = len(ins)
    xs = _flat([x if x.is_contiguous() else x.contiguous() for x in ins])
    res = torch.empty(hi - lo, dtype=ins[0].dtype, device=ins[0].device)
    flat_out = _flat([res])[0]
    n = xs[0].shape[0]
    scale = n // max(1, ins[0].numel())  # 2 for complex tensors seen as pairs of reals
    lo, hi = lo * scale, hi * scale
    size = xs[0].itemsize if isinstance(xs[0], np.ndarray) else xs[0].element_size()
    with np.errstate(all="ignore"):
        for c, (clo, chi) in enumerate(allreduce_chunks(n, size, p)):
            ranks = order(c, p)
            for s, e in _blocks(max(lo, clo), min(hi, chi), _step(xs[0])):
                acc = _copy(xs[ranks[0]][s:e])
                fold(acc, [xs[q][s:e] for q in ranks], op)
                if op is ReduceOp.AVG:
                    divide(acc, p)
                _put(flat_out[s - lo : e - lo], acc)
    out.copy_(res.view(out.shape))


def _overlapping(arrays: list[np.ndarray]) -> bool:
    """True if any two of ``arrays`` may share memory (a bounds check, never a false no)."""
    return any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1 :])
