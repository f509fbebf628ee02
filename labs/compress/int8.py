"""Real int8 arithmetic on the CPU: our own kernel path and PyTorch's dynamic quantization.

:mod:`labs.compress.quantize` *simulates* quantization (integer codes are turned back into floats
before the product). Speed needs kernels that multiply integers:

* :func:`int8_linear` -- ``x @ W.T`` with per-token int8 activations, per-channel int8 weights and
  int32 accumulation in ``torch._int_mm``, rescaled to float.
* :class:`Int8Linear` -- the same as a layer that quantizes its weight once.
* :func:`dynamic_int8` -- ``torch.ao.quantization.quantize_dynamic`` (fbgemm kernels) on a copy.

How it differs from :mod:`labs.inference.int8`: that module stores weights in int8 but dequantizes
them and multiplies in floating point (weight-only: fewer bytes per decode step); this one
quantizes the activations as well and multiplies integers (W8A8: cheaper arithmetic).
"""

from __future__ import annotations

import copy
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from labs.compress.quantize import quantize

__all__ = ["int8_linear", "Int8Linear", "dynamic_int8"]


def _padded_t(qw: torch.Tensor) -> torch.Tensor:
    """int8 weight (out, in) -> transposed, zero-padded (in', out') with both multiples of 8."""
    return F.pad(qw, (0, (-qw.shape[1]) % 8, 0, (-qw.shape[0]) % 8)).T.contiguous()


def _int_mm(qx: torch.Tensor, wt: torch.Tensor, n_out: int) -> torch.Tensor:
    """int32 (N, n_out) = int8 qx (N, in) @ padded wt; ``torch._int_mm`` wants N > 16, x8 sizes."""
    n = qx.shape[0]
    a = F.pad(qx, (0, wt.shape[0] - qx.shape[1], 0, (-n) % 8 + (24 if n < 17 else 0)))
    return torch._int_mm(a, wt)[:n, :n_out]


def int8_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None):
    """``x @ weight.T + bias`` computed in int8 with int32 accumulation, then rescaled.

    Activations get one absmax scale per token (row of ``x``, shape (N, in)), weights one per
    output channel (row of ``weight``, shape (out, in)); the int32 product ``Q_x Q_w^T`` is
    multiplied by the outer product of the two scale vectors. Returns float32 (N, out).
    Quantizes the weight on every call; :class:`Int8Linear` does it once.
    """
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(
            f"int8_linear: need x (N, in) and weight (out, in), got "
            f"{tuple(x.shape)} and {tuple(weight.shape)}"
        )
    qx = quantize(x, 8, granularity="channel")
    qw = quantize(weight, 8, granularity="channel")
    y = _int_mm(qx.q, _padded_t(qw.q), weight.shape[0]).float() * qx.scale * qw.scale.T
    return y if bias is None else y + bias


class Int8Linear(nn.Module):
    """``nn.Linear`` run in int8 on the CPU: the weight is quantized once (per output channel),
    activations per token on every call, products accumulate in int32 (``torch._int_mm``)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        qw = quantize(linear.weight.detach(), 8, granularity="channel")
        self.register_buffer("weight_t", _padded_t(qw.q))
        self.register_buffer("scale", qw.scale.T.contiguous())
        bias = None if linear.bias is None else linear.bias.detach().clone()
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).float()
        qx = quantize(flat, 8, granularity="channel")
        y = _int_mm(qx.q, self.weight_t, self.out_features).float() * qx.scale * self.scale
        y = y if self.bias is None else y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)


def dynamic_int8(model: nn.Module) -> nn.Module:
    """PyTorch's dynamic int8 quantization of every ``nn.Linear`` (a copy; ``model`` is kept).

    Weights are stored as int8 (per-tensor scale); activations are quantized on the fly per
    batch; the product runs in fbgemm's int8 kernels. ``torch.ao.quantization`` is deprecated in
    favour of ``torchao`` but still ships with PyTorch 2.13, so its warning is silenced here.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)
