"""Calibration for one-shot compression: capture each linear layer's inputs, layer by layer.

GPTQ, SparseGPT, Wanda and AWQ all look at what a layer *receives* on a few hundred calibration
tokens, not only at its weights. They also work *sequentially*: layer ``k`` is calibrated on the
inputs it sees after layers ``0 .. k-1`` were already compressed, so each layer compensates for
the errors made upstream.

* :func:`calibration_ids` -- a few windows of the training split (never the held-out text).
* :func:`capture_inputs` -- the inputs (N tokens, in_features) of named linear layers.
* :func:`hessian` -- the layer Hessian ``H = 2 X^T X / N`` of the squared output error.
* :func:`sequential` -- compress the layers one after another, re-capturing inputs each time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn as nn

from labs import data
from labs.compress.measure import linear_names, model_device

__all__ = ["calibration_ids", "capture_inputs", "hessian", "sequential"]


def calibration_ids(n_seq: int = 8, seq_len: int = 64, seed: int = 0) -> torch.Tensor:
    """``n_seq`` random windows of ``seq_len`` tokens from the training split, (n_seq, seq_len)."""
    tok = data.CharTokenizer()
    train_ids, _ = data.split(tok.encode(data.load_corpus()))
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(train_ids) - seq_len, (n_seq,), generator=gen)
    return torch.stack([train_ids[s : s + seq_len] for s in starts.tolist()])


@torch.no_grad()
def capture_inputs(
    model: nn.Module, ids: torch.Tensor, names: list[str]
) -> dict[str, torch.Tensor]:
    """Inputs of the named linear layers during one forward pass of ``ids``.

    Returns ``{name: X}`` with ``X`` of shape (tokens, in_features), float32: one row per token,
    on the model's device (``ids`` are moved there).
    """
    got: dict[str, torch.Tensor] = {}
    hooks = []
    for name in names:

        def hook(_m, inputs, name=name):
            got[name] = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).float()

        hooks.append(model.get_submodule(name).register_forward_pre_hook(hook))
    try:
        model(ids.to(model_device(model)))
    finally:
        for h in hooks:
            h.remove()
    return got


def hessian(x: torch.Tensor) -> torch.Tensor:
    """``2 X^T X / N`` in float64 for inputs ``x`` (N, in): the Hessian of ``||(W - W') X^T||^2 / N``.

    Its diagonal entry ``j`` is twice the mean square of input ``j``; GPTQ and SparseGPT need only
    its shape (the factor cancels), Wanda only its diagonal.
    """
    x = x.double()
    return 2 * x.T @ x / x.shape[0]


@torch.no_grad()
def sequential(
    model: nn.Module,
    ids: torch.Tensor,
    compress: Callable[[str, torch.Tensor, torch.Tensor], tuple[torch.Tensor, object]],
    names: list[str] | None = None,
) -> tuple[nn.Module, dict[str, object]]:
    """Compress the named linear layers of a copy of ``model`` one at a time, in order.

    For each layer the inputs ``X`` (tokens, in) are captured on ``ids`` from the model *as
    compressed so far*; ``compress(name, W, X)`` returns ``(new_weight, info)``; the new weight
    replaces the old one. Returns ``(compressed copy, {name: info})``.
    """
    model = copy.deepcopy(model)
    infos: dict[str, object] = {}
    for name in names if names is not None else linear_names(model):
        x = capture_inputs(model, ids, [name])[name]
        layer = model.get_submodule(name)
        new_w, infos[name] = compress(name, layer.weight.detach().clone(), x)
        layer.weight.copy_(new_w.to(layer.weight.dtype))
    return model, infos
