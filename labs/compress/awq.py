"""AWQ: activation-aware weight quantization by a searched per-input-channel scale.

Lin et al. (2024) protect the weights that meet large activations without keeping any of them in
floating point. Input column ``j`` of ``W`` is multiplied by ``s_j`` before rounding and the
input ``x_j`` divided by it (folded into the previous layer), so ``x W^T`` is unchanged in exact
arithmetic but the salient columns get a finer share of each group's grid. The scales come from
the *mean* absolute activation of each channel on calibration data::

    s_j = mean_t |x_tj| ** alpha           (normalised so that max(s) * min(s) = 1)

and ``alpha`` is searched on a grid in [0, 1] for the smallest output error ``||X W^T - X Q(W diag(s)) diag(s)^-1 T||``
on the calibration inputs. ``alpha = 0`` is plain round-to-nearest, so the search never does worse
than RTN on the calibration set.

* :func:`awq_scales` -- the scales for one ``alpha``.
* :func:`awq_search` -- the grid search for one layer; :func:`awq_model` -- every layer, sequentially.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from labs.compress.calibrate import sequential
from labs.compress.gptq import rtn

__all__ = ["awq_scales", "awq_search", "awq_model"]


def awq_scales(act_mean: torch.Tensor, alpha: float) -> torch.Tensor:
    """``s_j = act_mean_j ** alpha``, normalised by ``sqrt(max * min)``; shape (in,)."""
    s = act_mean.clamp_min(1e-8).pow(alpha)
    return s / (s.max() * s.min()).sqrt()


@torch.no_grad()
def awq_search(
    w: torch.Tensor,
    x: torch.Tensor,
    bits: int,
    group_size: int | None = 128,
    grid: int = 20,
    sym: bool = False,
) -> tuple[torch.Tensor, float]:
    """Quantize ``w`` (out, in) with the AWQ scale whose ``alpha`` (of ``grid`` values in
    [0, 1)) gives the least output error on calibration inputs ``x`` (tokens, in).

    Returns ``(dequantized weight with the scale undone, best alpha)``: the weight to use with
    the original, unscaled inputs.
    """
    act_mean = x.abs().mean(dim=0)
    ref = x @ w.T
    best = (float("inf"), None, 0.0)
    for k in range(grid):
        alpha = k / grid
        s = awq_scales(act_mean, alpha)
        wq = rtn(w * s, bits, group_size, sym) / s
        err = float((x @ wq.T - ref).pow(2).mean())
        if err < best[0]:
            best = (err, wq, alpha)
    return best[1], best[2]


def awq_model(
    model: nn.Module,
    ids: torch.Tensor,
    bits: int,
    group_size: int | None = 128,
    names: list[str] | None = None,
    **kwargs,
) -> tuple[nn.Module, dict[str, float]]:
    """AWQ on every named linear layer of a copy of ``model``, calibrated sequentially.

    Returns ``(quantized copy, {name: chosen alpha})``; weights hold the dequantized values.
    """

    def step(_name, w, x):
        return awq_search(w, x, bits, group_size, **kwargs)

    return sequential(model, ids, step, names)
