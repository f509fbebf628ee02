"""Sequence parallelism (Korthikanti et al. 2022) around a tensor-parallel transformer block.

Tensor parallelism (Chapter 15) splits the attention heads and the MLP's hidden units, but the
layer norms, dropouts and residual adds between the parallel regions still run on the whole
``(b, s, h)`` activation on every rank, and keep it for backward.  Sequence parallelism splits
those parts along the sequence: between the parallel regions each rank holds ``s / t`` tokens.
Where the TP block had an all-reduce, the SP block has

* an **all-gather** along the sequence before the column-parallel linears (its backward: a
  reduce-scatter), and
* a **reduce-scatter** along the sequence after the row-parallel linears (its backward: an
  all-gather),

the same bytes on the wire as the all-reduce they replace (an all-reduce *is* a reduce-scatter
followed by an all-gather).  The column-parallel linear keeps only its ``s / t`` input shard for
backward and all-gathers it again there, as Megatron-LM does, so every saved activation is split.

:class:`TPBlock` and :class:`SPBlock` are built from a :class:`labs.gpt.Block`; both equal it.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from labs import dist
from labs.parallel.tensor_parallel import ColumnParallelLinear, RowParallelLinear

__all__ = ["gather_seq", "scatter_seq", "TPBlock", "SPBlock"]


def _all_gather_seq(x: torch.Tensor, group) -> torch.Tensor:
    p = dist.get_world_size(group)
    x = x.transpose(0, 1).contiguous()  # (s/t, b, ...): the gathered dim first
    out = x.new_empty((p * x.shape[0], *x.shape[1:]))
    dist.all_gather_into_tensor(out, x, group=group)
    return out.transpose(0, 1)


def _reduce_scatter_seq(x: torch.Tensor, group) -> torch.Tensor:
    p = dist.get_world_size(group)
    x = x.transpose(0, 1).contiguous()
    if x.shape[0] % p:
        raise ValueError(f"sequence length {x.shape[0]} is not divisible by the TP degree {p}")
    out = x.new_empty((x.shape[0] // p, *x.shape[1:]))
    dist.reduce_scatter_tensor(out, x, group=group)
    return out.transpose(0, 1)


class _GatherSeq(torch.autograd.Function):
    """All-gather along dim 1 (sequence); backward: reduce-scatter (sum of the ranks' grads)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _all_gather_seq(x, group)

    @staticmethod
    def backward(ctx, g):
        return _reduce_scatter_seq(g, ctx.group), None


class _ScatterSeq(torch.autograd.Function):
    """Reduce-scatter along dim 1 (sum over ranks, keep my slice); backward: all-gather."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _reduce_scatter_seq(x, group)

    @staticmethod
    def backward(ctx, g):
        return _all_gather_seq(g, ctx.group), None


def gather_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    """``(b, s/t, ...)`` -> ``(b, s, ...)``: the ranks' sequence shards, in rank order."""
    return _GatherSeq.apply(x, group)


def scatter_seq(x: torch.Tensor, group=None) -> torch.Tensor:
    """``(b, s, ...)`` partial sums -> ``(b, s/t, ...)``: their sum, this rank's shard."""
    return _ScatterSeq.apply(x, group)


class _GatherLinear(torch.autograd.Function):
    """``all_gather_seq(x) @ w.T + bias`` saving only the shard ``x`` (gathered again in
    backward, Megatron-LM's choice: memory for a second all-gather)."""

    @staticmethod
    def forward(ctx, x, w, bias, group):
        ctx.save_for_backward(x, w)
        ctx.group, ctx.has_bias = group, bias is not None
        return F.linear(_all_gather_seq(x, group), w, bias)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        full = _all_gather_seq(x, ctx.group)
        gw = g.reshape(-1, g.shape[-1]).t() @ full.reshape(-1, full.shape[-1])
        gb = g.reshape(-1, g.shape[-1]).sum(0) if ctx.has_bias else None
        return _reduce_scatter_seq(g @ w, ctx.group), gw, gb, None


def _slice_rows(lin: nn.Linear, rank: int, size: int) -> tuple[nn.Parameter, nn.Parameter | None]:
    k = lin.out_features // size
    w = nn.Parameter(lin.weight.detach()[rank * k : (rank + 1) * k].clone())
    b = (
        None
        if lin.bias is None
        else nn.Parameter(lin.bias.detach()[rank * k : (rank + 1) * k].clone())
    )
    return w, b


def _attend(q, k, v, heads: int) -> torch.Tensor:
    b, s, w = q.shape
    q, k, v = (t.view(b, s, heads, w // heads).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(b, s, w)


class TPBlock(nn.Module):
    """Megatron tensor parallelism of a :class:`labs.gpt.Block`: heads and MLP hidden units
    split over the ``size`` ranks, layer norms replicated; input and output ``(b, s, h)``."""

    def __init__(self, full, rank: int, size: int, group=None):
        super().__init__()
        a = full.attn
        if a.n_head % size:
            raise ValueError(f"TPBlock: {a.n_head} heads do not split over {size} ranks")
        self.heads = a.n_head // size
        self.ln_1, self.ln_2 = copy.deepcopy(full.ln_1), copy.deepcopy(full.ln_2)
        self.q, self.k, self.v = (ColumnParallelLinear(m, rank, size, group)
                                  for m in (a.q_proj, a.k_proj, a.v_proj))  # fmt: skip
        self.o = RowParallelLinear(a.o_proj, rank, size, group)
        self.up = ColumnParallelLinear(full.mlp.up_proj, rank, size, group)
        self.down = RowParallelLinear(full.mlp.down_proj, rank, size, group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.ln_1(x)
        x = x + self.o(_attend(self.q(a), self.k(a), self.v(a), self.heads))
        return x + self.down(F.gelu(self.up(self.ln_2(x))))


class SPBlock(nn.Module):
    """Tensor + sequence parallelism of a :class:`labs.gpt.Block`: input and output are this
    rank's ``(b, s/t, h)`` sequence shard; an all-gather before and a reduce-scatter after
    each parallel region replace TP's all-reduces."""

    def __init__(self, full, rank: int, size: int, group=None):
        super().__init__()
        a = full.attn
        if a.n_head % size:
            raise ValueError(f"SPBlock: {a.n_head} heads do not split over {size} ranks")
        self.heads, self.group = a.n_head // size, group
        # replicated; each rank's gradient covers its tokens only: all-reduce them over the group
        self.ln_1, self.ln_2 = copy.deepcopy(full.ln_1), copy.deepcopy(full.ln_2)
        parts = [_slice_rows(m, rank, size) for m in (a.q_proj, a.k_proj, a.v_proj)]
        self.qkv_w = nn.Parameter(torch.cat([w for w, _ in parts]))  # fused: one all-gather
        self.qkv_b = None if parts[0][1] is None else nn.Parameter(torch.cat([b for _, b in parts]))
        self.o = RowParallelLinear(a.o_proj, rank, size, group)
        self.up_w, self.up_b = _slice_rows(full.mlp.up_proj, rank, size)
        self.down = RowParallelLinear(full.mlp.down_proj, rank, size, group)

    def _row(self, lin: RowParallelLinear, x: torch.Tensor) -> torch.Tensor:
        y = scatter_seq(F.linear(x, lin.weight), self.group)  # reduce-scatter, not all-reduce
        return y if lin.bias is None else y + lin.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = _GatherLinear.apply(self.ln_1(x), self.qkv_w, self.qkv_b, self.group)
        x = x + self._row(self.o, _attend(*qkv.chunk(3, dim=-1), self.heads))
        u = _GatherLinear.apply(self.ln_2(x), self.up_w, self.up_b, self.group)
        return x + self._row(self.down, F.gelu(u))
