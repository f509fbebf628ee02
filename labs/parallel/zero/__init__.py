"""ZeRO stages 0-3 on emulated ranks, with a memory ledger measured from the actual tensors.

Rajbhandari et al. (2020), "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", remove the redundancy of data parallelism in three steps.  With ``N`` ranks:

========  =======================================  ==========================  ===============
stage     what each rank keeps                     communication per step      paper's formula
========  =======================================  ==========================  ===============
0 (DDP)   all weights, gradients, optimizer state  all-reduce grads (2 psi)    (2 + 2 + K) psi
1         optimizer state of 1/N of the weights    reduce-scatter + all-gather 4 psi + K psi / N
2         ... and 1/N of the gradients             same (2 psi)                2 psi + (2+K) psi/N
3         ... and 1/N of the weights               all-gather twice + RS (3 psi) (2+2+K) psi / N
========  =======================================  ==========================  ===============

(psi parameters, ``K = 12`` bytes of optimizer state per parameter in mixed precision.)

:class:`ZeroTrainer` runs one rank of that scheme for any ``nn.Module`` whose ``loss(x, y)``
returns a scalar (the tiny GPT of :mod:`labs.gpt`), through :mod:`labs.dist`: call it inside
``dist.launch``.  Everything is fp32 here, so the per-parameter bytes are 4 + 4 + 8 (Adam's two
moments) rather than 2 + 2 + 12; :func:`zero_bytes_per_rank` takes the byte sizes as arguments.

How the trainer shards the parameters and when stage 3 gathers and frees them: see
:mod:`labs.parallel.zero.trainer`.
"""

from __future__ import annotations

from labs.parallel.zero.formulas import padded_numel, zero_bytes_per_rank, zero_comm_bytes_per_rank
from labs.parallel.zero.state import ZeroStateMixin
from labs.parallel.zero.trainer import ZeroTrainer

# This module gathers the pieces under one name: the formulas (labs.parallel.zero.formulas), the trainer
# (labs.parallel.zero.trainer) and its checkpoint methods (labs.parallel.zero.state).
__all__ = [
    "zero_bytes_per_rank",
    "zero_comm_bytes_per_rank",
    "padded_numel",
    "ZeroTrainer",
    "ZeroStateMixin",
]
