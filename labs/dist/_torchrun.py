"""The ``labs.dist`` operations under torchrun: thin wrappers over ``torch.distributed``.

Each wrapper turns numpy arrays into torch views of the same memory (``torch.from_numpy``), so
results land in the caller's array; under NCCL, CPU buffers are copied to this rank's GPU and the
result is copied back.  ``ReduceOp.AVG`` on gloo runs as SUM followed by a division.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as tdist

from ._common import ReduceOp, Work, as_tensor, check_avg, reduce_op, tensor_list

_TORCH_OPS = {
    ReduceOp.SUM: "SUM",
    ReduceOp.PRODUCT: "PRODUCT",
    ReduceOp.MIN: "MIN",
    ReduceOp.MAX: "MAX",
    ReduceOp.AVG: "AVG",
    ReduceOp.BAND: "BAND",
    ReduceOp.BOR: "BOR",
    ReduceOp.BXOR: "BXOR",
}


def env_rank() -> tuple[int, int] | None:
    """``(RANK, WORLD_SIZE)`` when this process was started by torchrun, else ``None``."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return None


def torchrun_backend() -> str:
    """``"nccl"`` when this node has a GPU for each of its processes, else ``"gloo"``.

    NCCL needs one GPU per process: with ``LOCAL_WORLD_SIZE`` processes on a node (torchrun sets
    it; ``WORLD_SIZE`` when absent) it is chosen only if ``torch.cuda.device_count()`` is at least
    that; two processes on a one-GPU workstation, or any CPU machine, run on gloo.
    """
    local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= local else "gloo"


def launch(fn: Callable[..., Any], world_size: int, args: tuple, kwargs: dict, timeout: float):
    """Initialise torch.distributed if needed, run ``fn`` for this rank, tear down."""
    rank, ws = env_rank()  # type: ignore[misc]
    if world_size != ws:
        raise ValueError(
            f"launch(fn, {world_size}) but torchrun started WORLD_SIZE={ws} processes; start "
            f"torchrun with {world_size} processes in total or pass world_size={ws}"
        )
    created = False
    if not tdist.is_initialized():
        backend = torchrun_backend()
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        tdist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
        created = True
    try:
        value = fn(*args, **kwargs)
    finally:
        if created:
            tdist.destroy_process_group()
    out: list[Any] = [None] * ws
    out[rank] = value
    return out


def _rank() -> int:
    if not tdist.is_initialized():
        raise RuntimeError(
            "labs.dist was called outside dist.launch: put the per-rank code in a function and "
            "run dist.launch(fn, world_size) (threads), or start the script with torchrun"
        )
    return tdist.get_rank()


def _device() -> torch.device | None:
    """This rank's GPU under NCCL (buffers must live there), else None."""
    if tdist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return None


class _Staged:
    """A buffer as the backend needs it, and how to copy the result back."""

    def __init__(self, x: Any, fn: str, what: str = "tensor"):
        self.orig = as_tensor(x, _rank(), fn, what)
        dev = _device()
        self.t = self.orig if dev is None or self.orig.device == dev else self.orig.to(dev)

    def back(self) -> None:
        if self.t is not self.orig:
            self.orig.copy_(self.t)


def _op(op: Any, fn: str) -> tuple[Any, bool]:
    """(torch op, divide afterwards?) for a labs/torch ReduceOp; AVG is SUM + divide on gloo."""
    op = reduce_op(op, _rank(), fn)
    if op is ReduceOp.AVG and tdist.get_backend() != "nccl":
        return tdist.ReduceOp.SUM, True
    return getattr(tdist.ReduceOp, _TORCH_OPS[op]), False


def _finish(work: Any, async_op: bool, after: Callable[[], None]) -> Work | None:
    if async_op:
        return Work(lambda: (work.wait(), after()))
    after()
    return None


def _size(group: Any) -> int:
    return tdist.get_world_size(group)


def send(tensor, dst, group, tag, group_dst) -> None:
    s = _Staged(tensor, "send")
    tdist.send(s.t, dst=dst, group=group, tag=tag, group_dst=group_dst)


def isend(tensor, dst, group, tag, group_dst) -> Work:
    s = _Staged(tensor, "isend")
    w = tdist.isend(s.t, dst=dst, group=group, tag=tag, group_dst=group_dst)
    return Work(lambda: w.wait())


def recv(tensor, src, group, tag, group_src) -> int:
    s = _Staged(tensor, "recv")
    sender = tdist.recv(s.t, src=src, group=group, tag=tag, group_src=group_src)
    s.back()
    return sender


def irecv(tensor, src, group, tag, group_src) -> Work:
    s = _Staged(tensor, "irecv")
    w = tdist.irecv(s.t, src=src, group=group, tag=tag, group_src=group_src)
    return Work(lambda: (w.wait(), s.back()))


def broadcast(tensor, src, group, async_op, group_src):
    s = _Staged(tensor, "broadcast")
    w = tdist.broadcast(s.t, src=src, group=group, async_op=async_op, group_src=group_src)
    return _finish(w, async_op, s.back)


def all_reduce(tensor, op, group, async_op):
    s = _Staged(tensor, "all_reduce")
    check_avg(s.t, reduce_op(op, _rank(), "all_reduce"), _rank(), "all_reduce")
    top, divide = _op(op, "all_reduce")
    w = tdist.all_reduce(s.t, op=top, group=group, async_op=async_op)

    def after():
        if divide:
            s.t.div_(_size(group))
        s.back()

    return _finish(w, async_op, after)


def reduce(tensor, dst, op, group, async_op, group_dst):
    s = _Staged(tensor, "reduce")
    check_avg(s.t, reduce_op(op, _rank(), "reduce"), _rank(), "reduce")
    top, divide = _op(op, "reduce")
    w = tdist.reduce(s.t, dst=dst, op=top, group=group, async_op=async_op, group_dst=group_dst)
    root = dst if dst is not None else tdist.get_global_rank(group, group_dst)

    def after():
        if _rank() == root:
            if divide:
                s.t.div_(_size(group))
            s.back()

    return _finish(w, async_op, after)


def _staged_list(xs, n, fn, what) -> list[_Staged]:
    tensor_list(xs, n, _rank(), fn, what)  # length and type checks
    return [_Staged(x, fn, f"{what}[{i}]") for i, x in enumerate(xs)]


def _back_all(*groups: list[_Staged] | _Staged | None) -> Callable[[], None]:
    def after():
        for g in groups:
            for s in g if isinstance(g, list) else [g] if g is not None else []:
                s.back()

    return after


def all_gather(tensor_list_, tensor, group, async_op):
    s = _Staged(tensor, "all_gather")
    outs = _staged_list(tensor_list_, _size(group), "all_gather", "tensor_list")
    w = tdist.all_gather([o.t for o in outs], s.t, group=group, async_op=async_op)
    return _finish(w, async_op, _back_all(outs))


def all_gather_into_tensor(output_tensor, input_tensor, group, async_op):
    o = _Staged(output_tensor, "all_gather_into_tensor", "output_tensor")
    i = _Staged(input_tensor, "all_gather_into_tensor", "input_tensor")
    gather = getattr(tdist, "all_gather_single", None) or tdist.all_gather_into_tensor  # 2.13+
    w = gather(o.t, i.t, group=group, async_op=async_op)
    return _finish(w, async_op, o.back)


def gather(tensor, gather_list, dst, group, async_op, group_dst):
    s = _Staged(tensor, "gather")
    outs = None
    if gather_list:  # non-dst ranks may pass None or [] (torch accepts both)
        outs = _staged_list(gather_list, _size(group), "gather", "gather_list")
    w = tdist.gather(s.t, [o.t for o in outs] if outs else None, dst=dst, group=group,
                     async_op=async_op, group_dst=group_dst)  # fmt: skip
    return _finish(w, async_op, _back_all(outs))


def scatter(tensor, scatter_list, src, group, async_op, group_src):
    s = _Staged(tensor, "scatter")
    ins = None
    if scatter_list:  # non-src ranks may pass None or [] (torch accepts both)
        ins = _staged_list(scatter_list, _size(group), "scatter", "scatter_list")
    w = tdist.scatter(s.t, [i.t for i in ins] if ins else None, src=src, group=group,
                      async_op=async_op, group_src=group_src)  # fmt: skip
    return _finish(w, async_op, s.back)


def reduce_scatter(output, input_list, op, group, async_op):
    o = _Staged(output, "reduce_scatter", "output")
    check_avg(o.t, reduce_op(op, _rank(), "reduce_scatter"), _rank(), "reduce_scatter")
    ins = _staged_list(input_list, _size(group), "reduce_scatter", "input_list")
    top, divide = _op(op, "reduce_scatter")
    w = tdist.reduce_scatter(o.t, [i.t for i in ins], op=top, group=group, async_op=async_op)

    def after():
        if divide:
            o.t.div_(_size(group))
        o.back()

    return _finish(w, async_op, after)


def reduce_scatter_tensor(output, input, op, group, async_op):
    o = _Staged(output, "reduce_scatter_tensor", "output")
    i = _Staged(input, "reduce_scatter_tensor", "input")
    check_avg(o.t, reduce_op(op, _rank(), "reduce_scatter_tensor"), _rank(), "reduce_scatter")
    top, divide = _op(op, "reduce_scatter_tensor")
    rs = getattr(tdist, "reduce_scatter_single", None) or tdist.reduce_scatter_tensor  # 2.13+
    w = rs(o.t, i.t, op=top, group=group, async_op=async_op)

    def after():
        if divide:
            o.t.div_(_size(group))
        o.back()

    return _finish(w, async_op, after)


def all_to_all(output_tensor_list, input_tensor_list, group, async_op):
    n = _size(group)
    outs = _staged_list(output_tensor_list, n, "all_to_all", "output_tensor_list")
    ins = _staged_list(input_tensor_list, n, "all_to_all", "input_tensor_list")
    w = tdist.all_to_all([o.t for o in outs], [i.t for i in ins], group=group, async_op=async_op)
    return _finish(w, async_op, _back_all(outs))


def barrier(group, async_op):
    _rank()
    w = tdist.barrier(group=group, async_op=async_op)
    return _finish(w, async_op, lambda: None)


def new_group(ranks):
    _rank()
    return tdist.new_group(ranks)


def get_rank(group) -> int:
    _rank()
    return tdist.get_rank(group)


def get_world_size(group) -> int:
    _rank()
    return tdist.get_world_size(group)
