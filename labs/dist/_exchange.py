"""Emulated collectives that exchange per-peer data: ``all_to_all``, ``all_to_all_single`` and the
object collectives (``all_gather_object``, ``broadcast_object_list``, ``gather_object``,
``scatter_object_list``).  Called with the caller's ``RankContext``; see ``labs.dist.compat_ops``.

Objects travel pickled, as under ``torch.distributed``: a receiver gets a copy made by
``pickle.loads(pickle.dumps(obj))``, never the sender's live object, and an object that cannot be
pickled fails on the sending rank.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch

from ._common import ArgumentError, Work, as_tensor, need_contiguous, shape_dtype, tensor_list
from ._ops import _collective
from ._p2p import members_only, resolve_group, resolve_peer
from ._p2p import nbytes as _nbytes


@members_only
def all_to_all(ctx, output_tensor_list, input_tensor_list, group, async_op):
    fn = "all_to_all"
    g = resolve_group(ctx, group, fn)
    p = g.size()
    outs = tensor_list(output_tensor_list, p, ctx.rank, fn, "output_tensor_list")
    ins = tensor_list(input_tensor_list, p, ctx.rank, fn, "input_tensor_list")
    dtype, numel = ins[0].dtype, ins[0].numel()
    for what, ts in (("output_tensor_list", outs), ("input_tensor_list", ins)):
        for i, x in enumerate(ts):
            if x.dtype != dtype:
                raise ValueError(
                    f"rank {ctx.rank}: {fn}: {what}[{i}] has dtype {x.dtype}, expected {dtype} "
                    "(the dtype of input_tensor_list[0])"
                )
            if x.numel() != numel:  # gloo's rule (NCCL allows uneven lists)
                raise ArgumentError(
                    f"rank {ctx.rank}: {fn}: invalid tensor size at {what}[{i}] (expected "
                    f"{numel} elements like input_tensor_list[0], got {shape_dtype(x)}); gloo "
                    "needs equal sizes: use all_to_all_single with split sizes for uneven parts"
                )

    def compute(es):
        snap = [[x.clone() for x in lst] for _, lst in es]
        for j, (olist, _) in enumerate(es):
            for i in range(p):
                x, o = snap[i][j], olist[i]
                if x.numel() != o.numel():
                    raise ValueError(
                        f"rank {g.ranks[i]} sends {shape_dtype(x)} to rank {g.ranks[j]}, whose "
                        f"output_tensor_list[{i}] is {shape_dtype(o)}"
                    )
                o.copy_(x.view(o.shape))

    sig = (fn, dtype)
    desc = lambda: f"all_to_all of {p} x {shape_dtype(ins[0])}"  # noqa: E731
    nb = sum(_nbytes(x) for x in ins)
    return _collective(ctx, g, fn, "all_to_all", sig, desc, (outs, ins), compute, async_op, nb)


def _splits(sizes: Any, n: int, rows: int, rank: int, fn: str, what: str) -> list[int]:
    """Row counts per group rank: ``sizes`` as given, or ``rows`` split evenly."""
    if sizes is None or len(sizes) == 0:
        if rows % n:
            raise ValueError(
                f"rank {rank}: {fn}: without {what}, dim 0 of the tensor ({rows}) must be "
                f"divisible by the group size ({n}); pass {what} for uneven splits"
            )
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or any(s < 0 for s in sizes) or sum(sizes) != rows:
        raise ArgumentError(
            f"rank {rank}: {fn}: {what} must be {n} non-negative sizes summing to dim 0 of the "
            f"tensor ({rows}), got {sizes}"
        )
    return sizes


@members_only
def all_to_all_single(ctx, output, input, output_split_sizes, input_split_sizes, group,
                      async_op):  # fmt: skip
    """Rank j's output rows from offset sum(out_splits[:i]) receive rank i's input rows sent to
    j (dim 0 split by ``input_split_sizes``); equal splits when the sizes are None."""
    fn = "all_to_all_single"
    g = resolve_group(ctx, group, fn)
    p = g.size()
    out = as_tensor(output, ctx.rank, fn, "output")
    inp = as_tensor(input, ctx.rank, fn, "input")
    for x in (out, inp):
        need_contiguous(x, ctx.rank, fn, "Tensors must be contiguous", ValueError)  # torch's
    if out.dtype != inp.dtype or out.shape[1:] != inp.shape[1:]:
        raise ValueError(
            f"rank {ctx.rank}: {fn}: output and input must share dtype and trailing dims, got "
            f"{shape_dtype(out)} and {shape_dtype(inp)}"
        )
    rows_in = inp.shape[0] if inp.dim() else 1
    rows_out = out.shape[0] if out.dim() else 1
    ins = _splits(input_split_sizes, p, rows_in, ctx.rank, fn, "input_split_sizes")
    outs = _splits(output_split_sizes, p, rows_out, ctx.rank, fn, "output_split_sizes")

    def compute(es):
        snap = [x.clone() for _, x, _, _ in es]
        for j, (o, _, _, o_split) in enumerate(es):
            at = 0
            for i, (_, _, i_split, _) in enumerate(es):
                if i_split[j] != o_split[i]:
                    raise ValueError(
                        f"rank {g.ranks[i]} sends {i_split[j]} rows to rank {g.ranks[j]}, which "
                        f"expects {o_split[i]} (output_split_sizes[{i}])"
                    )
                lo = sum(i_split[:j])
                if o_split[i]:
                    o[at : at + o_split[i]].copy_(snap[i][lo : lo + i_split[j]])
                at += o_split[i]

    row_bytes = inp[0].numel() * inp.element_size() if inp.dim() and rows_in else 0
    me = g.index[ctx.rank]
    sent = (rows_in - ins[me]) * row_bytes
    got = (rows_out - outs[me]) * row_bytes
    sig = (fn, inp.dtype, tuple(inp.shape[1:]))
    desc = lambda: f"{fn} of {shape_dtype(inp)} split {ins}"  # noqa: E731
    return _run(ctx, g, fn, sig, desc, (out, inp, ins, outs), compute, async_op, sent, got,
                rows_in * row_bytes)  # fmt: skip


def _run(ctx, g, fn, sig, desc, entry, compute, async_op, sent, got, nb):
    t0 = ctx.now()
    wait = ctx.collective(g, sig, desc, entry, compute, blocking=not async_op)
    peers = g.peers[g.index[ctx.rank]]

    def finish() -> None:
        wait()
        ctx.record(fn, peers, sent, got, t0, g.ranks, "collective", nb, -1, "direct")

    if async_op:
        return Work(finish)
    finish()
    return None


# -- object collectives -----------------------------------------------------------------------
def _pickle(obj: Any, rank: int, fn: str) -> bytes:
    try:
        return pickle.dumps(obj)
    except Exception as err:  # noqa: BLE001 - any pickling failure
        raise TypeError(f"rank {rank}: {fn}: cannot pickle {type(obj).__name__}: {err}") from err


def _objects(ctx, fn, group, payload, root_arg=None, group_root=None, root_name="src"):
    """Hand every member's pickled ``payload`` to the collective; return (all payloads by group
    rank, group index of the root or None).  Blocks until every member arrived."""
    g = resolve_group(ctx, group, fn)
    root = None
    if root_arg is not None or group_root is not None:
        root = g.index[resolve_peer(ctx, g, root_arg, group_root, fn, root_name)]
    box: dict[str, Any] = {}

    def compute(es):
        box["all"] = [e[0] for e in es]
        for e in es:
            e[1]["all"] = box["all"]

    entry = (payload, {})
    nb = len(payload) if isinstance(payload, bytes) else 0
    sig = (fn, root)
    desc = lambda: f"{fn}({root_name}={root})" if root is not None else f"{fn}()"  # noqa: E731
    _run(ctx, g, fn, sig, desc, entry, compute, False, nb, nb, nb)
    return entry[1]["all"], root, g


@members_only
def all_gather_object(ctx, object_list, obj, group):
    fn = "all_gather_object"
    payloads, _, g = _objects(ctx, fn, group, _pickle(obj, ctx.rank, fn))
    if len(object_list) != g.size():
        raise ValueError(
            f"rank {ctx.rank}: {fn}: object_list must have length {g.size()} (the group size), "
            f"got {len(object_list)}"
        )
    for i, b in enumerate(payloads):
        object_list[i] = pickle.loads(b)


@members_only
def broadcast_object_list(ctx, object_list, src, group, group_src):
    fn = "broadcast_object_list"
    g = resolve_group(ctx, group, fn)
    is_src = ctx.rank == resolve_peer(ctx, g, src, group_src, fn, "src")
    data = _pickle(list(object_list), ctx.rank, fn) if is_src else None
    payloads, root, _ = _objects(ctx, fn, group, data, src, group_src)
    objs = pickle.loads(payloads[root])
    if len(objs) != len(object_list):
        raise ValueError(
            f"rank {ctx.rank}: {fn}: object_list has length {len(object_list)} here but "
            f"{len(objs)} on the src rank; every rank must pass a list of the same length"
        )
    if not is_src:
        object_list[:] = objs


@members_only
def gather_object(ctx, obj, object_gather_list, dst, group, group_dst):
    fn = "gather_object"
    payloads, root, g = _objects(ctx, fn, group, _pickle(obj, ctx.rank, fn), dst, group_dst,
                                 "dst")  # fmt: skip
    if g.index[ctx.rank] != root:
        return
    if object_gather_list is None or len(object_gather_list) != g.size():
        raise ValueError(
            f"rank {ctx.rank}: {fn}: the dst rank must pass object_gather_list of length {g.size()}"
        )
    for i, b in enumerate(payloads):
        object_gather_list[i] = pickle.loads(b)


@members_only
def scatter_object_list(ctx, scatter_object_output_list, scatter_object_input_list, src, group,
                        group_src):  # fmt: skip
    fn = "scatter_object_list"
    g = resolve_group(ctx, group, fn)
    is_src = ctx.rank == resolve_peer(ctx, g, src, group_src, fn, "src")
    data = None
    if is_src:
        if scatter_object_input_list is None or len(scatter_object_input_list) != g.size():
            raise ValueError(
                f"rank {ctx.rank}: {fn}: the src rank must pass scatter_object_input_list of "
                f"length {g.size()}"
            )
        data = [_pickle(o, ctx.rank, fn) for o in scatter_object_input_list]
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError(
            f"rank {ctx.rank}: {fn}: scatter_object_output_list must be a non-empty list"
        )
    payloads, root, _ = _objects(ctx, fn, group, data, src, group_src)
    scatter_object_output_list[0] = pickle.loads(payloads[root][g.index[ctx.rank]])


def object_tensor(obj: Any, rank: int, fn: str) -> torch.Tensor:
    """The pickled bytes of ``obj`` as a uint8 tensor (what send_object_list sends)."""
    return torch.frombuffer(bytearray(_pickle(obj, rank, fn)), dtype=torch.uint8)
