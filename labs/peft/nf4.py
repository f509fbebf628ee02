"""4-bit NormalFloat (NF4) quantization with double quantization, from scratch (QLoRA, Chapter 5).

A weight tensor is cut into blocks of ``blocksize`` consecutive values (64 by default). Each block
is divided by its absolute maximum, so that its values lie in [-1, 1], and every value is replaced
by the index (0..15) of the nearest entry of :data:`NF4_CODE`. Two 4-bit indices are packed into
one byte. The per-block absmax constants are themselves quantized ("double quantization"): their
mean is subtracted and the rest is stored as 8-bit codes of bitsandbytes' dynamic map, in blocks
of 256 with one float32 scale each. Storage per parameter for block size 64::

    without double quantization: 4 + 32/64             = 4.5 bits
    with double quantization:    4 + 8/64 + 32/(64*256) = 4.127 bits (+ one float32 mean)

Entry points: :func:`nf4_quantize` -> :class:`NF4Tensor` (``dequantize()``,
``bits_per_param``), :class:`NF4Linear` (a frozen linear layer whose weight is NF4, dequantized
on the fly), :func:`quantize_linears` (swap a model's linear layers for NF4 ones). The QLoRA layer
itself is :class:`labs.peft.lora.LoRALinear` wrapped around an :class:`NF4Linear`
(see :func:`labs.peft.lora.apply_lora` with ``quantize=True``).

The code tables (``NF4_CODE``, the 8-bit codes ``CODES8``) live in :mod:`labs.peft.codes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from labs.peft.codes import (
    CODES8,
    NF4_CODE,
    nearest_code,
    pad_to_blocks,
)

__all__ = [
    "NF4Tensor",
    "nf4_quantize",
    "NF4Linear",
    "quantize_linears",
]


def _quantize_absmax(absmax: torch.Tensor, code: str, blocksize: int = 256):
    """Double quantization: (absmax - mean) as 8-bit codes in blocks of ``blocksize``."""
    offset = absmax.mean()
    blocks, _ = pad_to_blocks(absmax - offset, blocksize)
    scale = blocks.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny)
    q = nearest_code(blocks / scale[:, None], CODES8[code]().to(absmax.device)).to(torch.uint8)
    return q.view(-1)[: absmax.numel()], scale, offset  # the padding codes are not stored


@dataclass
class NF4Tensor:
    """A weight stored in NF4. Build it with :func:`nf4_quantize`; read it with ``dequantize()``.

    Attributes:
        packed: uint8, two 4-bit codes per byte (first code in the high nibble).
        absmax: float32 per-block scales, or ``None`` when they are double-quantized.
        absmax_q, absmax_scale, absmax_offset: the double-quantized scales (uint8 codes, one
            float32 scale per 256 codes, one float32 mean), or ``None``.
        shape, dtype: of the original tensor.
        blocksize: values per block.
        padding: zeros appended to fill the last block (dropped again by ``dequantize``).
        absmax_code: name of the 8-bit code of the double-quantized scales (see ``CODES8``).
    """

    packed: torch.Tensor
    absmax: torch.Tensor | None
    absmax_q: torch.Tensor | None
    absmax_scale: torch.Tensor | None
    absmax_offset: torch.Tensor | None
    shape: torch.Size
    dtype: torch.dtype
    blocksize: int
    padding: int
    absmax_code: str = "dynamic"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def block_absmax(self) -> torch.Tensor:
        """The per-block scales in float32 (dequantized first when double-quantized)."""
        if self.absmax is not None:
            return self.absmax
        code = CODES8[self.absmax_code]().to(self.absmax_q.device)
        values = code[self.absmax_q.long()]
        scale = self.absmax_scale.repeat_interleave(256)[: values.numel()]
        return values * scale + self.absmax_offset

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The approximate weight, in the original shape and ``dtype`` (default: original)."""
        codes = torch.stack([self.packed >> 4, self.packed & 0xF], dim=1).view(-1)
        values = NF4_CODE.to(self.packed.device)[codes.long()].view(-1, self.blocksize)
        out = (values * self.block_absmax()[:, None]).view(-1)
        if self.padding:
            out = out[: -self.padding]
        return out.view(self.shape).to(dtype or self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of all stored tensors (the shared code tables are not counted)."""
        parts = [self.packed, self.absmax, self.absmax_q, self.absmax_scale, self.absmax_offset]
        return sum(t.numel() * t.element_size() for t in parts if t is not None)

    @property
    def bits_per_param(self) -> float:
        """Stored bits per original element: ~4.127 with double quantization, 4.5 without."""
        return 8 * self.nbytes / self.numel


def nf4_quantize(
    weight: torch.Tensor,
    blocksize: int = 64,
    double_quant: bool = True,
    absmax_code: str = "dynamic",
) -> NF4Tensor:
    """Quantize a floating-point tensor to NF4 with block-wise absmax scaling.

    Args:
        weight: any shape, float dtype (float32, bfloat16, float16, float64). A size that is not
            a multiple of ``blocksize`` is zero-padded; the padding is recorded and removed on
            dequantization.
        blocksize: values per absmax block; a positive even number (64 in QLoRA).
        double_quant: quantize the per-block absmax values to 8 bits (blocks of 256).
        absmax_code: the 8-bit code for them: ``"dynamic"`` (bitsandbytes' map, the default),
            ``"fp8"`` (float8 e4m3 values, as in the QLoRA paper) or ``"linear"`` (int8).

    Returns:
        An :class:`NF4Tensor`; ``.dequantize()`` gives back a tensor like ``weight``.

    Raises:
        ValueError: ``weight`` is not floating point, is empty, or ``blocksize`` is not a
            positive even integer.
    """
    if not torch.is_tensor(weight) or not weight.is_floating_point():
        got = weight.dtype if torch.is_tensor(weight) else type(weight).__name__
        raise ValueError(
            f"nf4_quantize: expected a floating-point tensor, got {got}; NF4 quantizes real-valued "
            "weights (convert with .float() if the values are meant as numbers)"
        )
    if weight.numel() == 0:
        raise ValueError("nf4_quantize: the tensor is empty; there is nothing to quantize")
    if not isinstance(blocksize, int) or blocksize <= 0 or blocksize % 2:
        raise ValueError(
            f"nf4_quantize: blocksize must be a positive even integer (two codes per byte), "
            f"got {blocksize!r}"
        )
    if absmax_code not in CODES8:
        raise ValueError(
            f"nf4_quantize: absmax_code must be one of {sorted(CODES8)}, got {absmax_code!r}"
        )
    blocks, pad = pad_to_blocks(weight.detach().float(), blocksize)
    absmax = blocks.abs().amax(dim=1)
    normed = blocks / absmax.clamp_min(torch.finfo(torch.float32).tiny)[:, None]
    codes = nearest_code(normed, NF4_CODE.to(weight.device)).to(torch.uint8).view(-1)
    packed = (codes[0::2] << 4) | codes[1::2]
    dq = _quantize_absmax(absmax, absmax_code) if double_quant else (None, None, None)
    return NF4Tensor(
        packed=packed,
        absmax=None if double_quant else absmax,
        absmax_q=dq[0],
        absmax_scale=dq[1],
        absmax_offset=dq[2],
        shape=weight.shape,
        dtype=weight.dtype,
        blocksize=blocksize,
        padding=pad,
        absmax_code=absmax_code,
    )


class _NF4Matmul(torch.autograd.Function):
    """``x @ dequantize(W).T + b`` that keeps only the NF4 tensor for backward.

    Left to autograd, ``F.linear`` would save its dequantized weight operand until backward, a
    full-precision copy of every frozen weight. Like bitsandbytes' ``MatMul4Bit``, this keeps a
    reference to the 4-bit codes and scales (the layer's buffers, no copy) and dequantizes again
    in backward. Weight and bias are frozen: only ``x`` gets a gradient, ``grad @ W``.
    """

    @staticmethod
    def forward(ctx, x, qweight: NF4Tensor, bias, dtype):
        ctx.qweight, ctx.dtype = qweight, dtype
        return F.linear(x, qweight.dequantize(dtype), bias)  # the weight is freed right after

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        return grad_out @ ctx.qweight.dequantize(ctx.dtype), None, None, None


class NF4Linear(nn.Module):
    """A frozen linear layer whose weight is stored in NF4 and dequantized in every forward.

    ``y = x @ dequantize(W).T + b``, computed in ``compute_dtype`` (float32 or bfloat16) and
    returned in the dtype of ``x``. Nothing here is trainable: QLoRA trains an adapter beside it.
    The dequantized weight lives only for one matmul: backward dequantizes it again to pass the
    gradient to ``x`` (see ``_NF4Matmul``), so autograd keeps 4-bit codes, not a float copy.
    """

    def __init__(self, qweight: NF4Tensor, bias: torch.Tensor | None, compute_dtype=torch.float32):
        super().__init__()
        if len(qweight.shape) != 2:
            raise ValueError(f"NF4Linear: expected a 2-D weight, got shape {tuple(qweight.shape)}")
        self.out_features, self.in_features = qweight.shape
        self.compute_dtype = compute_dtype
        self._meta = (qweight.shape, qweight.dtype, qweight.blocksize, qweight.padding)
        self._absmax_code = qweight.absmax_code
        for name in ("packed", "absmax", "absmax_q", "absmax_scale", "absmax_offset"):
            self.register_buffer(name, getattr(qweight, name))
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        blocksize: int = 64,
        double_quant: bool = True,
        compute_dtype: torch.dtype = torch.float32,
    ) -> NF4Linear:
        """Quantize ``linear.weight`` (out_features, in_features) to NF4; keep the bias as is."""
        q = nf4_quantize(linear.weight, blocksize=blocksize, double_quant=double_quant)
        return cls(q, linear.bias, compute_dtype)

    @property
    def qweight(self) -> NF4Tensor:
        shape, dtype, blocksize, padding = self._meta
        return NF4Tensor(
            self.packed,
            self.absmax,
            self.absmax_q,
            self.absmax_scale,
            self.absmax_offset,
            shape,
            dtype,
            blocksize,
            padding,
            self._absmax_code,
        )

    @property
    def weight(self) -> torch.Tensor:
        """The dequantized weight (out_features, in_features) in ``compute_dtype``."""
        return self.qweight.dequantize(self.compute_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(self.compute_dtype)
        y = _NF4Matmul.apply(x.to(self.compute_dtype), self.qweight, bias, self.compute_dtype)
        return y.to(x.dtype)

    def extra_repr(self) -> str:
        q = self.qweight
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"blocksize={q.blocksize}, bits_per_param={q.bits_per_param:.3f}, "
            f"compute_dtype={self.compute_dtype}"
        )


def quantize_linears(
    model: nn.Module,
    skip: tuple[str, ...] = ("lm_head",),
    blocksize: int = 64,
    double_quant: bool = True,
    compute_dtype: torch.dtype = torch.float32,
) -> nn.Module:
    """Replace every ``nn.Linear`` of ``model`` (except names ending in ``skip``) by NF4Linear.

    Works in place and returns ``model``. The output head is skipped by default because the tiny
    GPT ties it to the token embedding, which stays in full precision.
    """
    names = [
        n
        for n, m in model.named_modules()
        if isinstance(m, nn.Linear) and not n.endswith(tuple(skip))
    ]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        linear = getattr(parent, child)
        setattr(
            parent, child, NF4Linear.from_linear(linear, blocksize, double_quant, compute_dtype)
        )
    return model
