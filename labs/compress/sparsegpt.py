"""SparseGPT: prune a weight column by column and let the surviving weights compensate.

Frantar and Alistarh (2023) apply Optimal Brain Surgeon's update to one-shot pruning: with the
layer Hessian ``H = 2 X^T X / N`` (dampened) and ``U`` the upper Cholesky factor of ``H^{-1}``,
removing weight ``W[r, i]`` costs about ``W[r, i]^2 / U[i, i]^2`` in output error, and the best
correction of the columns to its right is the same one GPTQ uses for a rounding error::

    err = (W[:, i] - P[:, i]) / U[i, i]          # P: column i with its pruned entries set to 0
    W[:, i:] -= err[:, None] * U[i, i:][None, :]

The mask of each block of ``block_size`` columns is chosen just before the block is processed,
from the scores of the *updated* weights (adaptive mask selection); for N:M sparsity it is chosen
for every run of ``m`` columns. Compare :mod:`labs.compress.gptq`: the same loop, with "set to
zero" in place of "round".
"""

from __future__ import annotations

import torch
import torch.nn as nn

from labs.compress.calibrate import hessian, sequential
from labs.compress.gptq import inverse_cholesky
from labs.compress.pruning import check_sparsity

__all__ = ["sparsegpt", "sparsegpt_model"]


@torch.no_grad()
def sparsegpt(
    w: torch.Tensor,
    h: torch.Tensor,
    sparsity: float = 0.5,
    n: int = 0,
    m: int = 0,
    block_size: int = 128,
    damp: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Prune ``w`` (out, in) with the OBS update, given its layer Hessian ``h`` (in, in).

    Args:
        sparsity: fraction of each block's weights to remove (unstructured; ignored for N:M).
        n, m: with ``n > 0``, keep ``n`` of every ``m`` consecutive inputs of a row (2:4 is
            ``n=2, m=4``); ``in`` and ``block_size`` must be multiples of ``m``.
        damp: fraction of the mean diagonal added to ``H`` (as in GPTQ).

    Returns:
        ``(pruned weight, mask)``: the updated weight with exact zeros where ``mask`` is False.
    """
    rows, cols = w.shape
    if h.shape != (cols, cols):
        raise ValueError(f"sparsegpt: Hessian must be ({cols}, {cols}) for w {tuple(w.shape)}")
    if n:
        if not 0 < n < m or cols % m or block_size % m:
            raise ValueError(
                f"sparsegpt: need 0 < n < m with in ({cols}) and block_size ({block_size}) "
                f"multiples of m; got n={n}, m={m}"
            )
    else:
        check_sparsity(sparsity)
    W = w.double().clone()
    h = h.double().clone()
    dead = h.diagonal() == 0
    h[dead, dead] = 1.0
    W[:, dead] = 0.0
    U = inverse_cholesky(h, damp)
    pruned = torch.zeros(rows, cols, dtype=torch.bool, device=W.device)
    for i1 in range(0, cols, block_size):
        i2 = min(i1 + block_size, cols)
        W1, err1 = W[:, i1:i2].clone(), torch.zeros(rows, i2 - i1, dtype=W.dtype, device=W.device)
        d = U.diagonal()[i1:i2]
        drop = torch.zeros_like(W1, dtype=torch.bool)
        if not n:
            score = (W1 / d) ** 2
            k = round(sparsity * score.numel())
            if k:
                drop.view(-1)[score.reshape(-1).topk(k, largest=False).indices] = True
        for i in range(i2 - i1):
            if n and i % m == 0:
                score = (W1[:, i : i + m] / d[i : i + m]) ** 2
                drop[:, i : i + m].scatter_(
                    1, score.topk(m - n, dim=1, largest=False).indices, True
                )
            q = W1[:, i].clone()
            q[drop[:, i]] = 0.0
            err = (W1[:, i] - q) / U[i1 + i, i1 + i]
            W1[:, i:] -= err[:, None] * U[i1 + i, i1 + i : i2][None, :]
            W1[:, i] = q
            err1[:, i] = err
        W[:, i1:i2] = W1
        W[:, i2:] -= err1 @ U[i1:i2, i2:]
        pruned[:, i1:i2] = drop
    W[pruned] = 0.0
    return W.to(w.dtype), ~pruned


def sparsegpt_model(
    model: nn.Module,
    ids: torch.Tensor,
    sparsity: float = 0.5,
    n: int = 0,
    m: int = 0,
    names: list[str] | None = None,
    **kwargs,
) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """SparseGPT on every named linear layer of a copy of ``model``, sequentially.

    Returns ``(pruned copy, {name: bool mask})``; pass the masks to
    :func:`labs.compress.pruning.apply_masks` to fine-tune with the zeros held fixed.
    """

    def step(_name, w, x):
        return sparsegpt(w, hessian(x), sparsity, n, m, **kwargs)

    return sequential(model, ids, step, names)
