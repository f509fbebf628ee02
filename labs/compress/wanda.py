"""Wanda: prune by weight magnitude times input norm, comparing weights within an output row.

Sun et al. (2024) observed that a weight's effect on the output is ``|W[i, j]| * |x_j|``, so in a
model whose inputs differ in scale by orders of magnitude (LLM outlier features) the smallest
weights are not the least important ones. Their score::

    S[i, j] = |W[i, j]| * ||X[:, j]||_2        # X: calibration inputs (tokens, in)

is compared *per output row* (every output keeps the same number of inputs), needs one forward
pass and no weight update. It is the diagonal of SparseGPT's score (``||X_j||^2`` is ``N/2`` times
``H[j, j]``) without the update.

* :func:`wanda_scores` -- the score matrix.
* :func:`wanda_mask` -- per-row unstructured, or N:M, mask from the scores.
* :func:`wanda_model` -- every linear layer of a model, calibrated sequentially.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from labs.compress.calibrate import sequential
from labs.compress.pruning import check_sparsity

__all__ = ["wanda_scores", "wanda_mask", "wanda_model"]


def wanda_scores(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``|W| * ||X_j||_2``: weight (out, in), calibration inputs x (tokens, in) -> (out, in)."""
    if w.dim() != 2 or x.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(
            f"wanda_scores: need w (out, in) and x (tokens, in), got {tuple(w.shape)} "
            f"and {tuple(x.shape)}"
        )
    return w.detach().abs() * x.detach().float().norm(dim=0)[None, :]


def wanda_mask(
    w: torch.Tensor, x: torch.Tensor, sparsity: float = 0.5, n: int = 0, m: int = 0
) -> torch.Tensor:
    """Bool mask (True keeps) removing the lowest Wanda scores of every output row.

    Each row loses ``round(sparsity * in)`` weights; with ``n > 0`` every run of ``m``
    consecutive inputs of a row keeps its ``n`` highest scores instead (2:4: ``n=2, m=4``).
    """
    score = wanda_scores(w, x)
    rows, cols = score.shape
    if n:
        if not 0 < n < m or cols % m:
            raise ValueError(f"wanda_mask: need 0 < n < m and in % m == 0, got n={n}, m={m}")
        groups = score.reshape(-1, m)
        keep = torch.zeros_like(groups, dtype=torch.bool)
        keep.scatter_(1, groups.topk(n, dim=1).indices, True)
        return keep.view(rows, cols)
    k = round(check_sparsity(sparsity) * cols)
    keep = torch.ones_like(score, dtype=torch.bool)
    if k:
        keep.scatter_(1, score.topk(k, dim=1, largest=False).indices, False)
    return keep


def wanda_model(
    model: nn.Module,
    ids: torch.Tensor,
    sparsity: float = 0.5,
    n: int = 0,
    m: int = 0,
    names: list[str] | None = None,
) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """Wanda on every named linear layer of a copy of ``model``, calibrated sequentially.

    Returns ``(pruned copy, {name: bool mask})``.
    """

    def step(_name, w, x):
        mask = wanda_mask(w, x, sparsity, n, m)
        return w * mask, mask

    return sequential(model, ids, step, names)
