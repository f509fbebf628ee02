"""Low-rank factorisation: replace a weight matrix W (out x in) by two thin ones of rank r.

The truncated SVD ``W ~ U_r S_r V_r^T`` is the best rank-r approximation in the Frobenius norm
(Eckart-Young), with relative error ``sqrt(sum_{i>r} s_i^2) / sqrt(sum_i s_i^2)``. As layers,
``x -> (x @ (S_r^1/2 V_r^T)^T) @ (U_r S_r^1/2)^T``: an ``in -> r`` layer without bias followed by
an ``r -> out`` layer with W's bias. It stores ``r (in + out)`` weights instead of ``in * out``,
so it saves memory and FLOPs only when ``r < in * out / (in + out)``. LoRA (Chapter 5) uses the
same factorisation for the *update* of a frozen weight instead of the weight itself.

* :func:`lowrank_error` -- relative Frobenius error of the best rank-r approximation.
* :func:`factorize_linear` -- an ``nn.Sequential`` of the two thin layers.
* :func:`factorize_model` -- a copy of a model with chosen linear layers factorised.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from labs.compress.measure import linear_names

__all__ = ["lowrank_error", "factorize_linear", "factorize_model", "break_even_rank"]


def _check_rank(rank: int, weight: torch.Tensor) -> None:
    top = min(weight.shape)
    if not isinstance(rank, int) or not 1 <= rank <= top:
        raise ValueError(
            f"rank must be an integer in 1..{top} for a {tuple(weight.shape)} weight, got {rank!r}"
        )


def break_even_rank(out_features: int, in_features: int) -> float:
    """Rank below which two thin factors hold fewer weights than the full matrix."""
    return out_features * in_features / (out_features + in_features)


def lowrank_error(weight: torch.Tensor, rank: int) -> float:
    """``||W - W_r||_F / ||W||_F`` for the best rank-``rank`` approximation W_r (from the SVD)."""
    _check_rank(rank, weight)
    s = torch.linalg.svdvals(weight.detach().double())
    return float(s[rank:].pow(2).sum().sqrt() / s.pow(2).sum().sqrt())


@torch.no_grad()
def factorize_linear(linear: nn.Linear, rank: int) -> nn.Sequential:
    """Two layers ``in -> rank -> out`` whose product is the rank-``rank`` truncated SVD of W."""
    w = linear.weight.detach()
    _check_rank(rank, w)
    u, s, vh = torch.linalg.svd(w.double(), full_matrices=False)
    root = s[:rank].sqrt()
    factory_kwargs = {"device": w.device, "dtype": w.dtype}
    first = nn.Linear(linear.in_features, rank, bias=False, **factory_kwargs)
    second = nn.Linear(rank, linear.out_features, bias=linear.bias is not None, **factory_kwargs)
    first.weight.copy_((root[:, None] * vh[:rank]).float())
    second.weight.copy_((u[:, :rank] * root).float())
    if linear.bias is not None:
        second.bias.copy_(linear.bias)
    return nn.Sequential(first, second)


def factorize_model(
    model: nn.Module, rank: int | None = None, ratio: float | None = None, names=None
) -> nn.Module:
    """A copy of ``model`` with each named linear layer (default all but the tied head) factorised.

    Give either ``rank`` (the same for every layer) or ``ratio`` in (0, 1] (rank =
    ``max(1, round(ratio * min(out, in)))`` per layer).
    """
    if (rank is None) == (ratio is None):
        raise ValueError("factorize_model: give exactly one of rank= or ratio=")
    if ratio is not None and not 0.0 < ratio <= 1.0:
        raise ValueError(f"factorize_model: ratio must be in (0, 1], got {ratio}")
    model = copy.deepcopy(model)
    for name in names if names is not None else linear_names(model):
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        lin = getattr(owner, child)
        r = rank if rank is not None else max(1, round(ratio * min(lin.weight.shape)))
        setattr(owner, child, factorize_linear(lin, r))
    return model
