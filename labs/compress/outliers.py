"""Activation outliers and the three ways LLM quantization copes with them.

Large language models develop a few *outlier features*: hidden channels whose activations are
tens of times larger than the rest, in every token (Dettmers et al. 2022). An absmax int8 scale
stretched to cover them leaves the ordinary channels only a few levels. Three remedies:

* :func:`llm_int8_linear` -- LLM.int8(): channels where some |x| exceeds a threshold (6.0) stay in
  floating point, everything else runs in int8.
* :func:`smooth_scales` -- SmoothQuant: divide activation channel j by ``s_j`` and multiply weight
  column j by ``s_j`` (exact in real arithmetic), moving the difficulty from x to W.
* :func:`awq_quantize` -- AWQ-style: weight columns that meet large activations are *salient*;
  keep about 1 % of them in full precision, or scale them up before rounding.

The tiny GPT trained in a few seconds has no strong outliers of its own, so
:func:`plant_outliers` creates some with a function-preserving rescaling: it multiplies chosen
LayerNorm output channels by ``factor`` and divides the matching input columns of the following
linear layers by the same factor -- the model computes the same function, but its activations now
look like a large LLM's. :func:`input_absmax` records, per linear layer, the largest |x| per
input channel on calibration data, :func:`input_absmean` the mean |x| (AWQ's statistic).
AWQ's searched scaling is :mod:`labs.compress.awq`.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from labs.compress.calibrate import capture_inputs
from labs.compress.measure import model_device
from labs.compress.quantize import quantize

__all__ = [
    "plant_outliers",
    "input_absmax",
    "input_absmean",
    "outlier_channels",
    "llm_int8_linear",
    "smooth_scales",
    "awq_quantize",
]


@torch.no_grad()
def plant_outliers(model: nn.Module, channels: list[int], factor: float = 30.0) -> nn.Module:
    """A copy of a :class:`labs.gpt.GPT` with outlier features in ``channels`` of every block.

    For ``ln_1`` (feeding q, k, v) and ``ln_2`` (feeding ``up_proj``) the gain and bias of each
    chosen channel are multiplied by ``factor`` and the consumers' weight columns divided by it,
    so the outputs are unchanged up to rounding.
    """
    if factor <= 0:
        raise ValueError(f"plant_outliers: factor must be positive, got {factor}")
    model = copy.deepcopy(model)
    for block in model.blocks:
        for ln, consumers in (
            (block.ln_1, ("q_proj", "k_proj", "v_proj")),
            (block.ln_2, ("up_proj",)),
        ):
            ln.weight[channels] *= factor
            if ln.bias is not None:
                ln.bias[channels] *= factor
            owner = block.attn if consumers[0] != "up_proj" else block.mlp
            for name in consumers:
                getattr(owner, name).weight[:, channels] /= factor
    return model


@torch.no_grad()
def input_absmax(model: nn.Module, ids: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """Largest |input| per input channel of each named linear layer over a forward pass of ``ids``.

    Returns ``{name: tensor of shape (in_features,)}``.
    """
    stats: dict[str, torch.Tensor] = {}
    hooks = []
    for name in names:

        def hook(_m, inputs, _out, name=name):
            a = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).abs().amax(dim=0)
            stats[name] = torch.maximum(stats[name], a) if name in stats else a

        hooks.append(model.get_submodule(name).register_forward_hook(hook))
    try:
        model(ids)
    finally:
        for h in hooks:
            h.remove()
    return stats


@torch.no_grad()
def input_absmean(model: nn.Module, ids: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """Mean |input| per input channel of each named linear layer over a forward pass of ``ids``.

    AWQ ranks channels by this statistic (a typical activation size), which, unlike the maximum,
    one stray token cannot dominate. Returns ``{name: tensor of shape (in_features,)}``.
    """
    return {n: x.abs().mean(dim=0) for n, x in capture_inputs(model, ids, names).items()}


def outlier_channels(x: torch.Tensor, threshold: float = 6.0) -> torch.Tensor:
    """Indices of the feature columns of ``x`` (N, in) where some |value| exceeds ``threshold``."""
    return torch.nonzero((x.abs() > threshold).any(dim=0)).flatten()


def llm_int8_linear(
    x: torch.Tensor, weight: torch.Tensor, threshold: float = 6.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """LLM.int8() mixed-precision decomposition of ``x @ weight.T``.

    Args:
        x: activations (N, in). weight: (out, in).
        threshold: activation magnitude that marks an outlier feature (6.0 in the paper).

    Returns:
        ``(y, outliers)``: y (N, out) = fp32 product over the outlier columns + int8 product
        (per-token absmax for x, per-output-channel absmax for W) over the rest; and the indices
        of the outlier columns.
    """
    cols = outlier_channels(x, threshold)
    keep = torch.ones(x.shape[1], dtype=torch.bool, device=x.device)
    keep[cols] = False
    qx = quantize(x[:, keep], 8, granularity="channel")
    qw = quantize(weight[:, keep], 8, granularity="channel")
    y = (qx.q.float() @ qw.q.float().T) * qx.scale * qw.scale.T
    return y + x[:, cols] @ weight[:, cols].T, cols


def smooth_scales(act_absmax: torch.Tensor, weight: torch.Tensor, alpha: float = 0.5):
    """SmoothQuant's per-channel factors ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)``.

    Use them as ``(x / s) @ (weight * s).T``: the product is unchanged and both operands now have
    similar ranges. ``alpha`` in [0, 1] sets how much difficulty moves to the weights.
    Returns ``s``, shape (in,).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"smooth_scales: alpha must be in [0, 1], got {alpha}")
    w_max = weight.abs().amax(dim=0).clamp_min(1e-5)
    return (act_absmax.clamp_min(1e-5).pow(alpha) / w_max.pow(1 - alpha)).clamp_min(1e-5)


@torch.no_grad()
def awq_quantize(
    model: nn.Module,
    stats: dict[str, torch.Tensor],
    bits: int = 4,
    fraction: float = 0.01,
    mode: str = "keep",
    choose: str = "activation",
    alpha: float = 0.5,
    seed: int = 0,
    **kwargs,
) -> nn.Module:
    """Weight-only quantization that protects salient input channels (a copy of ``model``).

    Args:
        stats: ``{linear name: per-input-channel activation magnitude}``, e.g. from
            :func:`input_absmean` (AWQ's statistic); its keys are the layers to quantize.
        fraction: share of input channels to protect (at least one per layer).
        mode: ``"keep"`` restores the salient weight columns to full precision after rounding;
            ``"scale"`` is AWQ's trick instead: multiply every input column j by
            ``s_j = (act_j / mean(act))^alpha`` before rounding and divide it back after, so
            columns that meet large activations get a finer relative grid with the same bits
            (in deployment ``1/s`` is folded into the previous layer).
        choose: ``"activation"`` (largest magnitudes in ``stats``), ``"weight"`` (largest weight
            column norms) or ``"random"``.
        kwargs: go to :func:`labs.compress.quantize.quantize` (granularity, group_size ...).
    """
    if mode not in ("keep", "scale"):
        raise ValueError(f"awq_quantize: mode must be 'keep' or 'scale', got {mode!r}")
    gen = torch.Generator(model_device(model)).manual_seed(seed)
    model = copy.deepcopy(model)
    for name, act in stats.items():
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent)
        lin = getattr(owner, child)
        w = lin.weight.detach().clone()
        k = max(1, round(fraction * w.shape[1]))
        if choose == "activation":
            idx = act.topk(k).indices
        elif choose == "weight":
            idx = w.norm(dim=0).topk(k).indices
        elif choose == "random":
            idx = torch.randperm(w.shape[1], generator=gen, device=w.device)[:k]
        else:
            raise ValueError(
                f"awq_quantize: choose must be activation/weight/random, got {choose!r}"
            )
        if mode == "scale":
            s_in = (act / act.mean()).clamp_min(1e-5).pow(alpha)  # AWQ: s_j = (|x_j| / mean)^alpha
            wq = quantize(w * s_in, bits, **kwargs).dequantize() / s_in
        else:
            wq = quantize(w, bits, **kwargs).dequantize()
            wq[:, idx] = lin.weight[:, idx]
        factory_kwargs = {"device": w.device, "dtype": w.dtype}
        new = nn.Linear(lin.in_features, lin.out_features, lin.bias is not None, **factory_kwargs)
        new.weight.copy_(wq)
        if lin.bias is not None:
            new.bias.copy_(lin.bias)
        setattr(owner, child, new)
    return model
