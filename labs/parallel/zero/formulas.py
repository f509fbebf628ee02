"""ZeRO's memory and communication per rank, as formulas (Chapter 16).

Rajbhandari et al. (2020) remove the redundancy of data parallelism in three steps; with ``N``
ranks and ``psi`` parameters a rank keeps (bytes per parameter ``w`` weights, ``g`` gradients,
``K`` optimizer state; the paper's mixed-precision Adam has 2 + 2 + 12):

* stage 0 (plain data parallelism): ``(w + g + K) psi``;
* stage 1 shards the optimizer state: ``(w + g) psi + K psi / N``;
* stage 2 also the gradients: ``w psi + (g + K) psi / N``;
* stage 3 also the weights: ``(w + g + K) psi / N``.

:class:`labs.parallel.zero.trainer.ZeroTrainer` measures the same quantities from its tensors.
"""

from __future__ import annotations

import math

__all__ = ["zero_bytes_per_rank", "zero_comm_bytes_per_rank", "padded_numel"]


def zero_bytes_per_rank(
    n_params: float,
    world_size: int,
    stage: int,
    param_bytes: float = 2.0,
    grad_bytes: float = 2.0,
    optim_bytes: float = 12.0,
) -> dict[str, float]:
    """Model-state bytes per rank under ZeRO ``stage`` (0 = plain data parallelism).

    Defaults are the paper's mixed-precision Adam (2 + 2 + 12 bytes per parameter); pass
    ``4, 4, 8`` for fp32 Adam.  Activations are not included.

    Returns:
        ``{"weights", "gradients", "optimizer", "total"}`` in bytes.
    """
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    n = world_size
    out = {
        "weights": n_params * param_bytes / (n if stage >= 3 else 1),
        "gradients": n_params * grad_bytes / (n if stage >= 2 else 1),
        "optimizer": n_params * optim_bytes / (n if stage >= 1 else 1),
    }
    out["total"] = out["weights"] + out["gradients"] + out["optimizer"]
    return out


def zero_comm_bytes_per_rank(
    n_params: float, world_size: int, stage: int, bytes_per_elem: float = 2.0
) -> float:
    """Bytes one rank sends per step with ring collectives: ``2(N-1)/N psi`` for stages 0-2
    (all-reduce, or reduce-scatter + all-gather), ``3(N-1)/N psi`` for stage 3."""
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage!r}")
    k = 3 if stage == 3 else 2
    return k * (world_size - 1) / world_size * n_params * bytes_per_elem


def padded_numel(numel: int, world_size: int) -> int:
    """``numel`` rounded up to a multiple of ``world_size`` (each rank then owns an equal slice)."""
    return world_size * math.ceil(numel / world_size)
