"""The rest of the ``torch.distributed`` API, so that ordinary programs run on emulated ranks:
batched point-to-point (``P2POp``, ``batch_isend_irecv``), ``all_to_all_single`` with uneven
splits, torch 2.13's single-tensor names (``all_gather_single``, ``reduce_scatter_single``) and
the object collectives.  Each function has torch's name, arguments and semantics; inside an
emulated rank it runs on the emulator, otherwise it calls ``torch.distributed``.  Process groups
are in :mod:`labs.dist.compat`.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch
import torch.distributed as tdist
from torch.distributed import distributed_c10d as dc10d

from . import _emulator as _emu
from . import _exchange as _ex
from ._common import Work
from .compat import get_global_rank, get_group_rank

__all__ = [
    "P2POp", "batch_isend_irecv", "all_to_all_single", "all_gather_object",
    "broadcast_object_list", "gather_object", "scatter_object_list", "send_object_list",
    "recv_object_list", "all_gather_single", "reduce_scatter_single",
]  # fmt: skip


# -- batched point to point ---------------------------------------------------------------------
class P2POp(tdist.P2POp):
    """One operation of :func:`batch_isend_irecv`: ``op`` is ``isend`` or ``irecv`` (of
    ``labs.dist`` or ``torch.distributed``); the peer is given as ``peer`` (a global rank) or
    ``group_peer`` (a rank within ``group``), and, as in torch, both attributes are filled.

    A subclass of ``torch.distributed.P2POp``, so that torch's own ``batch_isend_irecv`` and the
    schedules of ``torch.distributed.pipelining`` (which call ``op.op(tensor, group=...,
    group_dst=op.group_peer)``) accept it, emulated and under torchrun.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> P2POp:
        return object.__new__(cls)

    def __init__(self, op: Any, tensor: Any, peer: int | None = None, group: Any = None,
                 tag: int = 0, group_peer: int | None = None):  # fmt: skip
        name = getattr(op, "__name__", "")
        if name not in ("isend", "irecv") or not callable(op):
            raise ValueError(
                "Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                f"``torch.distributed.irecv`` (or labs.dist's), got {op!r}"
            )
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"P2POp: tensor must be a torch.Tensor, got {type(tensor).__name__}")
        if (peer is None) == (group_peer is None):
            raise ValueError(
                "Must specify global_rank or group_rank" if peer is None else
                "Can't specify both group_rank and global_rank"
            )  # fmt: skip
        self.op, self.tensor, self.tag, self.kind = op, tensor, tag, name
        if _emu.current() is None:  # under torchrun: torch's rules, torch's default group
            self.group = dc10d._group_or_default_group(group)
        else:
            self.group = group
        if peer is not None:
            self.peer, self.group_peer = peer, get_group_rank(self.group, peer)
        else:
            self.peer, self.group_peer = get_global_rank(self.group, group_peer), group_peer

    def __repr__(self) -> str:
        return (f"P2POp({self.kind}, peer={self.peer}, group_peer={self.group_peer}, "
                f"tag={self.tag}, {tuple(self.tensor.shape)})")  # fmt: skip


def batch_isend_irecv(p2p_op_list: list[Any]) -> list[Any]:
    """Start every operation of the list; returns one work handle per operation.

    As in torch, every operation must use the same group, and each one runs as
    ``op.op(tensor, group=..., tag=..., group_dst=/group_src=op.group_peer)``.
    """
    if _emu.current() is None:
        return tdist.batch_isend_irecv(p2p_op_list)
    if isinstance(p2p_op_list, list) and not p2p_op_list:
        raise ValueError("batch_isend_irecv: expected a non-empty list of P2POp")
    if not isinstance(p2p_op_list, list) or not all(
        isinstance(o, tdist.P2POp) for o in p2p_op_list
    ):
        raise ValueError(
            "Invalid ``p2p_op_list``. Each op is expected to to be of type "
            "``torch.distributed.P2POp``."
        )
    if not all(o.group == p2p_op_list[0].group for o in p2p_op_list):
        raise ValueError("All ops need to use the same group.")
    works = []
    for o in p2p_op_list:
        key = "group_dst" if "send" in getattr(o.op, "__name__", "") else "group_src"
        work = o.op(o.tensor, group=o.group, tag=o.tag, **{key: o.group_peer})
        if work:
            works.append(work)
    return works


def all_to_all_single(output: Any, input: Any, output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None, group: Any = None,
                      async_op: bool = False) -> Work | None:  # fmt: skip
    """Split ``input`` along dim 0 (evenly, or by ``input_split_sizes``) and send part j to group
    rank j; ``output`` receives, in rank order, the parts sent to this rank
    (``output_split_sizes[i]`` rows from rank i).  Zero-size parts are allowed."""
    ctx = _emu.current()
    if ctx is None:
        w = tdist.all_to_all_single(output, input, output_split_sizes, input_split_sizes,
                                    group=group, async_op=async_op)  # fmt: skip
        return Work(w.wait) if async_op else None
    return _ex.all_to_all_single(ctx, output, input, output_split_sizes, input_split_sizes,
                                 group, async_op)  # fmt: skip


def all_gather_single(output_tensor: Any, input_tensor: Any, group: Any = None,
                      async_op: bool = False) -> Work | None:  # fmt: skip
    """torch 2.13's name for :func:`labs.dist.all_gather_into_tensor` (same semantics)."""
    from . import all_gather_into_tensor

    return all_gather_into_tensor(output_tensor, input_tensor, group, async_op)


def reduce_scatter_single(output: Any, input: Any, op: Any = None, group: Any = None,
                          async_op: bool = False) -> Work | None:  # fmt: skip
    """torch 2.13's name for :func:`labs.dist.reduce_scatter_tensor` (same semantics)."""
    from . import ReduceOp, reduce_scatter_tensor

    return reduce_scatter_tensor(output, input, ReduceOp.SUM if op is None else op, group,
                                 async_op)  # fmt: skip


# -- object collectives -------------------------------------------------------------------------
def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """``object_list[i]`` <- a copy of group rank i's ``obj`` (objects are pickled)."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.all_gather_object(object_list, obj, group)
    return _ex.all_gather_object(ctx, object_list, obj, group)


def broadcast_object_list(object_list: list[Any], src: int | None = None, group: Any = None,
                          device: Any = None, group_src: int | None = None) -> None:  # fmt: skip
    """Replace the items of ``object_list`` by copies of the src rank's items."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.broadcast_object_list(object_list, src, group, device, group_src=group_src)
    return _ex.broadcast_object_list(ctx, object_list, src, group, group_src)


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int | None = None,
                  group: Any = None, group_dst: int | None = None) -> None:  # fmt: skip
    """On the dst rank, ``object_gather_list[i]`` <- a copy of group rank i's ``obj``."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.gather_object(obj, object_gather_list, dst, group, group_dst=group_dst)
    return _ex.gather_object(ctx, obj, object_gather_list, dst, group, group_dst)


def scatter_object_list(scatter_object_output_list: list[Any],
                        scatter_object_input_list: list[Any] | None = None,
                        src: int | None = None, group: Any = None,
                        group_src: int | None = None) -> None:  # fmt: skip
    """``scatter_object_output_list[0]`` <- a copy of the src rank's input list item [my rank]."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.scatter_object_list(scatter_object_output_list, scatter_object_input_list,
                                         src, group, group_src=group_src)  # fmt: skip
    return _ex.scatter_object_list(ctx, scatter_object_output_list, scatter_object_input_list,
                                   src, group, group_src)  # fmt: skip


def send_object_list(object_list: list[Any], dst: int | None = None, group: Any = None,
                     device: Any = None, group_dst: int | None = None) -> None:  # fmt: skip
    """Send a pickled copy of ``object_list`` to ``dst``."""
    from . import send

    ctx = _emu.current()
    if ctx is None:
        return tdist.send_object_list(object_list, dst, group, device, group_dst=group_dst)
    data = _ex.object_tensor(list(object_list), ctx.rank, "send_object_list")
    send(torch.tensor([data.numel()], dtype=torch.long), dst, group, group_dst=group_dst)
    send(data, dst, group, group_dst=group_dst)
    return None


def recv_object_list(object_list: list[Any], src: int | None = None, group: Any = None,
                     device: Any = None, group_src: int | None = None) -> int:  # fmt: skip
    """Fill ``object_list`` with the objects sent by ``src``; returns the sender's rank."""
    from . import recv

    ctx = _emu.current()
    if ctx is None:
        return tdist.recv_object_list(object_list, src, group, device, group_src=group_src)
    size = torch.zeros(1, dtype=torch.long)
    sender = recv(size, src, group, group_src=group_src)
    data = torch.empty(int(size), dtype=torch.uint8)
    recv(data, sender, group)
    objs = pickle.loads(data.numpy().tobytes())
    if len(objs) != len(object_list):
        raise ValueError(
            f"rank {ctx.rank}: recv_object_list: got {len(objs)} objects from rank {sender} but "
            f"object_list has length {len(object_list)}"
        )
    object_list[:] = objs
    return sender
