"""Tensor parallelism in the style of Megatron-LM (Chapter 15).

A linear layer ``y = x W`` (``W``: in x out) can be split over ``t`` ranks two ways:

* **column parallel**: rank ``i`` holds columns ``W[:, i]`` and computes ``y_i = x W_i``, a slice
  of the output; the input must be on every rank;
* **row parallel**: rank ``i`` holds rows ``W_i`` and the matching slice ``x_i`` of the input and
  computes a *partial sum* ``x_i W_i``; ``y`` is the sum over ranks (an all-reduce).

Megatron's MLP puts a column-parallel layer before the GeLU and a row-parallel one after it, so the
GeLU runs on local slices and the block needs one all-reduce forward.  Two autograd functions
carry the communication:

* ``f`` (:func:`copy_to_tp`): identity forward, all-reduce of the gradient backward;
* ``g`` (:func:`reduce_from_tp`): all-reduce forward, identity backward.

The modules below are built from an ordinary (unsplit) module, so a test can compare the outputs
and gradients of both.  Weights are stored as in ``torch.nn.Linear`` (out x in): a column split of
the math's ``W`` is a split of ``weight`` along dim 0.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from labs import dist

__all__ = [
    "column_parallel_matmul",
    "row_parallel_matmul",
    "copy_to_tp",
    "reduce_from_tp",
    "ColumnParallelLinear",
    "RowParallelLinear",
    "MLP",
    "ParallelMLP",
    "causal_attention",
    "SelfAttention",
    "ParallelSelfAttention",
]


def _split(n: int, parts: int, what: str) -> int:
    if parts < 1 or n % parts:
        raise ValueError(
            f"{what}: size {n} does not split evenly over {parts} ranks; "
            f"pick a tensor-parallel degree that divides {n}"
        )
    return n // parts


def column_parallel_matmul(x: np.ndarray, w: np.ndarray, parts: int) -> list[np.ndarray]:
    """``x @ w`` with ``w`` (in x out) split by columns: returns each rank's output slice
    (shape ``x.shape[:-1] + (out / parts,)``); concatenating them gives ``x @ w``."""
    k = _split(w.shape[1], parts, "column_parallel_matmul")
    return [x @ w[:, i * k : (i + 1) * k] for i in range(parts)]


def row_parallel_matmul(x: np.ndarray, w: np.ndarray, parts: int) -> list[np.ndarray]:
    """``x @ w`` with ``w`` (in x out) split by rows and ``x`` by columns: returns each rank's
    partial sum (shape of the full output); their sum is ``x @ w``."""
    k = _split(w.shape[0], parts, "row_parallel_matmul")
    return [x[..., i * k : (i + 1) * k] @ w[i * k : (i + 1) * k] for i in range(parts)]


class _CopyToTP(torch.autograd.Function):
    """f: identity in the forward pass, all-reduce (sum) of the gradient in the backward pass."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce (sum) in the forward pass, identity in the backward pass."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def copy_to_tp(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's f: returns ``x``; its gradient is summed over the tensor-parallel group."""
    return _CopyToTP.apply(x, group)


def reduce_from_tp(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's g: the sum of ``x`` over the tensor-parallel group; gradient passes through."""
    return _ReduceFromTP.apply(x, group)


class ColumnParallelLinear(nn.Module):
    """This rank's column slice of ``full`` (an ``nn.Linear``): output features
    ``[rank * out/t, (rank + 1) * out/t)``.  Input (..., in) -> output (..., out / t).
    Applies f to its input so the input gradient is summed over the group."""

    def __init__(self, full: nn.Linear, rank: int, size: int, group=None):
        super().__init__()
        k = _split(full.out_features, size, "ColumnParallelLinear")
        self.group = group
        self.weight = nn.Parameter(full.weight.detach()[rank * k : (rank + 1) * k].clone())
        b = full.bias
        self.bias = (
            None if b is None else nn.Parameter(b.detach()[rank * k : (rank + 1) * k].clone())
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(copy_to_tp(x, self.group), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """This rank's row slice of ``full``: input features ``[rank * in/t, (rank + 1) * in/t)``.
    Input (..., in / t) -> output (..., out), summed over the group with g; the bias is added
    once, after the sum."""

    def __init__(self, full: nn.Linear, rank: int, size: int, group=None):
        super().__init__()
        k = _split(full.in_features, size, "RowParallelLinear")
        self.group = group
        self.weight = nn.Parameter(full.weight.detach()[:, rank * k : (rank + 1) * k].clone())
        b = full.bias
        self.bias = None if b is None else nn.Parameter(b.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = reduce_from_tp(nn.functional.linear(x, self.weight), self.group)
        return y if self.bias is None else y + self.bias


class MLP(nn.Module):
    """The unsplit transformer MLP: Linear(d, h) -> GeLU -> Linear(h, d).  (batch, seq, d)."""

    def __init__(self, d: int, h: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class ParallelMLP(nn.Module):
    """Megatron's MLP: column-parallel fc1, local GeLU, row-parallel fc2.  One all-reduce in the
    forward pass (g after fc2) and one in the backward pass (f before fc1)."""

    def __init__(self, full: MLP, rank: int, size: int, group=None):
        super().__init__()
        self.fc1 = ColumnParallelLinear(full.fc1, rank, size, group)
        self.fc2 = RowParallelLinear(full.fc2, rank, size, group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(nn.functional.gelu(self.fc1(x)))


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    """Causal softmax attention of (batch, seq, heads * dh) projections, head by head."""
    b, s, width = q.shape
    dh = width // heads
    q, k, v = (t.view(b, s, heads, dh).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    out = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
    return out.transpose(1, 2).reshape(b, s, heads * dh)


class SelfAttention(nn.Module):
    """Unsplit causal multi-head self-attention with separate q, k, v projections and an output
    projection.  (batch, seq, d) -> (batch, seq, d); ``heads`` heads of size d / heads."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.dh = heads, _split(d, heads, "SelfAttention heads")
        self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(causal_attention(self.q(x), self.k(x), self.v(x), self.heads))


class ParallelSelfAttention(nn.Module):
    """Megatron's attention: each rank owns heads / t heads (column slices of q, k, v), attends
    locally, and applies its row slice of the output projection; g sums the partial outputs."""

    def __init__(self, full: SelfAttention, rank: int, size: int, group=None):
        super().__init__()
        self.local_heads = _split(full.heads, size, "ParallelSelfAttention heads")
        self.group = group
        self.q, self.k, self.v = (
            ColumnParallelLinear(lin, rank, size, group) for lin in (full.q, full.k, full.v)
        )
        self.proj = RowParallelLinear(full.proj, rank, size, group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One f for the shared input (not three): the gradients of q, k, v are summed locally first.
        x = copy_to_tp(x, self.group)
        q, k, v = (nn.functional.linear(x, m.weight, m.bias) for m in (self.q, self.k, self.v))
        return self.proj(causal_attention(q, k, v, self.local_heads))
