"""The int4 group-wise path end to end: quantize, pack two codes per byte, save, load, run.

Each row of a weight (out, in) is cut into groups of ``group_size`` consecutive inputs; a group
keeps one fp16 scale ``s = absmax / 7`` and signed codes ``q = clamp(round(w / s), -8, 7)``.
Two codes share a byte (low nibble first, two's complement), so a weight costs
``4 + 16 / group_size`` bits: 4.5 for groups of 32, 4.25 for groups of 64. This is the layout of
llama.cpp's ``Q4_0`` and of most int4 weight-only formats, up to the order of the nibbles.

* :func:`pack_int4` / :func:`unpack_int4` -- signed codes (..., n) <-> bytes (..., ceil(n / 2)).
* :func:`quantize_int4` -- a weight -> (packed codes, fp16 scales).
* :class:`Int4Linear` -- a linear layer that stores only those and dequantizes in ``forward``.
* :func:`to_int4` -- a copy of a model with every linear layer (but the tied head) in int4;
  :func:`save_int4` / :func:`load_int4` -- a self-describing file: the state dict plus the config.
"""

from __future__ import annotations

import copy
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "pack_int4",
    "unpack_int4",
    "quantize_int4",
    "Int4Linear",
    "to_int4",
    "save_int4",
    "load_int4",
]


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack signed 4-bit codes (integers in -8..7, shape (..., n)) two per byte along the last
    dimension: byte ``j`` holds code ``2j`` in its low nibble and ``2j + 1`` in its high nibble.
    An odd ``n`` is padded with a zero code. Returns uint8 (..., ceil(n / 2))."""
    if q.dtype.is_floating_point or q.dtype == torch.bool:
        raise TypeError(f"pack_int4: codes must be an integer tensor, got {q.dtype}")
    if q.numel() and (int(q.min()) < -8 or int(q.max()) > 7):
        raise ValueError(f"pack_int4: codes must lie in -8..7, got {int(q.min())}..{int(q.max())}")
    u = (q.to(torch.int16) & 0xF).to(torch.uint8)
    if u.shape[-1] % 2:
        u = F.pad(u, (0, 1))
    return u[..., 0::2] | (u[..., 1::2] << 4)


def unpack_int4(packed: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_int4`: uint8 (..., m) -> int8 codes (..., n), n <= 2m."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"unpack_int4: expected uint8 bytes, got {packed.dtype}")
    if not 0 <= n <= 2 * packed.shape[-1]:
        raise ValueError(f"unpack_int4: n={n} codes do not fit in {packed.shape[-1]} bytes")
    lo, hi = packed & 0xF, packed >> 4
    u = torch.stack([lo, hi], dim=-1).flatten(-2)[..., :n].to(torch.int8)
    return torch.where(u > 7, u - 16, u)


def quantize_int4(weight: torch.Tensor, group_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-wise symmetric int4 of a weight (out, in).

    Returns ``(packed, scales)``: uint8 (out, in / 2) and fp16 (out, in / group_size). A group of
    zeros gets scale 1 (its codes are 0). ``in`` must be a multiple of ``group_size``.
    """
    out_f, in_f = weight.shape
    if group_size < 1 or in_f % group_size:
        raise ValueError(
            f"quantize_int4: group_size must divide in_features {in_f}, got {group_size}"
        )
    g = weight.detach().float().reshape(out_f, in_f // group_size, group_size)
    amax = g.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / 7, torch.ones_like(amax)).half()
    q = torch.clamp(torch.round(g / scale.float()), -8, 7).to(torch.int8)
    return pack_int4(q.reshape(out_f, in_f)), scale.squeeze(-1)


class Int4Linear(nn.Module):
    """``nn.Linear`` with int4 group-wise weights (packed codes + fp16 scales) and fp32 bias.

    ``forward`` unpacks and dequantizes the whole weight, then multiplies in fp32: the file and
    the resident weights shrink ~7x, but a CPU without an int4 kernel does extra work per call.
    """

    def __init__(self, in_features: int, out_features: int, group_size: int = 32, bias=True):
        super().__init__()
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        self.register_buffer(
            "packed", torch.zeros(out_features, in_features // 2, dtype=torch.uint8)
        )
        self.register_buffer(
            "scales", torch.ones(out_features, in_features // group_size, dtype=torch.float16)
        )
        self.register_buffer("bias", torch.zeros(out_features) if bias else None)

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 32) -> Int4Linear:
        """Quantize an ``nn.Linear`` (its ``in_features`` a multiple of ``group_size``)."""
        layer = cls(linear.in_features, linear.out_features, group_size, linear.bias is not None)
        layer.packed, layer.scales = quantize_int4(linear.weight, group_size)
        if linear.bias is not None:
            layer.bias = linear.bias.detach().float().clone()
        return layer

    def weight_float(self) -> torch.Tensor:
        """The dequantized weight (out, in), float32."""
        q = unpack_int4(self.packed, self.in_features).float()
        q = q.view(self.out_features, -1, self.group_size) * self.scales.float()[..., None]
        return q.view(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_float().to(x.dtype), self.bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, group_size={self.group_size}"


def _linear_names(model: nn.Module) -> list[str]:
    from labs.compress.measure import linear_names

    return linear_names(model)


def to_int4(model: nn.Module, group_size: int = 32) -> nn.Module:
    """A copy of ``model`` whose linear layers (all but the tied head) are :class:`Int4Linear`."""
    model = copy.deepcopy(model)
    for name in _linear_names(model):
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, child, Int4Linear.from_linear(getattr(owner, child), group_size))
    return model


def save_int4(model: nn.Module, path: str | os.PathLike, group_size: int = 32) -> int:
    """Quantize a :class:`labs.gpt.GPT` to int4 and write it with its config; returns bytes."""
    q = to_int4(model, group_size)
    torch.save(
        {"config": vars(model.config), "group_size": group_size, "state": q.state_dict()}, path
    )
    return os.path.getsize(path)


def load_int4(path: str | os.PathLike) -> nn.Module:
    """Rebuild the int4 GPT written by :func:`save_int4`: the float skeleton, its linear layers
    swapped for empty :class:`Int4Linear`, then the saved buffers loaded (strictly)."""
    from labs import gpt

    blob = torch.load(path, weights_only=True)
    model = gpt.GPT(gpt.GPTConfig(**blob["config"]))  # float skeleton (tiny: init is cheap)
    for name in _linear_names(model):
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        lin = getattr(owner, child)
        setattr(
            owner,
            child,
            Int4Linear(lin.in_features, lin.out_features, blob["group_size"], lin.bias is not None),
        )
    model.load_state_dict(blob["state"], strict=True)
    return model.eval()
