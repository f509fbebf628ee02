"""Activation-aware low-rank factorisation: truncate the SVD where the inputs live.

Plain truncated SVD (:mod:`labs.compress.lowrank`) minimises ``||W - W'||_F``: it treats every
input channel as equally important. What matters is the error of the layer's *output*,
``E ||(W - W') x||^2``, and real activations have a few channels far larger than the rest. If the
input channels are uncorrelated with root-mean-square sizes ``s_j``, that output error is
``||(W - W') diag(s)||_F^2``: so factorise ``W diag(s)`` instead, and undo the scaling in the
first factor (ASVD, Yuan et al. 2023)::

    W diag(s) ~ U_r S_r V_r^T      =>      W ~ (U_r S_r^1/2) (S_r^1/2 V_r^T diag(1/s))

The same number of parameters as plain SVD at rank r; only where the error goes differs.
Channels are correlated in practice, so the exact version *whitens* instead of scaling
(SVD-LLM, Wang et al. 2024): with the input second-moment matrix ``X^T X = L L^T`` (Cholesky),
``||(W - W') X^T||_F = ||(W - W') L||_F``, so truncating the SVD of ``W L`` and multiplying the
first factor by ``L^-1`` gives the rank-r weight with the least output error on the calibration
inputs.

* :func:`input_rms` -- per-channel RMS of each linear layer's inputs on calibration ids;
  :func:`input_gram` -- their second-moment matrices ``X^T X / N``.
* :func:`factorize_linear_aware` -- the two thin layers for one weight, given channel scales
  (a vector: ASVD) or a second-moment matrix (whitening: SVD-LLM).
* :func:`factorize_model_aware` -- a copy of a model with every linear layer factorised this way.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from labs.compress.lowrank import _check_rank
from labs.compress.measure import linear_names, model_device

__all__ = ["input_rms", "input_gram", "factorize_linear_aware", "factorize_model_aware"]


@torch.no_grad()
def input_gram(model: nn.Module, ids: torch.Tensor, names: list[str] | None = None) -> dict:
    """``{name: (in, in) float64}``: ``X^T X / N`` of the inputs X (N, in) that each named linear
    layer (default all but the tied head) receives while ``model(ids)`` runs."""
    names = names if names is not None else linear_names(model)
    sums, count, hooks = {}, {}, []
    for name in names:

        def hook(mod, inputs, _out, name=name):
            x = inputs[0].detach().double().reshape(-1, inputs[0].shape[-1])
            sums[name] = sums.get(name, 0) + x.T @ x
            count[name] = count.get(name, 0) + x.shape[0]

        hooks.append(model.get_submodule(name).register_forward_hook(hook))
    try:
        model(ids.to(model_device(model)))
    finally:
        for h in hooks:
            h.remove()
    return {n: sums[n] / count[n] for n in names}


def input_rms(model: nn.Module, ids: torch.Tensor, names: list[str] | None = None) -> dict:
    """``{name: (in_features,) float32}``: the root mean square of each input channel."""
    return {n: g.diagonal().sqrt().float() for n, g in input_gram(model, ids, names).items()}


@torch.no_grad()
def factorize_linear_aware(linear: nn.Linear, rank: int, scale: torch.Tensor) -> nn.Sequential:
    """Two layers ``in -> rank -> out`` minimising ``||(W - B A) S||_F``.

    ``scale`` is either a vector (in,) > 0, the importance of each input channel (its RMS: S =
    diag(scale), ASVD), or the inputs' second-moment matrix (in, in) (S = its Cholesky factor
    L, SVD-LLM's whitening; a small ridge keeps it positive definite).
    """
    w = linear.weight.detach().double()
    _check_rank(rank, w)
    n_in = w.shape[1]
    if scale.shape == (n_in,):
        s = scale.detach().double().clamp_min(1e-8)
        left, undo = torch.diag(s), torch.diag(1 / s)
    elif scale.shape == (n_in, n_in):
        g = scale.detach().double()
        g = g + 1e-6 * g.diagonal().mean() * torch.eye(n_in, dtype=g.dtype, device=g.device)
        left = torch.linalg.cholesky(g)
        undo = torch.linalg.inv(left)
    else:
        raise ValueError(
            f"scale must have shape ({n_in},) or ({n_in}, {n_in}), got {tuple(scale.shape)}"
        )
    u, sv, vh = torch.linalg.svd(w @ left, full_matrices=False)
    root = sv[:rank].sqrt()
    factory_kwargs = {"device": linear.weight.device, "dtype": linear.weight.dtype}
    first = nn.Linear(linear.in_features, rank, bias=False, **factory_kwargs)
    second = nn.Linear(rank, linear.out_features, bias=linear.bias is not None, **factory_kwargs)
    first.weight.copy_((root[:, None] * vh[:rank] @ undo).float())
    second.weight.copy_((u[:, :rank] * root).float())
    if linear.bias is not None:
        second.bias.copy_(linear.bias)
    return nn.Sequential(first, second)


def factorize_model_aware(
    model: nn.Module, rank: int, calib_ids: torch.Tensor, method: str = "whiten"
) -> nn.Module:
    """A copy of ``model`` with every linear layer (but the tied head) factorised at ``rank``,
    aware of its inputs on ``calib_ids`` (B, T): ``method="rms"`` scales input channels by their
    RMS (ASVD), ``"whiten"`` whitens them with the Cholesky factor of ``X^T X`` (SVD-LLM)."""
    if method not in ("rms", "whiten"):
        raise ValueError(f"factorize_model_aware: method must be 'rms' or 'whiten', got {method!r}")
    rms = input_rms(model, calib_ids) if method == "rms" else input_gram(model, calib_ids)
    model = copy.deepcopy(model)
    for name, scale in rms.items():
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, child, factorize_linear_aware(getattr(owner, child), rank, scale))
    return model
