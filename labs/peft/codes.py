"""The code tables of 4-bit and 8-bit block quantization (QLoRA, Chapter 5).

A code is a sorted 1-D float32 tensor of levels in [-1, 1]; quantizing a value scaled into that
range means storing the index of its nearest level (:func:`nearest_code`). Codes are constants,
built on the CPU (the same bits on every machine); their users move them to the data's device.

* :data:`NF4_CODE`: the 16 NormalFloat levels of NF4 (:func:`normal_float_code` rebuilds them from
  normal quantiles);
* :data:`CODES8`: the 8-bit codes double quantization can use for the per-block absmax constants,
  bitsandbytes' :func:`dynamic_code` (the default), :func:`linear_code` and :func:`fp8_code`.

:mod:`labs.peft.nf4` (NF4 tensors and layers) uses them and re-exports every public name.
"""

from __future__ import annotations

import torch

__all__ = [
    "NF4_CODE",
    "normal_float_code",
    "dynamic_code",
    "linear_code",
    "fp8_code",
    "CODES8",
    "nearest_code",
    "pad_to_blocks",
]

NF4_CODE = torch.tensor(
    [
        -1.0,
        -0.6961928009986877,
        -0.5250730514526367,
        -0.39491748809814453,
        -0.28444138169288635,
        -0.18477343022823334,
        -0.09105003625154495,
        0.0,
        0.07958029955625534,
        0.16093020141124725,
        0.24611230194568634,
        0.33791524171829224,
        0.44070982933044434,
        0.5626170039176941,
        0.7229568362236023,
        1.0,
    ],
    device="cpu",
)
"""The 16 NF4 levels (Dettmers et al. 2023), as in bitsandbytes; index 7 is an exact zero."""


def normal_float_code(offset: float = 0.9677083) -> torch.Tensor:
    """Rebuild the NF4 levels from quantiles of the standard normal distribution.

    Eight positive levels are the quantiles at probabilities evenly spaced from ``offset`` down
    to 0.5 (the last one, the median, is dropped), seven negative levels mirror the quantiles
    from ``offset`` to 0.5 with one fewer step, and zero is added so that it is exact. Dividing
    by the largest level maps the code onto [-1, 1]. Returns 16 sorted float32 values.
    """
    cpu64 = {"dtype": torch.float64, "device": "cpu"}
    normal = torch.distributions.Normal(torch.tensor(0.0, device="cpu"), 1.0)
    pos = normal.icdf(torch.linspace(offset, 0.5, 9, **cpu64)[:-1])
    neg = -normal.icdf(torch.linspace(offset, 0.5, 8, **cpu64)[:-1])
    code = torch.cat([pos, neg, torch.zeros(1, **cpu64)])
    return (code / code.max()).sort().values.float()


def dynamic_code() -> torch.Tensor:
    """The signed 8-bit "dynamic" code of bitsandbytes (used for double quantization).

    An 8-bit value is a sign, a decimal exponent ``e`` in 0..6 and a fraction: level ``e`` holds
    ``2**e`` values spread evenly (at bin midpoints) over [0.1, 1] * 10**(e - 6), so small
    magnitudes get fine steps and large ones coarse steps, like a float with few mantissa bits.
    Zero and 1.0 are added. Returns 256 sorted float32 values in [-1, 1].
    """
    values = [0.0, 1.0]
    for e in range(7):
        edges = torch.linspace(0.1, 1.0, 2**e + 1, dtype=torch.float32, device="cpu")
        mids = ((edges[:-1] + edges[1:]) / 2 * 10.0 ** (e - 6)).tolist()
        values += mids + [-m for m in mids]
    return torch.tensor(sorted(values), dtype=torch.float32, device="cpu")


def linear_code() -> torch.Tensor:
    """A symmetric linear int8 code: the 255 values k / 127 for k = -127..127 (float32)."""
    return torch.arange(-127, 128, dtype=torch.float32, device="cpu") / 127


def fp8_code() -> torch.Tensor:
    """Every finite float8 e4m3 value divided by its maximum (448): 253 sorted float32 values."""
    raw = torch.arange(256, dtype=torch.uint8, device="cpu").view(torch.float8_e4m3fn).float()
    vals = torch.unique(raw[torch.isfinite(raw)])
    return vals / vals.abs().max()


CODES8 = {"dynamic": dynamic_code, "linear": linear_code, "fp8": fp8_code}
"""The 8-bit codes double quantization can use for the absmax constants (name -> builder)."""


def nearest_code(x: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """Index of the nearest entry of the sorted ``code`` for every element of ``x`` (int64)."""
    mids = (code[1:] + code[:-1]) / 2
    return torch.bucketize(x, mids)


def pad_to_blocks(x: torch.Tensor, blocksize: int) -> tuple[torch.Tensor, int]:
    """Flatten ``x`` and zero-pad it to whole blocks: returns ((n_blocks, blocksize), padding)."""
    flat = x.reshape(-1)
    pad = (-flat.numel()) % blocksize
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    return flat.view(-1, blocksize), pad
