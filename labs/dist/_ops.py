"""The collectives on emulated ranks (called with the caller's RankContext)."""

from __future__ import annotations

from typing import Any

import torch

from ._common import (
    ArgumentError,
    ReduceOp,
    Work,
    as_tensor,
    check_avg,
    reduce_op,
    same_layout,
    shape_dtype,
    tensor_list,
)
from ._p2p import members_only, resolve_group, resolve_peer
from ._p2p import nbytes as _nbytes
from ._reduce import reduce_into, reduce_small, small_view
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
                pin=False):  # fmt: skip
    t0 = ctx.now()
    wait = ctx.collective(g, sig, desc, entry, compute, split, blocking=not async_op, pin=pin)
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

    def compute(es):
        for i, e in enumerate(es):
            if i != r:
                e.copy_(es[r])

    sig = ("broadcast", root, t.shape, t.dtype)
    desc = lambda: f"broadcast(src={root}) of {shape_dtype(t)}"  # noqa: E731
    return _collective(ctx, g, "broadcast", "broadcast", sig, desc, t, compute, async_op,
                       _nbytes(t), r)  # fmt: skip


@members_only
def all_reduce(ctx, tensor, op, group, async_op):
    g = resolve_group(ctx, group, "all_reduce")
    op = reduce_op(op, ctx.rank, "all_reduce")
    t = as_tensor(tensor, ctx.rank, "all_reduce")
    check_avg(t, op, ctx.rank, "all_reduce")
    sig = ("all_reduce", op, t.shape, t.dtype)
    desc = lambda: f"all_reduce(op={op.name}) of {shape_dtype(t)}"  # noqa: E731
    nb = _nbytes(t)
    if nb <= SMALL_BYTES and len(g.ranks) > 1:
        # a view made now is used when the last member arrives: not for async calls, whose
        # caller runs on meanwhile (reduce_small then makes the views itself, at that moment)
        view = None if async_op else small_view(ctx, t)
        return _collective(ctx, g, "all_reduce", "all_reduce", sig, desc, (t, view),
                           lambda es: reduce_small(es, op), async_op, nb)  # fmt: skip
    split = _split_all_reduce(op) if nb >= PARALLEL_BYTES else None
    # members of a split all-reduce sleep pinned if their parts are short (see _sched.py)
    pin = split is not None and nb // len(g.ranks) <= PIN_PART_BYTES
    return _collective(ctx, g, "all_reduce", "all_reduce", sig, desc, t,
                       lambda es: reduce_into(es, es, op), async_op, nb, split=split,
                       pin=pin)  # fmt: skip


def _split_all_reduce(op: ReduceOp):
    """Part k of a large all-reduce: rank k reduces elements [k n/p, (k+1) n/p) of every buffer."""

    def part(es: list[torch.Tensor], k: int, p: int) -> None:
        n = es[0].numel()
        lo, hi = k * n // p, (k + 1) * n // p
        if hi > lo:
            views = [e.view(-1)[lo:hi] for e in es]
            reduce_into(views, views, op)

    return part


@members_only
def reduce(ctx, tensor, dst, op, group, async_op, group_dst):
    g = resolve_group(ctx, group, "reduce")
    root = resolve_peer(ctx, g, dst, group_dst, "reduce", "dst")
    op = reduce_op(op, ctx.rank, "reduce")
    t = as_tensor(tensor, ctx.rank, "reduce")
    check_avg(t, op, ctx.rank, "reduce")
    r = g.index[root]
    sig = ("reduce", root, op, t.shape, t.dtype)
    desc = lambda: f"reduce(dst={root}, op={op.name}) of {shape_dtype(t)}"  # noqa: E731
    return _collective(ctx, g, "reduce", "reduce", sig, desc, t,
                       lambda es: reduce_into([es[r]], es, op), async_op, _nbytes(t),
                       r)  # fmt: skip


def _gather_rows(outs: list[torch.Tensor], ins: list[torch.Tensor]) -> None:
    """Copy ``ins`` (snapshotted first, since outputs may alias inputs) into ``outs``."""
    snap = [x.clone() for x in ins]
    for o, x in zip(outs, snap):
        o.copy_(x.view(o.shape))


@members_only
def all_gather(ctx, tensor_list, tensor, group, async_op):
    g = resolve_group(ctx, group, "all_gather")
    t = as_tensor(tensor, ctx.rank, "all_gather")
    outs = tensor_list_checked(ctx, tensor_list, g, t, "all_gather", "tensor_list")

    def compute(es):
        snap = [x.clone() for _, x in es]
        for lst, _ in es:
            for o, x in zip(lst, snap):
                o.copy_(x)

    sig = ("all_gather", t.shape, t.dtype)
    desc = lambda: f"all_gather of {shape_dtype(t)}"  # noqa: E731
    return _collective(ctx, g, "all_gather", "all_gather", sig, desc, (outs, t), compute,
                       async_op, _nbytes(t))  # fmt: skip


def tensor_list_checked(ctx, xs, g, ref, fn, what) -> list[torch.Tensor]:
    ts = tensor_list(xs, g.size(), ctx.rank, fn, what)
    same_layout(ts, ref, ctx.rank, fn, what)
    return ts


@members_only
def all_gather_into_tensor(ctx, output_tensor, input_tensor, group, async_op):
    fn = "all_gather_into_tensor"
    g = resolve_group(ctx, group, fn)
    t = as_tensor(input_tensor, ctx.rank, fn, "input_tensor")
    out = as_tensor(output_tensor, ctx.rank, fn, "output_tensor")
    p = g.size()
    if out.numel() != p * t.numel() or out.dtype != t.dtype:
        raise ArgumentError(
            f"rank {ctx.rank}: {fn}: output_tensor must hold group size ({p}) x the input "
            f"({shape_dtype(t)}): expected {p * t.numel()} elements of {t.dtype}, got "
            f"{shape_dtype(out)}"
        )

    def compute(es):
        snap = [x.reshape(-1).clone() for _, x in es]
        m = snap[0].numel()
        for o, _ in es:
            flat = o.view(-1)
            for i, x in enumerate(snap):
                flat[i * m : (i + 1) * m].copy_(x)

    sig = (fn, t.shape, t.dtype)
    desc = lambda: f"{fn} of {shape_dtype(t)}"  # noqa: E731
    return _collective(ctx, g, fn, "all_gather", sig, desc, (out, t), compute, async_op,
                       _nbytes(t))  # fmt: skip


@members_only
def gather(ctx, tensor, gather_list, dst, group, async_op, group_dst):
    g = resolve_group(ctx, group, "gather")
    root = resolve_peer(ctx, g, dst, group_dst, "gather", "dst")
    t = as_tensor(tensor, ctx.rank, "gather")
    r = g.index[root]
    outs = None
    if ctx.rank == root:
        if gather_list is None:
            raise ValueError(f"rank {ctx.rank}: gather: the dst rank must pass gather_list")
        outs = tensor_list_checked(ctx, gather_list, g, t, "gather", "gather_list")
    elif gather_list:  # torch's rule: a clear error rather than a list that is ignored
        raise ValueError(
            f"rank {ctx.rank}: gather: Argument ``gather_list`` must NOT be specified on "
            f"non-destination ranks (dst is rank {root}); pass None"
        )

    def compute(es):
        _gather_rows(es[r][0], [x for _, x in es])

    sig = ("gather", root, t.shape, t.dtype)
    desc = lambda: f"gather(dst={root}) of {shape_dtype(t)}"  # noqa: E731
    return _collective(ctx, g, "gather", "gather", sig, desc, (outs, t), compute, async_op,
                       _nbytes(t), r)  # fmt: skip


@members_only
def scatter(ctx, tensor, scatter_list, src, group, async_op, group_src):
    g = resolve_group(ctx, group, "scatter")
    root = resolve_peer(ctx, g, src, group_src, "scatter", "src")
    t = as_tensor(tensor, ctx.rank, "scatter")
    r = g.index[root]
    ins = None
    if ctx.rank == root:
        if scatter_list is None:
            raise ValueError(f"rank {ctx.rank}: scatter: the src rank must pass scatter_list")
        ins = tensor_list_checked(ctx, scatter_list, g, t, "scatter", "scatter_list")
    elif scatter_list:  # torch's rule: a clear error rather than a list that is ignored
        raise ValueError(
            f"rank {ctx.rank}: scatter: Argument ``scatter_list`` must NOT be specified on "
            f"non-source ranks (src is rank {root}); pass None"
        )

    def compute(es):
        _gather_rows([x for x, _ in es], es[r][1])

    sig = ("scatter", root, t.shape, t.dtype)
    desc = lambda: f"scatter(src={root}) into {shape_dtype(t)}"  # noqa: E731
    return _collective(ctx, g, "scatter", "scatter", sig, desc, (t, ins), compute, async_op,
                       _nbytes(t), r)  # fmt: skip


@members_only
def reduce_scatter(ctx, output, input_list, op, group, async_op):
    g = resolve_group(ctx, group, "reduce_scatter")
    op = reduce_op(op, ctx.rank, "reduce_scatter")
    out = as_tensor(output, ctx.rank, "reduce_scatter", "output")
    check_avg(out, op, ctx.rank, "reduce_scatter")
    ins = tensor_list_checked(ctx, input_list, g, out, "reduce_scatter", "input_list")

    def compute(es):
        accs = [torch.empty_like(o) for o, _ in es]
        for j, acc in enumerate(accs):
            reduce_into([acc], [lst[j] for _, lst in es], op)
        for (o, _), acc in zip(es, accs):
            o.copy_(acc)

    sig = ("reduce_scatter", op, out.shape, out.dtype)
    desc = lambda: f"reduce_scatter(op={op.name}) into {shape_dtype(out)}"  # noqa: E731
    return _collective(ctx, g, "reduce_scatter", "reduce_scatter", sig, desc, (out, ins),
                       compute, async_op, _nbytes(out))  # fmt: skip


@members_only
def reduce_scatter_tensor(ctx, output, input, op, group, async_op):
    fn = "reduce_scatter_tensor"
    g = resolve_group(ctx, group, fn)
    op = reduce_op(op, ctx.rank, fn)
    out = as_tensor(output, ctx.rank, fn, "output")
    inp = as_tensor(input, ctx.rank, fn, "input")
    check_avg(out, op, ctx.rank, fn)
    p = g.size()
    if inp.numel() != p * out.numel() or inp.dtype != out.dtype:
        raise ArgumentError(
            f"rank {ctx.rank}: {fn}: input must hold group size ({p}) x the output "
            f"({shape_dtype(out)}): expected {p * out.numel()} elements of {out.dtype}, got "
            f"{shape_dtype(inp)}"
        )

    def compute(es):
        m = es[0][0].numel()
        accs = [torch.empty_like(o).view(-1) for o, _ in es]
        for j, acc in enumerate(accs):
            reduce_into([acc], [x.view(-1)[j * m : (j + 1) * m] for _, x in es], op)
        for (o, _), acc in zip(es, accs):
            o.view(-1).copy_(acc)

    sig = (fn, op, out.shape, out.dtype)
    desc = lambda: f"{fn}(op={op.name}) into {shape_dtype(out)}"  # noqa: E731
    return _collective(ctx, g, fn, "reduce_scatter", sig, desc, (out, inp), compute, async_op,
                       _nbytes(out))  # fmt: skip


@members_only
def barrier(ctx, group, async_op):
    g = resolve_group(ctx, group, "barrier")
    return _collective(ctx, g, "barrier", "barrier", ("barrier",), _barrier_desc, None,
                       _noop_compute, async_op, 0)  # fmt: skip


def _barrier_desc() -> str:
    return "barrier()"


def _noop_compute(entries: list[Any]) -> None:
    return None
