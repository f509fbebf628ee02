"""The backward kernels of the Triton FlashAttention-2 in :mod:`labs.attention.triton_fwd`.

Two kernels recompute the probabilities tile by tile from the saved log-sum-exp
(``P = exp(S - L)``): :func:`bwd_dkdv_kernel` (one program per key block, accumulating ``dK`` and
``dV`` over the query blocks) and :func:`bwd_dq_kernel` (one program per query block, accumulating
``dQ`` over the key blocks).  They are plain functions here; :func:`labs.attention.triton_fwd.load_triton`
decorates them with ``triton.jit`` and launches them.

This module imports Triton, so it is imported lazily by ``load_triton``.  Without a GPU it sets
``TRITON_INTERPRET=1`` first, in case it is the first module of the process to import Triton.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the process's first `import triton`

import triton.language as tl  # noqa: E402

__all__ = ["bwd_dkdv_kernel", "bwd_dq_kernel"]  # launched by labs.attention.triton_fwd


def bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV, scale,
    H, N_Q, N_K, D,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """One program = one key block; recomputes P tile by tile over query blocks.

    All tensors here are contiguous ``(B*H, N, D)``; LSE and DELTA are ``(B*H, N_Q)``.
    """
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_D)
    rows0 = tl.arange(0, BLOCK_M)
    kv_mask = (cols[:, None] < N_K) & (dims[None, :] < D)
    kv_off = bh * N_K * D + cols[:, None] * D + dims[None, :]
    k = tl.load(K + kv_off, mask=kv_mask, other=0.0)
    v = tl.load(V + kv_off, mask=kv_mask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    lo = 0
    if CAUSAL:  # query blocks above this key block never see it
        lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M
    for start_m in range(lo, N_Q, BLOCK_M):
        rows = start_m + rows0
        q_mask = (rows[:, None] < N_Q) & (dims[None, :] < D)
        q_off = bh * N_Q * D + rows[:, None] * D + dims[None, :]
        q = tl.load(Q + q_off, mask=q_mask, other=0.0)
        do = tl.load(DO + q_off, mask=q_mask, other=0.0)
        lse = tl.load(LSE + bh * N_Q + rows, mask=rows < N_Q, other=0.0)
        delta = tl.load(DELTA + bh * N_Q + rows, mask=rows < N_Q, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
        keep = (rows[:, None] < N_Q) & (cols[None, :] < N_K)
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
        dv += tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PRECISION)
    tl.store(DK + kv_off, (dk * scale).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_mask)


def bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ, scale,
    H, N_Q, N_K, D,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """One program = one query block; accumulates dQ over key blocks (no atomics needed)."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    cols0 = tl.arange(0, BLOCK_N)
    q_mask = (rows[:, None] < N_Q) & (dims[None, :] < D)
    q_off = bh * N_Q * D + rows[:, None] * D + dims[None, :]
    q = tl.load(Q + q_off, mask=q_mask, other=0.0)
    do = tl.load(DO + q_off, mask=q_mask, other=0.0)
    lse = tl.load(LSE + bh * N_Q + rows, mask=rows < N_Q, other=0.0)
    delta = tl.load(DELTA + bh * N_Q + rows, mask=rows < N_Q, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    hi = N_K
    if CAUSAL:
        hi = tl.minimum(N_K, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + cols0
        kv_mask = (cols[:, None] < N_K) & (dims[None, :] < D)
        kv_off = bh * N_K * D + cols[:, None] * D + dims[None, :]
        k = tl.load(K + kv_off, mask=kv_mask, other=0.0)
        v = tl.load(V + kv_off, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
        keep = (rows[:, None] < N_Q) & (cols[None, :] < N_K)
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    tl.store(DQ + q_off, (dq * scale).to(DQ.dtype.element_ty), mask=q_mask)
