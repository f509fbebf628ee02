"""The point-to-point and collective calls of :mod:`labs.dist` (torch's names and arguments).

Each one runs on the emulator inside an emulated rank (:mod:`._p2p`, :mod:`._ops`) and calls
``torch.distributed`` otherwise (:mod:`._torchrun`).  :mod:`labs.dist` re-exports them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from . import _emulator as _emu
from . import _exchange as _ex
from . import _ops, _p2p, _shards
from . import _torchrun as _tr
from ._common import ReduceOp, Work

__all__ = [
    "send", "recv", "isend", "irecv", "broadcast", "all_reduce", "reduce", "all_gather",
    "all_gather_into_tensor", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all", "barrier", "region",
]  # fmt: skip


def send(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0,
         group_dst: int | None = None) -> None:  # fmt: skip
    """Send ``tensor`` to rank ``dst``.  Emulated: buffered (copies the data and returns)."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.send(tensor, dst, group, tag, group_dst)
    _p2p.send(ctx, tensor, dst, group, tag, group_dst)
    return None


def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
         group_src: int | None = None) -> int:  # fmt: skip
    """Receive into ``tensor`` (in place) from ``src`` (any rank if None); return the sender."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.recv(tensor, src, group, tag, group_src)
    return _p2p.recv(ctx, tensor, src, group, tag, group_src)


def isend(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0,
          group_dst: int | None = None) -> Work:  # fmt: skip
    """Start sending ``tensor`` to ``dst``; returns a :class:`Work` (don't modify before wait)."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.isend(tensor, dst, group, tag, group_dst)
    return _p2p.isend(ctx, tensor, dst, group, tag, group_dst)


def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
          group_src: int | None = None) -> Work:  # fmt: skip
    """Start receiving into ``tensor``; ``wait()`` on the returned :class:`Work` fills it."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.irecv(tensor, src, group, tag, group_src)
    return _p2p.irecv(ctx, tensor, src, group, tag, group_src)


def broadcast(tensor: Any, src: int | None = None, group: Any = None, async_op: bool = False,
              group_src: int | None = None) -> Work | None:  # fmt: skip
    """Copy ``tensor`` of rank ``src`` into ``tensor`` of every rank of the group."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.broadcast(tensor, src, group, async_op, group_src)
    return _ops.broadcast(ctx, tensor, src, group, async_op, group_src)


def all_reduce(tensor: Any, op: Any = ReduceOp.SUM, group: Any = None,
               async_op: bool = False) -> Work | None:  # fmt: skip
    """Replace ``tensor`` on every rank by ``op`` over the group's tensors (same shape)."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.all_reduce(tensor, op, group, async_op)
    return _ops.all_reduce(ctx, tensor, op, group, async_op)


def reduce(tensor: Any, dst: int | None = None, op: Any = ReduceOp.SUM, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Work | None:  # fmt: skip
    """Like :func:`all_reduce`, but only rank ``dst``'s tensor receives the result; as under gloo,
    the other ranks' tensors are left holding partial sums (NCCL leaves them unchanged): read the
    result on ``dst`` only."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.reduce(tensor, dst, op, group, async_op, group_dst)
    return _ops.reduce(ctx, tensor, dst, op, group, async_op, group_dst)


def all_gather(tensor_list: list[Any], tensor: Any, group: Any = None,
               async_op: bool = False) -> Work | None:  # fmt: skip
    """Fill ``tensor_list[i]`` with group rank i's ``tensor`` (list length = group size)."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.all_gather(tensor_list, tensor, group, async_op)
    return _shards.all_gather(ctx, tensor_list, tensor, group, async_op)


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None,
                           async_op: bool = False) -> Work | None:  # fmt: skip
    """Concatenate the group's ``input_tensor`` (in rank order) into ``output_tensor``.

    ``output_tensor`` is the inputs concatenated along dim 0, shape
    ``(group size * input.shape[0], *input.shape[1:])`` (gloo's rule; a 0-d input gives
    ``(group size,)``).
    """
    ctx = _emu.current()
    if ctx is None:
        return _tr.all_gather_into_tensor(output_tensor, input_tensor, group, async_op)
    return _shards.all_gather_into_tensor(ctx, output_tensor, input_tensor, group, async_op)


def gather(tensor: Any, gather_list: list[Any] | None = None, dst: int | None = None,
           group: Any = None, async_op: bool = False,
           group_dst: int | None = None) -> Work | None:  # fmt: skip
    """Rank ``dst`` receives every rank's ``tensor`` into ``gather_list`` (None elsewhere)."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.gather(tensor, gather_list, dst, group, async_op, group_dst)
    return _shards.gather(ctx, tensor, gather_list, dst, group, async_op, group_dst)


def scatter(tensor: Any, scatter_list: list[Any] | None = None, src: int | None = None,
            group: Any = None, async_op: bool = False,
            group_src: int | None = None) -> Work | None:  # fmt: skip
    """Group rank i receives ``scatter_list[i]`` of rank ``src`` into ``tensor``."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.scatter(tensor, scatter_list, src, group, async_op, group_src)
    return _shards.scatter(ctx, tensor, scatter_list, src, group, async_op, group_src)


def reduce_scatter(output: Any, input_list: list[Any], op: Any = ReduceOp.SUM,
                   group: Any = None, async_op: bool = False) -> Work | None:  # fmt: skip
    """Group rank j receives ``op`` over every rank's ``input_list[j]`` into ``output``."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.reduce_scatter(output, input_list, op, group, async_op)
    return _shards.reduce_scatter(ctx, output, input_list, op, group, async_op)


def reduce_scatter_tensor(output: Any, input: Any, op: Any = ReduceOp.SUM, group: Any = None,
                          async_op: bool = False) -> Work | None:  # fmt: skip
    """Reduce ``input`` over ranks; rank j keeps slice j.  ``input`` is group-size outputs
    concatenated along dim 0, shape ``(group size * output.shape[0], *output.shape[1:])``."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.reduce_scatter_tensor(output, input, op, group, async_op)
    return _shards.reduce_scatter_tensor(ctx, output, input, op, group, async_op)


def all_to_all(output_tensor_list: list[Any], input_tensor_list: list[Any], group: Any = None,
               async_op: bool = False) -> Work | None:  # fmt: skip
    """Rank j's ``output_tensor_list[i]`` receives rank i's ``input_tensor_list[j]``."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.all_to_all(output_tensor_list, input_tensor_list, group, async_op)
    return _ex.all_to_all(ctx, output_tensor_list, input_tensor_list, group, async_op)


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Return once every rank of the group has called ``barrier``."""
    ctx = _emu.current()
    if ctx is None:
        return _tr.barrier(group, async_op)
    return _ops.barrier(ctx, group, async_op)


@contextlib.contextmanager
def region(name: str) -> Iterator[None]:
    """Record the enclosed code as a compute span named ``name`` in the emulated trace.

    Timelines (:meth:`Trace.timeline`, :func:`labs.dist.alpha_beta.predict`) then show compute
    beside communication.  Outside an emulated rank it does nothing.
    """
    ctx = _emu.current()
    if ctx is None:
        yield
        return
    t0 = ctx.now()
    try:
        yield
    finally:
        ctx.record(name, (), 0, 0, t0, (ctx.rank,), "compute", 0)
