"""The collectives that reduce or copy one buffer, on emulated ranks (called with the caller's
RankContext): broadcast, all_reduce, reduce, barrier, monitored_barrier; the others are in
:mod:`._shards` and :mod:`._exchange`."""

from __future__ import annotations

from typing import Any

import torch

from ._common import (
    ArgumentError,
    ReduceOp,
    Work,
    as_tensor,
    check_avg,
    layout,
    memory_view,
    reduce_op,
    shape_dtype,
)
from ._p2p import members_only, resolve_group, resolve_peer
from ._p2p import nbytes as _nbytes
from ._reduce import all_reduce_into, reduce_small, reduce_to_root, small_view
from ._sched import PIN_PART_BYTES

PARALLEL_BYTES = 1 << 20  # from 1 MiB, every rank reduces its own part of an all_reduce
SMALL_BYTES = 1 << 14  # up to 16 KiB, every rank hands the last one a (memoized) numpy view


# -- collectives ----------------------------------------------------------------------------
def _bytes(op: str, p: int, me: int, root: int, nb: int) -> tuple[int, int, str]:
    """(sent, received, algorithm) of group rank ``me`` for a collective on ``nb`` bytes.

    ``nb`` is the per-rank buffer: the reduced tensor (all_reduce, reduce, broadcast), the
    input of all_gather / gather, the output of reduce_scatter / scatter, the whole input of
    all_to_all.
    """
    if p == 1 or op == "barrier":
        return 0, 0, "none"
    if op == "all_reduce":
        b = 2 * (p - 1) * nb // p
        return b, b, "ring"
    if op in ("all_gather", "reduce_scatter"):
        return (p - 1) * nb, (p - 1) * nb, "ring"
    k = (me - root) % p  # position in the chain that starts at the root
    if op == "broadcast":
        return (nb if k < p - 1 else 0), (nb if k > 0 else 0), "chain"
    if op == "reduce":
        return (nb if k > 0 else 0), (nb if k < p - 1 else 0), "chain"
    if op == "gather":
        return (0, (p - 1) * nb, "direct") if k == 0 else (nb, 0, "direct")
    if op == "scatter":
        return ((p - 1) * nb, 0, "direct") if k == 0 else (0, nb, "direct")
    if op == "all_to_all":
        b = (p - 1) * nb // p
        return b, b, "direct"
    raise ValueError(f"unknown collective {op}")


def _collective(ctx, g, op, base, sig, desc, entry, compute, async_op, nb, root=0, split=None,
                pin=False, timeout=None):  # fmt: skip
    t0 = ctx.now()
    wait = ctx.collective(g, sig, desc, entry, compute, split, blocking=not async_op, pin=pin,
                          timeout=timeout)  # fmt: skip
    me = g.index[ctx.rank]
    sent, got, algo = _bytes(base, len(g.ranks), me, root, nb)
    if async_op:

        def finish() -> None:
            wait()
            ctx.record(op, g.peers[me], sent, got, t0, g.ranks, "collective", nb, -1, algo)

        return Work(finish)
    wait()
    ctx.record(op, g.peers[me], sent, got, t0, g.ranks, "collective", nb, -1, algo)
    return None


@members_only
def broadcast(ctx, tensor, src, group, async_op, group_src):
    g = resolve_group(ctx, group, "broadcast")
    root = resolve_peer(ctx, g, src, group_src, "broadcast", "src")
    t = as_tensor(tensor, ctx.rank, "broadcast")
    r = g.index[root]
    mem = memory_view(t, ctx.rank, "broadcast")  # gloo copies the tensor's memory

    def compute(es):
        for i, e in enumerate(es):
            if i != r:
                e.copy_(es[r])

    sig = ("broadcast", root, t.shape, t.dtype, layout(t))
    desc = lambda: f"broadcast(src={root}) of {_shape(t)}"  # noqa: E731
    return _collective(ctx, g, "broadcast", "broadcast", sig, desc, mem, compute, async_op,
                       _nbytes(t), r)  # fmt: skip


def _shape(t: torch.Tensor) -> str:
    """dtype and shape, and the strides of a tensor that is not contiguous."""
    return shape_dtype(t) if t.is_contiguous() else f"{shape_dtype(t)} strides {t.stride()}"


@members_only
def all_reduce(ctx, tensor, op, group, async_op):
    g = resolve_group(ctx, group, "all_reduce")
    op = reduce_op(op, ctx.rank, "all_reduce")
    t = as_tensor(tensor, ctx.rank, "all_reduce")
    if t.layout == torch.sparse_coo:
        return _sparse_all_reduce(ctx, t, op, g, async_op)
    check_avg(t, op, ctx.rank, "all_reduce")
    mem = memory_view(t, ctx.rank, "all_reduce")  # gloo reduces the tensor's memory
    sig = ("all_reduce", op, t.shape, t.dtype, layout(t))
    desc = lambda: f"all_reduce(op={op.name}) of {_shape(t)}"  # noqa: E731
    nb = _nbytes(t)
    if nb <= SMALL_BYTES and len(g.ranks) > 1:
        # a view made now is used when the last member arrives: not for async calls, whose
        # caller runs on meanwhile (reduce_small then makes the views itself, at that moment)
        view = None if async_op else small_view(ctx, mem)
        return _collective(ctx, g, "all_reduce", "all_reduce", sig, desc, (mem, view),
                           lambda es: reduce_small(es, op), async_op, nb)  # fmt: skip
    split = _split_all_reduce(op) if nb >= PARALLEL_BYTES else None
    # members of a split all-reduce sleep pinned if their parts are short (see _sched.py)
    pin = split is not None and nb // len(g.ranks) <= PIN_PART_BYTES
    return _collective(ctx, g, "all_reduce", "all_reduce", sig, desc, mem,
                       lambda es: all_reduce_into(es, op), async_op, nb, split=split,
                       pin=pin)  # fmt: skip


def _sparse_all_reduce(ctx, t, op, g, async_op):
    """gloo's all-reduce of a sparse COO tensor: every rank's (coalesced) tensor is gathered and
    summed in rank order, coalesced, and copied into each member's tensor."""
    if op is not ReduceOp.SUM:
        raise ArgumentError(
            "unsupported reduction operation (allreduce of sparse tensors only works with "
            f"ReduceOp.SUM) (rank {ctx.rank}: all_reduce of a sparse tensor with {op.name})"
        )
    mine = t.coalesce()

    def compute(es):
        if len({tuple(x.shape) for x, _ in es}) > 1:
            raise ValueError("Sparse dimensions do not match")
        total = es[0][0]
        for x, _ in es[1:]:
            total = total + x
        total = total.coalesce()
        for _, box in es:
            box.append(total)

    box: list[torch.Tensor] = []
    nb = _nbytes(mine.indices()) + _nbytes(mine.values())
    desc = lambda: f"all_reduce(op=SUM) of a sparse {shape_dtype(t)}"  # noqa: E731
    work = _collective(ctx, g, "all_reduce", "all_reduce", ("all_reduce", "sparse", t.dtype),
                       desc, (mine, box), compute, True, nb)  # fmt: skip

    def finish() -> None:
        work.wait()
        t.copy_(box[0])

    if async_op:
        return Work(finish)
    finish()
    return None


def _split_all_reduce(op: ReduceOp):
    """Part k of a large all-reduce: member k folds gloo's chunk k (:mod:`._ring`)."""

    def part(es: list[torch.Tensor], k: int, p: int) -> None:
        all_reduce_into(es, op, part=k)

    return part


@members_only
def reduce(ctx, tensor, dst, op, group, async_op, group_dst):
    """gloo's ``reduce``: the root gets the result, the other members' tensors keep the partial
    sums gloo leaves in them (see :mod:`._ring`; NCCL leaves them unchanged)."""
    g = resolve_group(ctx, group, "reduce")
    root = resolve_peer(ctx, g, dst, group_dst, "reduce", "dst")
    op = reduce_op(op, ctx.rank, "reduce")
    t = as_tensor(tensor, ctx.rank, "reduce")
    check_avg(t, op, ctx.rank, "reduce")
    mem = memory_view(t, ctx.rank, "reduce")
    r = g.index[root]
    sig = ("reduce", root, op, t.shape, t.dtype, layout(t))
    desc = lambda: f"reduce(dst={root}, op={op.name}) of {_shape(t)}"  # noqa: E731
    return _collective(ctx, g, "reduce", "reduce", sig, desc, mem,
                       lambda es: reduce_to_root(es, r, op), async_op, _nbytes(t),
                       r)  # fmt: skip


@members_only
def barrier(ctx, group, async_op):
    g = resolve_group(ctx, group, "barrier")
    return _collective(ctx, g, "barrier", "barrier", ("barrier",), _barrier_desc, None,
                       _noop_compute, async_op, 0)  # fmt: skip


@members_only
def monitored_barrier(ctx, group, timeout, wait_all_ranks):
    """gloo's ``monitored_barrier``: a barrier whose group rank 0 names the ranks that did not
    arrive within ``timeout`` (a ``timedelta``, seconds, or None for the group's timeout); the
    other members raise gloo's error for a missing rank 0."""
    g = resolve_group(ctx, group, "monitored_barrier")
    if timeout is None:
        seconds = g.timeout if g.timeout is not None else 1800.0  # gloo's default, 30 min
    else:
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    ms, me = int(seconds * 1000), g.index[ctx.rank]
    if me == 0 and seconds <= 0:  # rank 0's time is up before it checks a single rank
        raise RuntimeError(
            f"Rank 0 timed out in monitoredBarrier after {ms} ms.\nNo ranks successfully "
            "processed in monitoredBarrier."
        )

    def error(missing: list[int]) -> RuntimeError:
        if me != 0:
            return RuntimeError(
                f"Rank {me} successfully reached monitoredBarrier, but received errors while "
                "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
            )
        late = [g.index[r] for r in missing]
        if wait_all_ranks:
            names = f"Ranks {', '.join(map(str, late))}"
        else:
            names = f"Rank {late[0]}" if late else "A rank"
        return RuntimeError(f"[Rank 0]: {names} failed to pass monitoredBarrier in {ms} ms")

    desc = lambda: f"monitored_barrier(timeout={ms} ms)"  # noqa: E731
    return _collective(ctx, g, "monitored_barrier", "barrier", ("barrier",), desc, None,
                       _noop_compute, False, 0, timeout=(seconds, error))  # fmt: skip


def _barrier_desc() -> str:
    return "barrier()"


def _noop_compute(entries: list[Any]) -> None:
    return None
