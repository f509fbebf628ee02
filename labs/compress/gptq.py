"""GPTQ: quantize a weight column by column, pushing each rounding error onto the columns left.

Round-to-nearest (RTN) rounds every weight independently. GPTQ (Frantar et al. 2023) rounds the
columns of ``W`` (out, in) one after another and, after rounding column ``i``, updates the
not-yet-quantized columns so that the layer's output on calibration inputs ``X`` changes as
little as possible. With ``H = 2 X^T X / N`` (dampened) and ``U`` the upper Cholesky factor of
``H^{-1}`` (``H^{-1} = U^T U``), the update for column ``i`` is::

    err = (W[:, i] - Q[:, i]) / U[i, i]
    W[:, i+1:] -= err[:, None] * U[i, i+1:][None, :]

(Optimal Brain Surgeon's update for removing one variable, applied in a fixed column order.)
*Lazy batches* apply the updates inside a block of ``block_size`` columns at once and push the
block's accumulated errors to the rest of the matrix with one matrix product, which is what makes
GPTQ fast on GPUs; the result is the same.

* :func:`minmax_params`, :func:`quantize_with` -- the grid of one group (symmetric or affine).
* :func:`rtn` -- round-to-nearest on the same grid, the baseline.
* :func:`gptq` -- the algorithm, for one weight and its Hessian.
* :func:`quantize_model` -- RTN or GPTQ for every linear layer of a model, sequentially.
* :func:`bits_per_weight` -- storage per weight with fp16 scales and packed zero points.

Groups are ``group_size`` consecutive input columns of a row (the last group of a row may be
shorter); ``group_size=None`` gives one group per row (per output channel).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from labs.compress.calibrate import hessian, sequential

__all__ = [
    "minmax_params",
    "quantize_with",
    "rtn",
    "inverse_cholesky",
    "gptq",
    "quantize_model",
    "bits_per_weight",
]


def _levels(bits: int, sym: bool) -> tuple[int, int]:
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be an integer in 2..8, got {bits!r}")
    return (-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1) if sym else (0, 2**bits - 1)


def minmax_params(w: torch.Tensor, bits: int, sym: bool = False) -> tuple[torch.Tensor, ...]:
    """Per-row ``(scale, zero)``, each (rows, 1), covering ``w`` (rows, cols) with ``bits`` bits.

    Symmetric: ``scale = max|w| / (2^(b-1) - 1)``, ``zero = 0``. Affine: the range
    ``[min(w, 0), max(w, 0)]`` (it must contain 0) on codes ``0 .. 2^b - 1`` with an integer zero
    point. An all-zero row gets a tiny positive scale, so it quantizes to zeros, not NaN.
    """
    qmin, qmax = _levels(bits, sym)
    if sym:
        scale = (w.abs().amax(dim=1, keepdim=True) / qmax).clamp_min(1e-12)
        return scale, torch.zeros_like(scale)
    lo = w.amin(dim=1, keepdim=True).clamp(max=0)
    hi = w.amax(dim=1, keepdim=True).clamp(min=0)
    scale = ((hi - lo) / (qmax - qmin)).clamp_min(1e-12)
    zero = torch.round(-lo / scale).clamp(qmin, qmax)
    return scale, zero


def quantize_with(w, scale, zero, bits: int, sym: bool = False) -> torch.Tensor:
    """Dequantized ``scale * (clamp(round(w / scale) + zero) - zero)``, the shape of ``w``."""
    qmin, qmax = _levels(bits, sym)
    return scale * (torch.clamp(torch.round(w / scale) + zero, qmin, qmax) - zero)


def _check(w: torch.Tensor, group_size: int | None) -> None:
    if w.dim() != 2 or not w.is_floating_point():
        raise ValueError(f"expected a float weight (out, in), got {w.dtype} {tuple(w.shape)}")
    if group_size is not None and (not isinstance(group_size, int) or group_size < 1):
        raise ValueError(f"group_size must be a positive int or None, got {group_size!r}")


def rtn(w: torch.Tensor, bits: int, group_size: int | None = None, sym: bool = False):
    """Round-to-nearest: every group's min-max grid, every weight rounded on its own.

    Args:
        w: weight (out, in). group_size: columns per group (None: one group per row).

    Returns:
        The dequantized weight, same shape and dtype.
    """
    _check(w, group_size)
    g = w.shape[1] if group_size is None else group_size
    out = torch.empty_like(w)
    for j in range(0, w.shape[1], g):
        scale, zero = minmax_params(w[:, j : j + g], bits, sym)
        out[:, j : j + g] = quantize_with(w[:, j : j + g], scale, zero, bits, sym)
    return out


def inverse_cholesky(h: torch.Tensor, damp: float) -> torch.Tensor:
    """Upper Cholesky factor ``U`` of ``(H + damp * mean(diag H) * I)^{-1}``, float64."""
    h = h.double().clone()
    if damp < 0:
        raise ValueError(f"damp must be >= 0, got {damp}")
    h.diagonal().add_(damp * h.diagonal().mean())
    try:
        lower = torch.linalg.cholesky(h)
    except torch.linalg.LinAlgError as err:
        raise ValueError(
            "gptq: the dampened Hessian is not positive definite; raise damp (e.g. 0.01) "
            "or calibrate on more tokens"
        ) from err
    return torch.linalg.cholesky(torch.cholesky_inverse(lower), upper=True)


@torch.no_grad()
def gptq(
    w: torch.Tensor,
    h: torch.Tensor,
    bits: int,
    group_size: int | None = None,
    sym: bool = False,
    block_size: int = 32,
    damp: float = 0.01,
) -> torch.Tensor:
    """GPTQ-quantize one weight ``w`` (out, in) given its layer Hessian ``h`` (in, in).

    Columns are quantized left to right; each column's rounding error, divided by ``U[i, i]``,
    is subtracted from the later columns in proportion to row ``i`` of ``U`` (the upper Cholesky
    factor of the dampened ``H^{-1}``). Updates inside a block of ``block_size`` columns are
    applied column by column, the block's total to the remaining columns at once (lazy batch).
    A group's grid is fixed from the *updated* weights when the loop reaches its first column;
    without groups every row's grid is fixed from ``w`` up front. Inputs that never fire
    (``H[j, j] == 0``) get weight 0. Returns the dequantized weight (dtype of ``w``).

    Args:
        damp: fraction of the mean diagonal added to ``H``'s diagonal (``percdamp``), so that
            ``H`` is invertible even with fewer calibration tokens than inputs.
    """
    _check(w, group_size)
    rows, cols = w.shape
    if h.shape != (cols, cols):
        raise ValueError(f"gptq: Hessian must be ({cols}, {cols}) for w {tuple(w.shape)}")
    W = w.double().clone()
    h = h.double().clone()
    dead = h.diagonal() == 0
    h[dead, dead] = 1.0
    W[:, dead] = 0.0
    U = inverse_cholesky(h, damp)
    Q = torch.zeros_like(W)
    if group_size is None:
        scale, zero = minmax_params(W, bits, sym)
    for i1 in range(0, cols, block_size):
        i2 = min(i1 + block_size, cols)
        W1, err1 = W[:, i1:i2].clone(), torch.zeros(rows, i2 - i1, dtype=W.dtype, device=W.device)
        for i in range(i2 - i1):
            j = i1 + i
            if group_size is not None and j % group_size == 0:
                end = min(j + group_size, cols)
                cur = W1[:, i : i + end - j]
                if end > i2:  # the group runs past the block: apply its pending updates first
                    tail = W[:, i2:end] - err1[:, :i] @ U[i1:j, i2:end]
                    cur = torch.cat([cur, tail], dim=1)
                scale, zero = minmax_params(cur, bits, sym)
            q = quantize_with(W1[:, i : i + 1], scale, zero, bits, sym)[:, 0]
            Q[:, j] = q
            err = (W1[:, i] - q) / U[j, j]
            W1[:, i:] -= err[:, None] * U[j, j:i2][None, :]
            err1[:, i] = err
        W[:, i2:] -= err1 @ U[i1:i2, i2:]
    return Q.to(w.dtype)


def quantize_model(
    model: nn.Module,
    ids: torch.Tensor,
    bits: int,
    group_size: int | None = None,
    method: str = "gptq",
    sym: bool = False,
    names: list[str] | None = None,
    **kwargs,
) -> nn.Module:
    """A copy of ``model`` with its linear layers (default all but the tied head) quantized.

    ``method="gptq"`` calibrates each layer on its inputs for ``ids`` (tokens of the training
    split), sequentially, so later layers see the already-quantized earlier ones; ``"rtn"``
    ignores ``ids``. Weights stay float tensors holding the dequantized values (simulated
    quantization); ``kwargs`` go to :func:`gptq` (``block_size``, ``damp``).
    """
    if method not in ("gptq", "rtn"):
        raise ValueError(f"quantize_model: method must be 'gptq' or 'rtn', got {method!r}")

    def step(_name, w, x):
        if method == "rtn":
            return rtn(w, bits, group_size, sym), None
        return gptq(w, hessian(x), bits, group_size, sym, **kwargs), None

    return sequential(model, ids, step, names)[0]


def bits_per_weight(
    bits: int, group_size: int | None, in_features: int, scale_bits: int = 16, zero: bool = True
) -> float:
    """Stored bits per weight: the code, plus one scale (and a ``bits``-bit zero point) per group.

    Real 4-bit formats (GPTQ, AWQ checkpoints) keep fp16 scales (``scale_bits=16``) and pack
    the zero points at the code width: W4 with groups of 128 costs ``4 + (16 + 4) / 128``.
    """
    g = in_features if group_size is None else min(group_size, in_features)
    groups_per_row = math.ceil(in_features / g)
    meta = groups_per_row * (scale_bits + (bits if zero else 0))
    return bits + meta / in_features
