"""Exact attention, naive and tiled: the code behind Chapter 11 (FlashAttention).

Every function takes tensors shaped ``(batch, heads, seq, head_dim)``:

* :func:`naive_attention` -- ``softmax(q k^T * scale) v`` with the full ``seq_q x seq_k`` score
  matrix in memory: the reference.
* :func:`online_softmax` -- the one-pass ("online") softmax of a 1-D vector read block by block.
* :func:`flash_attention` -- FlashAttention-2 in PyTorch: query blocks in the outer loop,
  key/value blocks in the inner loop, a running max and sum per query row, one division at the
  end, fully masked key blocks skipped under ``causal``.  Differentiable: the backward pass
  recomputes the probabilities from the saved log-sum-exp instead of keeping a ``seq x seq``
  tensor between forward and backward.

``causal=True`` lets query ``i`` see keys ``j <= i`` (the top-left-aligned mask of
``torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)``).
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "check_attention_inputs",
    "naive_attention",
    "online_softmax",
    "online_softmax_update",
    "flash_attention",
    "flash_attention_forward",
    "flash_attention_backward",
]


def check_attention_inputs(q, k, v, block_q: int = 1, block_k: int = 1) -> None:
    """Raise ``ValueError`` unless q, k, v (and the block sizes) describe a valid attention call.

    Expected: q ``(B, H, Nq, d)``, k ``(B, H, Nk, d)``, v ``(B, H, Nk, dv)``, one floating dtype,
    one device, ``Nq, Nk >= 1`` and positive integer block sizes.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(
                f"attention: {name} must have 4 dims (batch, heads, seq, head_dim), "
                f"got shape {tuple(t.shape)}"
            )
        if not t.is_floating_point():
            raise ValueError(f"attention: {name} must be floating point, got {t.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(
            f"attention: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}; "
            "cast them with .to(dtype)"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"attention: q, k, v must be on one device, got {q.device}, {k.device}, {v.device}"
        )
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(
            "attention: batch and heads must match, got q "
            f"{tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[3] != k.shape[3]:
        raise ValueError(f"attention: q and k head_dim differ: {q.shape[3]} vs {k.shape[3]}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"attention: k and v seq lengths differ: {k.shape[2]} vs {v.shape[2]}")
    if q.shape[2] < 1 or k.shape[2] < 1:
        raise ValueError(f"attention: empty sequence, q {tuple(q.shape)}, k {tuple(k.shape)}")
    for name, b in (("block_q", block_q), ("block_k", block_k)):
        if isinstance(b, bool) or not isinstance(b, int) or b <= 0:
            raise ValueError(f"attention: {name} must be a positive int, got {b!r}")


def _scale(q: torch.Tensor, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def naive_attention(q, k, v, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """``softmax(q @ k^T * scale [+ causal mask]) @ v``, materialising the full score matrix.

    Args:
        q: ``(B, H, Nq, d)``; k: ``(B, H, Nk, d)``; v: ``(B, H, Nk, dv)``.
        causal: mask key ``j`` for query ``i`` when ``j > i``.
        scale: score scale, default ``1/sqrt(d)``.

    Returns:
        ``(B, H, Nq, dv)`` in the dtype of q. Peak extra memory ~ ``2 * B * H * Nq * Nk`` elements.
    """
    check_attention_inputs(q, k, v)
    s = (q @ k.transpose(-1, -2)) * _scale(q, scale)
    if causal:
        n_q, n_k = q.shape[2], k.shape[2]
        mask = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def online_softmax(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """Softmax of a 1-D vector whose statistics are gathered in one pass over blocks.

    The pass keeps a running max ``m`` and a running sum ``l = sum exp(x_j - m)``; when a block
    raises the max, ``l`` is rescaled by ``exp(m_old - m_new)``.  A second, elementwise pass
    writes ``exp(x - m) / l``.  Stable for any finite input (no ``exp`` of a positive number).
    """
    if x.dim() != 1 or x.numel() == 0:
        raise ValueError(f"online_softmax: expected a non-empty 1-D tensor, got {tuple(x.shape)}")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"online_softmax: block_size must be a positive int, got {block_size!r}")
    m = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)
    l = torch.tensor(0.0, dtype=x.dtype, device=x.device)
    for start in range(0, x.numel(), block_size):
        blk = x[start : start + block_size]
        m_new = torch.maximum(m, blk.max())
        l = l * torch.exp(m - m_new) + torch.exp(blk - m_new).sum()
        m = m_new
    return torch.exp(x - m) / l


def online_softmax_update(m, l, acc, s_blk, v_blk):
    """Fold one block of scores into the running statistics of FlashAttention-2.

    Args:
        m: running row max ``(..., Br)``; ``-inf`` before the first block.
        l: running row sum of ``exp(s - m)`` ``(..., Br)``.
        acc: unnormalised output ``sum_j exp(s_ij - m) v_j``, ``(..., Br, dv)``.
        s_blk: scores of this block ``(..., Br, Bc)`` (``-inf`` where masked); it is
            overwritten with ``exp(s_blk - m_new)``, which saves a tile-sized allocation.
        v_blk: values of this block ``(..., Bc, dv)``.

    Returns:
        ``(m_new, l_new, acc_new)``; the output of the rows seen so far is ``acc_new / l_new``.
    """
    m_new = torch.maximum(m, s_blk.amax(dim=-1))
    # A row that has seen only masked scores keeps m = -inf: shift it by a finite number instead,
    # so that exp(-inf - shift) = 0 rather than exp(-inf + inf) = nan.
    shift = m_new.clamp(min=torch.finfo(m_new.dtype).min)
    alpha = torch.exp(m - shift)  # rescales what was accumulated under the old max
    p = s_blk.sub_(shift.unsqueeze(-1)).exp_()
    l_new = alpha * l + p.sum(dim=-1)
    acc_new = (acc * alpha.unsqueeze(-1)).add_(p @ v_blk)
    return m_new, l_new, acc_new


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _causal_mask(q_start: int, q_end: int, k_start: int, k_end: int, device) -> torch.Tensor | None:
    """Boolean mask (True = hidden) of a tile, or None when no entry of the tile is hidden."""
    if k_end - 1 <= q_start:  # every key index <= every query index
        return None
    rows = torch.arange(q_start, q_end, device=device).unsqueeze(1)
    cols = torch.arange(k_start, k_end, device=device).unsqueeze(0)
    return cols > rows


def flash_attention_forward(
    q,
    k,
    v,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = 256,
    block_k: int = 256,
):
    """FlashAttention-2 forward pass without autograd; returns ``(o, lse)``.

    ``o`` is ``(B, H, Nq, dv)`` in q's dtype; ``lse`` is the natural log-sum-exp of each row of
    scaled scores, ``(B, H, Nq)``, in float32 (float64 for float64 inputs).  Extra memory is one
    ``(B, H, block_q, block_k)`` tile plus ``O(B * H * Nq * dv)`` accumulators.
    """
    check_attention_inputs(q, k, v, block_q, block_k)
    sc = _scale(q, scale)
    acc_t = _acc_dtype(q.dtype)
    qa, ka, va = q.to(acc_t), k.to(acc_t), v.to(acc_t)
    b, h, n_q, _ = q.shape
    n_k, dv = k.shape[2], v.shape[3]
    o = torch.empty(b, h, n_q, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(b, h, n_q, dtype=acc_t, device=q.device)
    for qs in range(0, n_q, block_q):  # outer loop: query blocks (independent: parallel on a GPU)
        qe = min(qs + block_q, n_q)
        q_blk = qa[:, :, qs:qe] * sc
        m = torch.full((b, h, qe - qs), float("-inf"), dtype=acc_t, device=q.device)
        l = torch.zeros(b, h, qe - qs, dtype=acc_t, device=q.device)
        acc = torch.zeros(b, h, qe - qs, dv, dtype=acc_t, device=q.device)
        k_stop = min(n_k, qe) if causal else n_k  # key blocks past the last query are all masked
        for ks in range(0, k_stop, block_k):  # inner loop: key/value blocks
            ke = min(ks + block_k, n_k)
            s = q_blk @ ka[:, :, ks:ke].transpose(-1, -2)
            mask = _causal_mask(qs, qe, ks, ke, q.device) if causal else None
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            m, l, acc = online_softmax_update(m, l, acc, s, va[:, :, ks:ke])
        o[:, :, qs:qe] = (acc / l.unsqueeze(-1)).to(q.dtype)  # one normalisation per row
        lse[:, :, qs:qe] = m + torch.log(l)
    return o, lse


def flash_attention_backward(
    q, k, v, o, lse, grad_o, causal=False, scale=None, block_q: int = 256, block_k: int = 256
):
    """Gradients ``(dq, dk, dv)`` of FlashAttention, recomputing ``P = exp(S - lse)`` per tile.

    FlashAttention-2 order: key/value blocks outside (their ``dk``, ``dv`` stay in registers on a
    GPU), query blocks inside (``dq`` accumulated).  ``D = rowsum(dO * O)`` replaces the
    ``rowsum(dP * P)`` of the softmax backward, so ``dS = P * (dP - D)``.
    """
    check_attention_inputs(q, k, v, block_q, block_k)
    sc = _scale(q, scale)
    acc_t = _acc_dtype(q.dtype)
    qa, ka, va, oa, ga = (t.to(acc_t) for t in (q, k, v, o, grad_o))
    n_q, n_k = q.shape[2], k.shape[2]
    d_rows = (ga * oa).sum(dim=-1)  # (B, H, Nq)
    dq = torch.zeros_like(qa)
    dk = torch.zeros_like(ka)
    dv = torch.zeros_like(va)
    for ks in range(0, n_k, block_k):  # outer loop: key/value blocks
        ke = min(ks + block_k, n_k)
        k_blk, v_blk = ka[:, :, ks:ke], va[:, :, ks:ke]
        q_first = (ks // block_q) * block_q if causal else 0  # earlier query blocks see no key here
        for qs in range(q_first, n_q, block_q):  # inner loop: query blocks
            qe = min(qs + block_q, n_q)
            s = (qa[:, :, qs:qe] @ k_blk.transpose(-1, -2)) * sc
            p = torch.exp(s - lse[:, :, qs:qe].unsqueeze(-1))
            mask = _causal_mask(qs, qe, ks, ke, q.device) if causal else None
            if mask is not None:
                p = p.masked_fill(mask, 0.0)
            g_blk = ga[:, :, qs:qe]
            dv[:, :, ks:ke] += p.transpose(-1, -2) @ g_blk
            dp = g_blk @ v_blk.transpose(-1, -2)
            ds = p * (dp - d_rows[:, :, qs:qe].unsqueeze(-1))
            dq[:, :, qs:qe] += (ds @ k_blk) * sc
            dk[:, :, ks:ke] += (ds.transpose(-1, -2) @ qa[:, :, qs:qe]) * sc
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _FlashAttention(torch.autograd.Function):
    """Saves q, k, v, o and the log-sum-exp (O(N) per row), never the probabilities."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, block_q, block_k):
        o, lse = flash_attention_forward(q, k, v, causal, scale, block_q, block_k)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.args = (causal, scale, block_q, block_k)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_o, _grad_lse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(q, k, v, o, lse, grad_o, *ctx.args)
        return dq, dk, dv, None, None, None, None


def flash_attention(
    q,
    k,
    v,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = 256,
    block_k: int = 256,
    return_lse: bool = False,
):
    """Exact attention computed tile by tile (FlashAttention-2), differentiable.

    Args:
        q: ``(B, H, Nq, d)``; k: ``(B, H, Nk, d)``; v: ``(B, H, Nk, dv)``; one dtype and device.
        causal: query ``i`` sees keys ``j <= i``; key blocks entirely above the diagonal are
            skipped, not computed and masked.
        scale: score scale, default ``1/sqrt(d)``.
        block_q, block_k: tile sizes (rows of q, rows of k/v); any positive ints, the sequence
            lengths need not be multiples of them.
        return_lse: also return the ``(B, H, Nq)`` log-sum-exp of the scaled scores.

    Returns:
        ``o`` of shape ``(B, H, Nq, dv)``, or ``(o, lse)`` with ``return_lse``.

    Raises:
        ValueError: mismatched shapes, dtypes or devices, or a non-positive block size.
    """
    check_attention_inputs(q, k, v, block_q, block_k)
    o, lse = _FlashAttention.apply(q, k, v, causal, scale, block_q, block_k)
    return (o, lse) if return_lse else o
