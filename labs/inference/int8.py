"""Int8 weight-only quantization with one scale per output channel, for decoding.

Decoding reads every weight once per step, so at small batch it is bound by memory bandwidth;
storing weights in int8 moves four times fewer bytes than fp32 (two times fewer than fp16).
Weight-only means activations stay in floating point: each step dequantizes ``W ~ scale * W_int8``
and multiplies as usual. Per output channel (row of ``W``), ``scale = max|row| / 127``::

    q, scale = quantize_per_channel(linear.weight)     # int8 (out, in), fp32 (out,)
    qmodel = quantize_model_int8(model)                # every nn.Linear -> Int8Linear
    weight_bytes(qmodel) / weight_bytes(model)         # int8 + scales vs fp32

How it differs from :mod:`labs.compress.int8`: here only the *storage* is int8 and the product is
an ordinary float matmul after dequantizing (the saving is bytes read per decode step, the point of
Chapter 10); there, activations are quantized too and the product itself runs on integers with
int32 accumulation (the saving is arithmetic, the point of Chapters 19 and 22).
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["quantize_per_channel", "Int8Linear", "quantize_model_int8", "weight_bytes"]


def quantize_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax int8 quantization of a weight (out, in), one scale per output row.

    Returns ``(q, scale)``: ``q`` int8 (out, in) in [-127, 127] and ``scale`` fp32 (out,), so that
    ``q * scale[:, None]`` approximates ``w`` with error at most ``scale / 2`` per entry.
    """
    if w.dim() != 2:
        raise ValueError(f"quantize_per_channel: expected a 2-D weight, got shape {tuple(w.shape)}")
    if not torch.isfinite(w).all():
        raise ValueError("quantize_per_channel: the weight contains NaN or inf")
    scale = w.detach().abs().amax(dim=1).float() / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero
    q = torch.round(w.detach().float() / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


class Int8Linear(nn.Module):
    """A linear layer whose weight is stored as int8 plus fp32 per-output-channel scales."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.out_features, self.in_features = q.shape
        self.register_buffer("weight_int8", q)
        self.register_buffer("scale", scale)
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), False)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Int8Linear:
        """Quantize an ``nn.Linear``."""
        q, scale = quantize_per_channel(linear.weight)
        return cls(q, scale, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in) -> (..., out), computed in the dtype of ``x``."""
        w = self.weight_int8.to(x.dtype) * self.scale.to(x.dtype)[:, None]
        return F.linear(x, w, None if self.bias is None else self.bias.to(x.dtype))


def quantize_model_int8(model: nn.Module, skip: tuple[str, ...] = ("lm_head",)) -> nn.Module:
    """A copy of ``model`` with every ``nn.Linear`` (except names ending in ``skip``) in int8.

    The tiny GPT's ``lm_head`` shares its weight with the token embedding, so it is skipped by
    default: quantizing it would not save memory while the embedding keeps the fp32 copy.
    """
    model = copy.deepcopy(model)
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not full.endswith(skip):
                setattr(module, child_name, Int8Linear.from_linear(child))
    return model


def weight_bytes(model: nn.Module) -> int:
    """Bytes of all parameters and buffers, shared tensors counted once."""
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total
