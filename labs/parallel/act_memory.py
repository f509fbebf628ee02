"""Activation memory of one transformer block under TP and TP+SP: predicted and measured.

Chapter 4 counted the bytes a :class:`labs.gpt.Block` saves for backward (no dropout, fp32,
flash-style attention that keeps one log-sum-exp per head and row instead of the ``s x s``
scores): ``16 sbh + 4 bs + abs`` numbers.  With tensor parallelism of degree ``t`` the
projections, attention and MLP inside the parallel regions are split; the two layer norms' inputs
and outputs (``4 sbh``) and statistics (``4 bs``) are not.  Sequence parallelism splits those
too.  These are the analogues of Korthikanti et al.'s ``sbh(10 + 24/t + 5as/(ht))`` and
``sbh(34/t + 5as/(ht))`` (:func:`labs.training.activations.korthikanti_layer_bytes`) for this block.
"""

from __future__ import annotations

import torch

from labs import dist
from labs.training.activations import SavedTensorLedger

from .sequence_parallel import SPBlock, TPBlock

__all__ = ["tiny_block_numbers", "measure_block_bytes"]


def tiny_block_numbers(s: int, b: int, h: int, a: int, t: int = 1, sp: bool = False) -> float:
    """Numbers (not bytes) one rank's :class:`labs.gpt.Block` saves for backward.

    ``t = 1``: ``16 sbh + 4 bs + abs``.  TP: ``4 sbh + 4 bs + (12 sbh + abs) / t``.
    TP + SP: ``(16 sbh + 4 bs + abs) / t``.  Multiply by the element size for bytes.
    """
    if min(s, b, h, a, t) <= 0:
        raise ValueError(f"s, b, h, a, t must be positive, got {s}, {b}, {h}, {a}, {t}")
    sbh, bs = s * b * h, b * s
    if sp:
        return (16 * sbh + 4 * bs + a * bs) / t
    return 4 * sbh + 4 * bs + (12 * sbh + a * bs) / t


def measure_block_bytes(block, x: torch.Tensor, t: int, sp: bool) -> list[int]:
    """Bytes each of ``t`` emulated ranks saves for backward in the forward pass of ``block``
    (a :class:`labs.gpt.Block`) made tensor parallel (``sp=False``) or tensor + sequence
    parallel (``sp=True``), on input ``x`` of shape ``(b, s, h)`` (``s`` divisible by ``t``)."""
    b, s, h = x.shape
    if s % t:
        raise ValueError(f"measure_block_bytes: sequence length {s} not divisible by t={t}")

    def program() -> int:
        r = dist.get_rank()
        part = (SPBlock if sp else TPBlock)(block, r, t)
        xi = x[:, r * s // t : (r + 1) * s // t] if sp else x
        xi = xi.detach().clone().requires_grad_()
        ledger = SavedTensorLedger(exclude=part.parameters())
        with ledger:
            part(xi)
        return ledger.total_bytes

    return dist.launch(program, t)
