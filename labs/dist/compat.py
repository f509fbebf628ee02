"""The rest of the ``torch.distributed`` API, so that ordinary programs run on emulated ranks.

Process-group set-up (``init_process_group``, ``destroy_process_group``, ``is_available``,
``get_backend``, ``group.WORLD``), group queries and subgroups (``get_process_group_ranks``,
``get_global_rank``, ``get_group_rank``, ``new_subgroups``, ``new_subgroups_by_enumeration``),
``monitored_barrier``, batched point-to-point (``P2POp``, ``batch_isend_irecv``),
``all_to_all_single`` with uneven splits, and the object collectives.  Each function has
torch's name, arguments and semantics; inside an emulated rank it runs on the emulator, otherwise
it calls ``torch.distributed``.  ``python -m labs.dist.run`` uses them to run an unmodified
``torch.distributed`` script on threads.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch
import torch.distributed as tdist
from torch.distributed import distributed_c10d as dc10d

from . import _emulator as _emu
from . import _exchange as _ex
from . import _torch_world
from ._common import Work

__all__ = [
    "init_process_group", "destroy_process_group", "is_available", "get_backend", "group",
    "get_process_group_ranks", "get_global_rank", "get_group_rank", "monitored_barrier",
    "new_subgroups", "new_subgroups_by_enumeration", "P2POp", "batch_isend_irecv",
    "all_to_all_single", "all_gather_object", "broadcast_object_list", "gather_object",
    "scatter_object_list", "send_object_list", "recv_object_list", "all_gather_single",
    "reduce_scatter_single",
]  # fmt: skip


class group:  # noqa: N801 - torch's name
    """``group.WORLD``: the default group.  ``None`` means the world in every call, as in torch
    before ``init_process_group``."""

    WORLD = None


def is_available() -> bool:
    """True: the emulator is always there (torch's answer under torchrun)."""
    return True


def init_process_group(backend: Any = None, init_method: Any = None, timeout: Any = None,
                       world_size: int = -1, rank: int = -1, store: Any = None,
                       group_name: str = "", pg_options: Any = None,
                       device_id: Any = None) -> None:  # fmt: skip
    """Join the default process group.

    Emulated: the ranks already exist; ``rank`` and ``world_size`` (when given) must agree with
    them.  ``backend`` ``"gloo"`` (or None, or ``"cpu:gloo"``) and ``"nccl"`` (one notice: no
    GPUs here) create torch's default process group on the emulated backend
    (:mod:`labs.dist.backend`), so that PyTorch's own DDP, FSDP2 and DTensor work; the other
    arguments are ignored.
    """
    ctx = _emu.current()
    if ctx is None:
        dc10d.init_process_group(backend, init_method, timeout, world_size, rank, store,
                                 group_name, pg_options, device_id=device_id)  # fmt: skip
        return
    for name, given, actual in (("rank", rank, ctx.rank), ("world_size", world_size,
                                                           ctx.world.size)):  # fmt: skip
        if given not in (-1, None) and int(given) != actual:
            raise ValueError(
                f"rank {ctx.rank}: init_process_group: {name}={given} but this emulated rank has "
                f"{name} {actual}; leave {name} out or pass the launched value"
            )
    _torch_world.init_emulated(ctx, backend, timeout)
    ctx.initialized = True


def destroy_process_group(group: Any = None) -> None:
    """Leave the process group (emulated: the rank's torch process groups are forgotten)."""
    ctx = _emu.current()
    if ctx is None:
        tdist.destroy_process_group(group)
        return
    if dc10d._world.default_pg is not None:
        dc10d.destroy_process_group(group)
    if group is None:
        ctx.initialized = False


def get_backend(group: Any = None) -> str:
    """``"gloo"`` on emulated ranks (CPU tensors, every gloo collective)."""
    if _emu.current() is None:
        return tdist.get_backend(group)
    return "gloo"


def get_process_group_ranks(group: Any) -> list[int]:
    """Global ranks of ``group`` in group-rank order."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.get_process_group_ranks(group)
    if group is None:
        return list(range(ctx.world.size))
    return list(getattr(group, "_labs_group", group).ranks)


def get_global_rank(group: Any, group_rank: int) -> int:
    """Global rank of group rank ``group_rank`` of ``group``."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.get_global_rank(group, group_rank)
    ranks = get_process_group_ranks(group)
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {ranks}")
    return ranks[group_rank]


def get_group_rank(group: Any, global_rank: int) -> int:
    """Rank of ``global_rank`` within ``group``."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.get_group_rank(group, global_rank)
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {ranks}")
    return ranks.index(global_rank)


def monitored_barrier(group: Any = None, timeout: Any = None, wait_all_ranks: bool = False):
    """A barrier that names the missing ranks on failure (the emulator's barrier always does)."""
    from . import barrier

    if _emu.current() is None:
        return tdist.monitored_barrier(group, timeout, wait_all_ranks)
    return barrier(group)


def new_subgroups(group_size: int | None = None, group: Any = None, timeout: Any = None,
                  backend: Any = None, pg_options: Any = None, group_desc: Any = None):  # fmt: skip
    """Split the world into consecutive groups of ``group_size`` ranks; returns
    ``(this rank's subgroup, all subgroups)``."""
    ctx = _emu.current()
    if ctx is None:
        return tdist.new_subgroups(group_size, group, timeout, backend, pg_options)
    n = ctx.world.size
    if group_size is None or group_size <= 0 or n % group_size:
        raise ValueError(
            f"rank {ctx.rank}: new_subgroups: group_size must be a positive divisor of the world "
            f"size {n}, got {group_size!r}"
        )
    lists = [list(range(i, i + group_size)) for i in range(0, n, group_size)]
    return new_subgroups_by_enumeration(lists)


def new_subgroups_by_enumeration(ranks_per_subgroup_list: list[list[int]], timeout: Any = None,
                                 backend: Any = None, pg_options: Any = None,
                                 group_desc: Any = None):  # fmt: skip
    """One group per list of ranks (disjoint); returns ``(this rank's subgroup or None, all)``."""
    from . import new_group

    ctx = _emu.current()
    if ctx is None:
        return tdist.new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout, backend,
                                                  pg_options)  # fmt: skip
    seen: set[int] = set()
    for ranks in ranks_per_subgroup_list:
        if seen & set(ranks):
            raise ValueError(
                f"rank {ctx.rank}: new_subgroups_by_enumeration: rank(s) {sorted(seen & set(ranks))} "
                "appear in more than one subgroup; the subgroups must be disjoint"
            )
        seen |= set(ranks)
    groups = [new_group(ranks) for ranks in ranks_per_subgroup_list]
    mine = next((g for g in groups if ctx.rank in g.index), None)
    return mine, groups


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
    if (not isinstance(p2p_op_list, list) or not p2p_op_list
            or not all(isinstance(o, tdist.P2POp) for o in p2p_op_list)):  # fmt: skip
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
