"""The order in which gloo combines the ranks' values, so that emulated results are bitwise gloo's.

Floating-point addition is commutative but not associative: ``(a + b) + c`` and ``a + (b + c)``
can differ in the last bit, and a sum over ranks depends on how the backend walks the ranks.
PyTorch's gloo backend (torch 2.13) reduces CPU tensors with gloo's *ring* algorithms
(``gloo/allreduce.cc``, ``gloo/reduce.cc``):

* the buffer is cut into ``p`` contiguous *chunks* (one per rank, each of ``segments per rank``
  segments of at most 1 MiB; :func:`allreduce_chunks`, :func:`reduce_chunks` give the element
  ranges, the last chunks may be short or empty);
* chunk ``c`` travels around the ring: rank ``c-1`` sends its own values to rank ``c-2``, which
  combines ``fn(its value, received)``, and so on down to rank ``c``, which holds the chunk's
  result; so element ``e`` of chunk ``c`` is folded in the rank order ``c-1, c-2, ..., c``
  (:func:`order`);
* all-reduce then passes the results around again; ``reduce`` sends each chunk to the root and
  leaves every other rank's tensor holding the partial fold it made (``AVG`` divides every
  rank's tensor by ``p``: SUM, then division, on all ranks);
* ``reduce_scatter_tensor`` all-reduces the whole input (one ring over ``p * k`` elements) and
  keeps slice ``j`` on rank ``j``; the list ``reduce_scatter`` all-reduces each rank's part ``j``
  separately (``p`` rings over ``k`` elements).

``fn`` is gloo's: ``a + b``, ``a * b``, ``std::max(a, b)`` (``b`` if ``a < b`` else ``a``: a NaN
in ``b`` is dropped, a NaN in ``a`` kept), ``std::min(a, b)`` (``b`` if ``b < a`` else ``a``)
with ``a`` the combining rank's value.  ``tests/dist_programs/p12_reduction_order.py`` checks the
emulated results bit for bit against gloo's at 3 and 4 ranks, for sizes from 1 element to
several MiB, in float32, bfloat16, float16 and float64, with NaNs and signed zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._common import ReduceOp

__all__ = ["MAX_SEGMENT", "allreduce_chunks", "reduce_chunks", "order", "fold", "divide"]

MAX_SEGMENT = 1 << 20  # gloo's kMaxSegmentSize (bytes), for allreduce and reduce alike


def _round_up(v: int, m: int) -> int:
    return v if v % m == 0 else v + m - v % m


def allreduce_chunks(n: int, itemsize: int, p: int) -> list[tuple[int, int]]:
    """Element ranges ``[lo, hi)`` of the ``p`` chunks of a ring all-reduce of ``n`` elements."""
    total = n * itemsize
    max_seg = itemsize * max(1, MAX_SEGMENT // itemsize)
    n_seg = _round_up(max(-(-total // max_seg), 2 * p), p)
    seg = _round_up(-(-total // n_seg), itemsize)
    per = (n_seg // p) * seg // itemsize
    return [(min(n, c * per), min(n, (c + 1) * per)) for c in range(p)]


def reduce_chunks(n: int, itemsize: int, p: int) -> tuple[list[tuple[int, int]], int, int]:
    """(chunks, segments per rank, elements per segment) of gloo's ring ``reduce``."""
    total = n * itemsize
    max_seg = itemsize * (MAX_SEGMENT // itemsize)
    seg = _round_up(min(-(-total // (2 * p)), max_seg), itemsize)
    n_seg = _round_up(max(-(-total // seg), 2 * p), p)
    nspr, seg_n = n_seg // p, seg // itemsize
    per = nspr * seg_n
    return [(min(n, c * per), min(n, (c + 1) * per)) for c in range(p)], nspr, seg_n


def order(c: int, p: int) -> list[int]:
    """The group ranks in the order chunk ``c`` folds them: ``c-1, c-2, ..., c`` (mod ``p``)."""
    return [(c - k) % p for k in range(1, p + 1)]


def _is_float(x: Any) -> bool:
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    return x.is_floating_point() or x.is_complex()


def combine(acc: Any, x: Any, op: ReduceOp) -> None:
    """``acc <- fn(x, acc)`` in place, gloo's ``fn`` with ``x`` the combining rank's value;
    numpy arrays or torch tensors of one shape and dtype."""
    if isinstance(acc, np.ndarray):
        if op is ReduceOp.SUM or op is ReduceOp.AVG:
            np.add(x, acc, out=acc)
        elif op is ReduceOp.PRODUCT:
            np.multiply(x, acc, out=acc)
        elif op is ReduceOp.MAX:
            if _is_float(acc):  # std::max(x, acc): acc only where x < acc
                np.copyto(acc, x, where=~np.less(x, acc))
            else:
                np.maximum(x, acc, out=acc)
        elif op is ReduceOp.MIN:
            if _is_float(acc):  # std::min(x, acc): acc only where acc < x
                np.copyto(acc, x, where=~np.less(acc, x))
            else:
                np.minimum(x, acc, out=acc)
        elif op is ReduceOp.BAND:
            np.bitwise_and(x, acc, out=acc)
        elif op is ReduceOp.BOR:
            np.bitwise_or(x, acc, out=acc)
        else:
            np.bitwise_xor(x, acc, out=acc)
        return
    if x.device != acc.device:
        x = x.to(acc.device)
    if op is ReduceOp.SUM or op is ReduceOp.AVG:
        torch.add(x, acc, out=acc)  # as gloo: bfloat16 in float, rounded once
    elif op is ReduceOp.PRODUCT:
        torch.mul(x, acc, out=acc)
    elif op is ReduceOp.MAX:
        acc.copy_(torch.where(x < acc, acc, x) if _is_float(acc) else torch.maximum(x, acc))
    elif op is ReduceOp.MIN:
        acc.copy_(torch.where(acc < x, acc, x) if _is_float(acc) else torch.minimum(x, acc))
    elif op is ReduceOp.BAND:
        acc.bitwise_and_(x)
    elif op is ReduceOp.BOR:
        acc.bitwise_or_(x)
    else:
        acc.bitwise_xor_(x)


def fold(acc: Any, xs: list[Any], op: ReduceOp, after: Any = None) -> None:
    """``acc`` (holding ``xs[0]``) <- the fold of ``xs`` in their order; ``after(i, acc)``
    is called after ``xs[i]`` was combined (the partial results ``reduce`` leaves behind)."""
    for i in range(1, len(xs)):
        combine(acc, xs[i], op)
        if after is not None:
            after(i, acc)


def divide(x: Any, p: int) -> None:
    """``x /= p`` as torch does it after gloo's SUM (``ReduceOp.AVG``)."""
    if isinstance(x, np.ndarray):
        np.divide(x, p, out=x, casting="unsafe")
    else:
        x.div_(p)
