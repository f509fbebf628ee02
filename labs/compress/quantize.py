"""Integer quantization from scratch: formats, absmax and zero-point, granularity, calibration.

A float tensor ``x`` becomes integers ``q`` and a few floats that map them back::

    symmetric (absmax):  q = clamp(round(x / s), -(2^(b-1) - 1), 2^(b-1) - 1)    x ~ s * q
    affine (zero-point): q = clamp(round(x / s) + z, 0, 2^b - 1)                 x ~ s * (q - z)

One ``(s, z)`` pair is shared by a *group* of values: the whole tensor (``granularity="tensor"``),
one row (``"channel"``: an output channel of a weight, or a token of an activation) or
``group_size`` consecutive values of a row (``"group"``). The range a group must cover is picked by
*calibration*: its min/max, a percentile of it, or the clipping that minimises the squared error.

* :func:`quantize` -> :class:`QTensor` (``dequantize()``, ``nbytes``), :func:`fake_quantize`
  (quantize then dequantize; with ``ste=True`` its gradient is the identity: QAT).
* :class:`QuantLinear` -- a linear layer with integer weights (int4 packed two per byte).
* :func:`quantize_weights` -- swap a model's linear layers for :class:`QuantLinear`.

Real integer arithmetic (``torch._int_mm``, PyTorch's dynamic int8) is in :mod:`labs.compress.int8`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "qrange",
    "QTensor",
    "quantize",
    "fake_quantize",
    "QuantLinear",
    "quantize_weights",
    "add_fake_quant",
]

SCHEMES = ("symmetric", "affine")
GRANULARITIES = ("tensor", "channel", "group")
CALIBRATIONS = ("minmax", "percentile", "mse")


def qrange(bits: int, scheme: str = "symmetric") -> tuple[int, int]:
    """Smallest and largest integer code: (-(2^(b-1)-1), 2^(b-1)-1) or (0, 2^b - 1)."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be an integer in 2..8, got {bits!r}")
    if scheme == "symmetric":
        return -(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1
    if scheme == "affine":
        return 0, 2**bits - 1
    raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")


def _groups(x: torch.Tensor, granularity: str, group_size: int | None) -> torch.Tensor:
    """View ``x`` as (n_groups, values_per_group) following the granularity."""
    if granularity == "tensor":
        return x.reshape(1, -1)
    if granularity == "channel":
        return x.reshape(x.shape[0], -1) if x.dim() > 1 else x.reshape(1, -1)
    if granularity == "group":
        if not group_size or group_size < 1 or x.shape[-1] % group_size:
            raise ValueError(
                f"group_size must divide the last dimension {x.shape[-1]}, got {group_size!r}; "
                "pick a divisor such as 32, 64 or 128"
            )
        return x.reshape(-1, group_size)
    raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")


def _range(g: torch.Tensor, calibration: str, percentile: float) -> tuple[torch.Tensor, ...]:
    """Per-group (low, high) of the values to cover, before any MSE clipping search."""
    if calibration in ("minmax", "mse"):
        return g.amin(dim=1), g.amax(dim=1)
    if calibration == "percentile":
        if not 50.0 < percentile <= 100.0:
            raise ValueError(f"percentile must be in (50, 100], got {percentile}")
        q = torch.tensor([1 - percentile / 100, percentile / 100], dtype=g.dtype, device=g.device)
        lo_hi = torch.quantile(g, q, dim=1)
        return lo_hi[0], lo_hi[1]
    raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")


def _scale_zero(lo, hi, bits: int, scheme: str) -> tuple[torch.Tensor, torch.Tensor]:
    qmin, qmax = qrange(bits, scheme)
    if scheme == "symmetric":
        scale = torch.maximum(lo.abs(), hi.abs()) / qmax
        return scale.clamp_min(1e-12), torch.zeros_like(scale)
    lo, hi = lo.clamp(max=0), hi.clamp(min=0)  # the range must contain 0 (exact zero padding)
    scale = ((hi - lo) / (qmax - qmin)).clamp_min(1e-12)
    zero = (qmin - torch.round(lo / scale)).clamp(qmin, qmax)
    return scale, zero


@dataclass
class QTensor:
    """Integer codes plus the per-group scale and zero point that map them back to floats.

    Attributes:
        q: integer codes, shape (n_groups, values_per_group), int8 (symmetric) or uint8 (affine).
        scale, zero_point: float32, shape (n_groups, 1); zero_point is 0 for symmetric.
        bits: bits per code; shape: the original shape; dtype: the original float dtype.
    """

    q: torch.Tensor
    scale: torch.Tensor
    zero_point: torch.Tensor
    bits: int
    shape: torch.Size
    dtype: torch.dtype

    def dequantize(self) -> torch.Tensor:
        """Floats ``scale * (q - zero_point)`` in the original shape and dtype."""
        x = (self.q.float() - self.zero_point) * self.scale
        return x.reshape(self.shape).to(self.dtype)

    @property
    def nbytes(self) -> int:
        """Storage if codes are packed at ``bits`` each, plus fp32 scales (and zero points)."""
        codes = (self.q.numel() * self.bits + 7) // 8
        meta = self.scale.numel() * 4 + (
            4 * self.zero_point.numel() if self.zero_point.any() else 0
        )
        return codes + meta


def quantize(
    x: torch.Tensor,
    bits: int = 8,
    scheme: str = "symmetric",
    granularity: str = "tensor",
    group_size: int | None = None,
    calibration: str = "minmax",
    percentile: float = 99.9,
) -> QTensor:
    """Quantize a float tensor to ``bits``-bit integers.

    Args:
        x: floating-point tensor; for ``"channel"`` rows are dim 0 (weight (out, in): one scale
            per output channel); for ``"group"`` groups run along the last dimension.
        bits: 2..8. scheme: ``"symmetric"`` (absmax) or ``"affine"`` (zero-point).
        granularity: ``"tensor"``, ``"channel"`` or ``"group"`` (then ``group_size`` must divide
            the last dimension).
        calibration: ``"minmax"``, ``"percentile"`` (clip at ``percentile``) or ``"mse"`` (try
            39 clipping ratios in [0.05, 1] per group and keep the one with the least squared error).
    """
    if not torch.is_tensor(x) or not x.is_floating_point():
        got = x.dtype if torch.is_tensor(x) else type(x).__name__
        raise TypeError(f"quantize: x must be a floating-point tensor, got {got}")
    qmin, qmax = qrange(bits, scheme)
    g = _groups(x.detach().float(), granularity, group_size)
    lo, hi = _range(g, calibration, percentile)
    if calibration == "mse":
        best_err, best = None, None
        for r in torch.linspace(0.05, 1.0, 39, device=g.device):
            s, z = _scale_zero(lo * r, hi * r, bits, scheme)
            q = torch.clamp(torch.round(g / s[:, None]) + z[:, None], qmin, qmax)
            err = ((q - z[:, None]) * s[:, None] - g).pow(2).sum(dim=1)
            if best is None:
                best_err, best = err, (lo * r, hi * r)
            else:
                better = err < best_err
                best_err = torch.where(better, err, best_err)
                best = tuple(torch.where(better, a * r, b) for a, b in zip((lo, hi), best))
        lo, hi = best
    scale, zero = _scale_zero(lo, hi, bits, scheme)
    scale, zero = scale[:, None], zero[:, None]
    q = torch.clamp(torch.round(g / scale) + zero, qmin, qmax)
    q = q.to(torch.int8 if scheme == "symmetric" else torch.uint8)
    return QTensor(q, scale, zero, bits, x.shape, x.dtype)


def fake_quantize(x: torch.Tensor, bits: int = 8, ste: bool = False, **kwargs) -> torch.Tensor:
    """``quantize(x, bits, **kwargs).dequantize()``: the values the integers stand for.

    With ``ste=True`` the straight-through estimator passes gradients through unchanged
    (``x + (fq(x) - x).detach()``), which is how quantization-aware training trains through
    the rounding step whose true derivative is zero almost everywhere.
    """
    fq = quantize(x, bits, **kwargs).dequantize()
    return x + (fq - x).detach() if ste else fq


def _pack4(q: torch.Tensor) -> torch.Tensor:
    u = (q.reshape(-1).to(torch.int16) & 0xF).to(torch.uint8)
    if u.numel() % 2:
        u = torch.cat([u, u.new_zeros(1)])
    return (u[0::2] << 4) | u[1::2]


def _unpack4(p: torch.Tensor, n: int, signed: bool) -> torch.Tensor:
    u = torch.stack([p >> 4, p & 0xF], dim=1).reshape(-1)[:n].to(torch.int16)
    return torch.where(u > 7, u - 16, u) if signed else u


class QuantLinear(nn.Module):
    """``nn.Linear`` whose weight is stored as integers (4-bit codes packed two per byte).

    The weight is dequantized on the fly in ``forward``; this saves memory and file size but
    runs no faster than fp32 on a CPU (see :func:`int8_linear` for integer arithmetic).
    """

    def __init__(self, linear: nn.Linear, bits: int = 8, **kwargs):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        qt = quantize(linear.weight.detach(), bits, **kwargs)
        self.bits, self.n, self.signed = bits, qt.q.numel(), qt.q.dtype == torch.int8
        self.group_shape = tuple(qt.q.shape)
        codes = _pack4(qt.q) if bits <= 4 else qt.q
        self.register_buffer("codes", codes)
        self.register_buffer("scale", qt.scale)
        zero = qt.scale.new_zeros(0) if self.signed else qt.zero_point  # symmetric: none stored
        self.register_buffer("zero_point", zero)
        bias = None if linear.bias is None else linear.bias.detach().clone()
        self.register_buffer("bias", bias)

    def weight_float(self) -> torch.Tensor:
        """The dequantized weight, shape (out_features, in_features), float32."""
        q = _unpack4(self.codes, self.n, self.signed) if self.bits <= 4 else self.codes
        q = q.reshape(self.group_shape).float()
        if not self.signed:
            q = q - self.zero_point
        return (q * self.scale).reshape(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_float().to(x.dtype), self.bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, bits={self.bits}"


def quantize_weights(
    model: nn.Module, bits: int = 8, names: list[str] | None = None, **kwargs
) -> nn.Module:
    """A copy of ``model`` whose linear layers (``names``; default all but the tied head) are
    :class:`QuantLinear` with ``bits``-bit weights; ``kwargs`` go to :func:`quantize`."""
    from labs.compress.measure import linear_names

    model = copy.deepcopy(model)
    for name in names if names is not None else linear_names(model):
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, child, QuantLinear(getattr(owner, child), bits, **kwargs))
    return model


class _FakeQuant(nn.Module):
    def __init__(self, bits: int, kwargs: dict):
        super().__init__()
        self.bits, self.kwargs = bits, kwargs

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return fake_quantize(w, self.bits, ste=True, **self.kwargs)


def add_fake_quant(
    model: nn.Module, bits: int = 4, names: list[str] | None = None, **kwargs
) -> nn.Module:
    """Quantization-aware training: make each named linear layer see fake-quantized weights.

    Registers a ``torch.nn.utils.parametrize`` parametrization on each weight, so every forward
    pass uses :func:`fake_quantize` (with the straight-through estimator) of the float weight that
    the optimizer updates. Modifies ``model`` in place and returns it; afterwards
    ``parametrize.remove_parametrizations(layer, "weight")`` bakes the quantized values in.
    """
    from torch.nn.utils import parametrize

    from labs.compress.measure import linear_names

    for name in names if names is not None else linear_names(model):
        parametrize.register_parametrization(
            model.get_submodule(name), "weight", _FakeQuant(bits, kwargs)
        )
    return model
