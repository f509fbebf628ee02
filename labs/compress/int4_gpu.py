"""int4 weight-only matrix products on NVIDIA GPUs with PyTorch's tinygemm kernel (Chapter 22).

The weights stay in GPU memory as 4-bit codes, two per byte, with one bf16 scale and zero per
group of ``group_size`` input channels; ``torch._weight_int4pack_mm`` dequantizes tiles in
registers while it multiplies bf16 activations. A decode step, which reads every weight once per
token, then reads a quarter of the bytes of bf16.

How it differs from its neighbours: :mod:`labs.compress.int4` writes packed int4 *files* for a
device and dequantizes them on load (the model runs in float); :mod:`labs.compress.int8`
quantizes the activations too and multiplies integers (W8A8, ``torch._int_mm``).

The code-and-scale arithmetic is device-independent (:func:`quantize_groups`,
:func:`dequantize_groups`): the kernel computes ``W = (q - 8) * scale + zero`` for codes
``q`` in 0..15, so an asymmetric min/max grid ``W = min + q * scale`` needs
``zero = min + 8 * scale``. The packing and the kernel need CUDA, compute capability 8.0 or newer
(:func:`labs.basics.device.int4_weight_only` says whether this device has them).
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["quantize_groups", "dequantize_groups", "Int4WeightOnlyLinear"]


def quantize_groups(w: torch.Tensor, group_size: int = 128):
    """Asymmetric 4-bit codes of ``w`` (out, in) per group of ``group_size`` inputs.

    Returns ``(codes, scales, zeros)``: ``codes`` uint8 (out, in) in 0..15, ``scales`` and
    ``zeros`` float32 (out, in // group_size) in the kernel's convention, so that
    ``(codes - 8) * scale + zero`` approximates ``w`` within half a step.
    """
    if w.dim() != 2 or w.shape[1] % group_size:
        raise ValueError(
            f"quantize_groups: need a (out, in) weight with in divisible by group_size="
            f"{group_size}, got {tuple(w.shape)}"
        )
    g = w.detach().float().reshape(w.shape[0], -1, group_size)
    lo, hi = g.amin(-1), g.amax(-1)
    scales = ((hi - lo) / 15).clamp_min(1e-8)
    codes = torch.round((g - lo[..., None]) / scales[..., None]).clamp(0, 15)
    zeros = lo + 8 * scales
    return codes.to(torch.uint8).reshape(w.shape), scales, zeros


def dequantize_groups(codes, scales, zeros, group_size: int = 128) -> torch.Tensor:
    """float32 (out, in) weight the kernel sees: ``(codes - 8) * scale + zero`` per group."""
    g = codes.float().reshape(codes.shape[0], -1, group_size) - 8
    return (g * scales[..., None] + zeros[..., None]).reshape(codes.shape)


def _pack_checked(codes, sz, group_size: int, inner_k_tiles: int) -> torch.Tensor:
    """Codes (out, in) packed for the kernel, two per byte, verified by the kernel itself.

    torchao's layout puts the even input channel in the high nibble; the order has differed
    between backends, so the packed weight is multiplied by the identity and compared with
    :func:`dequantize_groups` (one small product at construction), and the other order is tried
    if the first does not reproduce the weight.
    """
    want = dequantize_groups(codes, sz[..., 0].T.float(), sz[..., 1].T.float(), group_size)
    eye = torch.eye(codes.shape[1], device=codes.device, dtype=torch.bfloat16)
    for hi, lo in ((0, 1), (1, 0)):
        packed = (codes[:, hi::2] << 4 | codes[:, lo::2]).contiguous()
        packed = torch._convert_weight_to_int4pack(packed, inner_k_tiles)
        got = torch._weight_int4pack_mm(eye, packed, group_size, sz).float().T  # (out, in)
        if torch.allclose(got, want, rtol=1e-2, atol=1e-2 * float(want.abs().max())):
            return packed
    raise RuntimeError(
        "Int4WeightOnlyLinear: torch._weight_int4pack_mm does not reproduce the quantized weight "
        f"in either nibble order (torch {torch.__version__}): its packing has changed"
    )


class Int4WeightOnlyLinear(nn.Module):
    """``nn.Linear`` with int4 weights on a CUDA GPU (tinygemm); inputs run in bf16.

    Args:
        linear: the layer to quantize (its weight (out, in) with ``in`` divisible by
            ``group_size`` and by 16 * ``inner_k_tiles``; ``out`` divisible by 8).
        group_size: input channels per scale and zero (32, 64, 128 or 256).
        inner_k_tiles: the kernel's tiling of the input dimension (2, 4 or 8).

    The output has the input's dtype. The packed weight takes ``out * in / 2`` bytes.
    """

    def __init__(self, linear: nn.Linear, group_size: int = 128, inner_k_tiles: int = 8):
        super().__init__()
        w = linear.weight
        if w.device.type != "cuda":
            raise ValueError(
                f"Int4WeightOnlyLinear: the tinygemm kernel runs on CUDA; the weight is on "
                f"{w.device} (move the layer with .to('cuda') first)"
            )
        out_f, in_f = w.shape
        if in_f % (16 * inner_k_tiles) or out_f % 8:
            raise ValueError(
                f"Int4WeightOnlyLinear: need in_features divisible by {16 * inner_k_tiles} and "
                f"out_features by 8, got ({out_f}, {in_f})"
            )
        codes, scales, zeros = quantize_groups(w, group_size)
        sz = torch.stack([scales, zeros], dim=-1).transpose(0, 1).contiguous()  # (groups, out, 2)
        sz = sz.to(torch.bfloat16)
        self.register_buffer("scales_and_zeros", sz)
        self.register_buffer("packed", _pack_checked(codes, sz, group_size, inner_k_tiles))
        bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
        self.register_buffer("bias", bias)
        self.group_size, self.in_features, self.out_features = group_size, in_f, out_f

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, self.in_features).to(torch.bfloat16)
        y = torch._weight_int4pack_mm(x2, self.packed, self.group_size, self.scales_and_zeros)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)
