"""The collectives whose ranks hold different parts of the data, on emulated ranks: all_gather,
all_gather_into_tensor, gather, scatter, reduce_scatter, reduce_scatter_tensor (called with the
caller's RankContext; the others are in :mod:`._ops`)."""

from __future__ import annotations

import torch

from ._common import (
    ArgumentError,
    as_tensor,
    check_avg,
    reduce_op,
    same_layout,
    shape_dtype,
    tensor_list,
)
from ._ops import _collective
from ._p2p import members_only, resolve_group, resolve_peer
from ._p2p import nbytes as _nbytes
from ._reduce import all_reduce_slice


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


def _dims(shape: tuple) -> str:
    """A shape as c10 prints one: ``(2, 6)``, ``(12)``."""
    return "(" + ", ".join(map(str, shape)) + ")"


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
    rows = tuple(t.shape) or (1,)
    want = (p * rows[0], *rows[1:])
    if tuple(out.shape) != want or out.dtype != t.dtype:  # gloo's rule (and its message)
        got = tuple(out.chunk(p)[0].shape) if out.dim() and out.shape[0] >= p else tuple(out.shape)
        raise ArgumentError(
            f"ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected "
            f"{_dims(rows)}, got {_dims(got)}) (rank {ctx.rank}: {fn}: output_tensor must be "
            f"the inputs ({shape_dtype(t)}) concatenated along dim 0: {out.dtype} {list(want)}, "
            f"got {shape_dtype(out)})"
        )

    def compute(es):
        whole = torch.cat([x.reshape(-1) for _, x in es])  # copies: outputs may alias inputs
        for o, _ in es:
            o.copy_(whole.view(o.shape))

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
    if not t.is_contiguous():  # gloo writes into the output's memory in order: wrong values
        raise ArgumentError(
            f"rank {ctx.rank}: scatter: the output tensor ({shape_dtype(t)}, strides "
            f"{t.stride()}) is not contiguous; gloo writes what it receives into its memory in "
            "order, which misplaces the values: scatter into a contiguous tensor and copy it"
        )
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

    def compute(es):  # gloo: one all-reduce per part (rank j's part j), see _ring.py
        k = es[0][0].numel()
        for j, (o, _) in enumerate(es):
            all_reduce_slice([lst[j] for _, lst in es], op, 0, k, o)

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
    rows = tuple(out.shape) or (1,)
    want = (p * rows[0], *rows[1:])
    if tuple(inp.shape) != want or inp.dtype != out.dtype:
        raise ArgumentError(  # gloo checks dim 0 with a fatal check: the process aborts
            f"Check failed: outputShape[0] * worldSize == inputShape[0] ({rows[0] * p} vs. "
            f"{inp.shape[0] if inp.dim() else 1}) (rank {ctx.rank}: {fn}: input must be {p} "
            f"outputs ({shape_dtype(out)}) concatenated along dim 0: {out.dtype} {list(want)}, "
            f"got {shape_dtype(inp)}; gloo aborts the process here)"
        )

    def compute(es):  # gloo: one all-reduce of the whole input, slice j to rank j (_ring.py)
        m = es[0][0].numel()
        for j, (o, _) in enumerate(es):
            all_reduce_slice([x for _, x in es], op, j * m, (j + 1) * m, o)

    sig = (fn, op, out.shape, out.dtype)
    desc = lambda: f"{fn}(op={op.name}) into {shape_dtype(out)}"  # noqa: E731
    return _collective(ctx, g, fn, "reduce_scatter", sig, desc, (out, inp), compute, async_op,
                       _nbytes(out))  # fmt: skip
