"""Ulysses sequence parallelism (Jacobs et al. 2023): all-to-all from sequence to heads.

Each of ``P`` ranks holds ``s / P`` tokens with all ``H`` heads.  Attention needs every token of
a head, so an all-to-all regroups the data: afterwards each rank holds *all* ``s`` tokens of
``H / P`` heads, attends locally (any attention kernel), and a second all-to-all brings the output
back to sequence shards.  Four all-to-alls per layer (Q, K, V, output), each moving
``(P - 1) / P`` of a rank's ``b s h / P`` elements: the per-rank volume *falls* as ``1 / P``,
whereas ring attention sends its K/V shard ``P - 1`` times (:func:`comm_elements`).  The price:
``P`` must divide the number of heads.
"""

from __future__ import annotations

import torch

from labs import dist
from labs.attention.flash import naive_attention

__all__ = ["seq_to_heads", "heads_to_seq", "ulysses_attention", "comm_elements"]


def _a2a(x: torch.Tensor, group) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    return out


def _seq_to_heads(x: torch.Tensor, group) -> torch.Tensor:
    p = dist.get_world_size(group)
    b, n, h, d = x.shape
    # dim 0 = destination rank = head group; the output's dim 0 = source rank = sequence shard
    parts = x.view(b, n, p, h // p, d).permute(2, 0, 1, 3, 4)  # (p, b, n, h/p, d)
    got = _a2a(parts, group)  # (p source shards, b, n, h/p, d)
    return got.permute(1, 0, 2, 3, 4).reshape(b, p * n, h // p, d)


def _heads_to_seq(y: torch.Tensor, group) -> torch.Tensor:
    p = dist.get_world_size(group)
    b, s, hp, d = y.shape
    parts = y.view(b, p, s // p, hp, d).permute(1, 0, 2, 3, 4)  # (p dest shards, b, n, h/p, d)
    got = _a2a(parts, group)  # (p source head groups, b, n, h/p, d)
    return got.permute(1, 2, 0, 3, 4).reshape(b, s // p, p * hp, d)


class _SeqToHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _seq_to_heads(x, group)

    @staticmethod
    def backward(ctx, g):
        return _heads_to_seq(g, ctx.group), None


class _HeadsToSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, group):
        ctx.group = group
        return _heads_to_seq(y, group)

    @staticmethod
    def backward(ctx, g):
        return _seq_to_heads(g, ctx.group), None


def _check(x: torch.Tensor, group, fn: str) -> None:
    p = dist.get_world_size(group)
    if x.dim() != 4:
        raise ValueError(f"{fn}: expected (batch, tokens, heads, head_dim), got {tuple(x.shape)}")
    if x.shape[2] % p:
        raise ValueError(
            f"{fn}: Ulysses needs the number of heads ({x.shape[2]}) divisible by the "
            f"sequence-parallel degree ({p}); use {p} | heads, fewer ranks, or ring attention"
        )


def seq_to_heads(x: torch.Tensor, group=None) -> torch.Tensor:
    """``(b, s/P, H, d)`` sequence shard -> ``(b, s, H/P, d)`` head shard (differentiable)."""
    _check(x, group, "seq_to_heads")
    return _SeqToHeads.apply(x, group)


def heads_to_seq(y: torch.Tensor, group=None) -> torch.Tensor:
    """``(b, s, H/P, d)`` head shard -> ``(b, s/P, H, d)`` sequence shard (differentiable)."""
    if y.dim() != 4 or y.shape[1] % dist.get_world_size(group):
        raise ValueError(
            f"heads_to_seq: expected (batch, tokens, heads/P, head_dim) with tokens divisible by "
            f"P={dist.get_world_size(group)}, got {tuple(y.shape)}"
        )
    return _HeadsToSeq.apply(y, group)


def ulysses_attention(q, k, v, causal: bool = False, group=None) -> torch.Tensor:
    """Attention of sequence-sharded ``(b, s/P, H, d)`` q, k, v over the whole sequence.

    Rank ``r`` holds tokens ``[r s/P, (r+1) s/P)``; returns its ``(b, s/P, H, d)`` output shard.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check(t, group, f"ulysses_attention({name})")
    qh, kh, vh = (seq_to_heads(t, group).transpose(1, 2) for t in (q, k, v))  # (b, H/P, s, d)
    o = naive_attention(qh, kh, vh, causal=causal)
    return heads_to_seq(o.transpose(1, 2).contiguous(), group)


def comm_elements(b: int, s: int, h: int, p: int, method: str) -> float:
    """Elements one rank sends in the forward pass of one attention layer.

    ``"ring"``: its K and V shard (``2 b s h / P``) to the next rank, ``P - 1`` times:
    ``2 b s h (P - 1) / P``.  ``"ulysses"``: four all-to-alls of ``b s h / P`` elements, each
    keeping ``1 / P`` at home: ``4 b s h (P - 1) / P^2``.
    """
    if method == "ring":
        return 2 * b * s * h * (p - 1) / p
    if method == "ulysses":
        return 4 * b * s * h * (p - 1) / p**2
    raise ValueError(f"method must be 'ring' or 'ulysses', got {method!r}")
